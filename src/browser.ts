/** The browser runtime: a msw `setupWorker` already wired to a Petstore. */
import { setupWorker, type SetupWorker } from 'msw/browser'
import { describeValue, PetstoreError } from './errors.js'
import type { Petstore, PetstoreOptions } from './petstore.js'

/**
 * @note The petstore itself comes in its own chunk: msw's `setupWorker()` alone makes a 416 kB
 * chunk in a Vite build, and with this package's 184 kB in the same chunk Vite printed its
 * advisory about chunks over 500 kB. A top-level `await import()` lets every bundler split it off
 * while `setupPetstoreWorker()`, `petstore.scenario` and `petstore.requests.all()` stay
 * synchronous: the module settles once that chunk is loaded, which the README's
 * `await import('./mocks')` waits for. A bundler without code splitting inlines it.
 */
const { createPetstore, persistInSession, PERSIST_STORAGE_KEY: STORAGE_KEY, BUILTIN_SCENARIO_NAMES: BUILTIN_NAMES } =
  await import('./browser/worker-runtime.js')

/** Options of {@link setupPetstoreWorker}: those of `createPetstore`, plus `persist`. */
export interface PetstoreWorkerOptions extends PetstoreOptions {
  /**
   * Keep the categories (and the id counter) across page reloads, in this tab's sessionStorage
   * under {@link PERSIST_STORAGE_KEY}. Restored only when the page starts with the scenario that
   * saved them; the journal is not kept; `reset()` goes back to the seed.
   * @default false
   */
  persist?: boolean
}

/** What {@link setupPetstoreWorker} returns: the msw worker and the petstore behind it. */
export interface PetstoreWorker {
  /** The msw worker: `await worker.start()` before the app renders, as usual. */
  readonly worker: SetupWorker
  readonly petstore: Petstore
}

/**
 * Creates a Petstore and an msw `setupWorker` serving it. Needs msw's worker script in the
 * public folder once: `npx msw init public/ --save`.
 *
 * @example
 * const { worker, petstore } = setupPetstoreWorker({ baseUrl: '/v1', scenario: 'default', persist: true })
 * await worker.start({ onUnhandledRequest: 'bypass' }) // msw 3: onUnhandledFrame
 * createRoot(document.getElementById('root')!).render(<App />)
 */
export function setupPetstoreWorker(options: PetstoreWorkerOptions = {}): PetstoreWorker {
  const { persist = false, ...petstoreOptions } = options
  if (typeof persist !== 'boolean') {
    throw new PetstoreError('invalid_option', `Invalid petstore option persist: expected true or false, received ${describeValue(persist)}`)
  }
  const petstore = createPetstore(petstoreOptions)
  if (persist) {
    const storage = sessionStorageOrWarn()
    // A failed scenario load already rejects `petstore.ready`, which the caller sees.
    if (storage) persistInSession(petstore, storage).catch(() => undefined)
  }
  return { worker: setupWorker(...petstore.handlers), petstore }
}

/** @note Reading `sessionStorage` throws in sandboxed frames and with storage blocked. */
function sessionStorageOrWarn(): Storage | undefined {
  let reason = 'there is none'
  try {
    if (globalThis.sessionStorage) return globalThis.sessionStorage
  } catch (error) {
    reason = String(error)
  }
  console.warn(`petstore-sandbox: persist is on but sessionStorage is unavailable (${reason}); state will not survive a reload.`)
  return undefined
}

/** The sessionStorage key under which `persist: true` keeps the petstore's state. */
export const PERSIST_STORAGE_KEY = STORAGE_KEY
/** Names of the scenarios embedded in the package: `default`, `empty`, … */
export const BUILTIN_SCENARIO_NAMES: readonly string[] = BUILTIN_NAMES
export { PetstoreError } from './errors.js'

export type { Petstore, PetstoreOptions, ResetOptions } from './petstore.js'
export type { ScenarioFile, Scenario } from './scenario/scenario-format.js'
export type { JournalEntry, JournalFilter } from './core/journal.js'
