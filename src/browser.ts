/** The browser runtime: a msw `setupWorker` already wired to a Petstore. */
import { getResponse, http, type HttpHandler } from 'msw'
import { setupWorker, type SetupWorker } from 'msw/browser'
import { describeValue, PetstoreError } from './core/petstore-error.js'
import type { Petstore, PetstoreOptions } from './library/petstore.js'

/**
 * @note The petstore itself (zod, @msw/data, the scenarios, the pipeline) is loaded with a dynamic
 * `import()` when `setupPetstoreWorker()` is called, so every bundler emits it as a chunk of its
 * own: msw's `setupWorker()` alone makes a 416 kB chunk in a Vite build, and with this package's
 * 184 kB in the same chunk Vite printed its advisory about chunks over 500 kB. Not a top-level
 * `await`: Vite 5 and 6 (and older webpack) refuse to build one for their default targets.
 */
const loadRuntime = () => import('./browser/worker-runtime.js')

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
  let loaded: Petstore | undefined
  const loading = loadRuntime().then((runtime) => {
    const petstore = runtime.createPetstore(petstoreOptions)
    if (persist) {
      const storage = sessionStorageOrWarn()
      // A failed scenario load already rejects `petstore.ready`, which the caller sees.
      if (storage) runtime.persistInSession(petstore, storage).catch(() => undefined)
    }
    loaded = petstore
    return petstore
  })
  // @note Marked handled here: the caller sees a failure through `worker.start()` or `ready`.
  loading.catch(() => undefined)
  // One handler that waits for the petstore once, then hands each request to its handlers;
  // what they leave unanswered (another origin, a static file) goes on to the app's own handlers.
  const handlers: HttpHandler[] = [
    http.all('*', async ({ request }) => getResponse((loaded ?? (await loading)).handlers, request)),
  ]
  const worker = setupWorker(...handlers)
  const start = worker.start.bind(worker)
  // `await worker.start()` also waits for the petstore, so the app renders against a ready one.
  worker.start = async (startOptions) => {
    const registration = await start(startOptions)
    await (await loading).ready
    return registration
  }
  return { worker, petstore: lazyPetstore(loading, () => loaded, handlers) }
}

/**
 * The petstore the caller gets at once, standing for the one being loaded: its async methods wait
 * for it, and its synchronous parts (`scenario`, `requests`) are there once `worker.start()` or
 * `ready` has resolved (before, they throw, saying so).
 */
function lazyPetstore(loading: Promise<Petstore>, loaded: () => Petstore | undefined, handlers: HttpHandler[]): Petstore {
  const now = (what: string): Petstore => {
    const petstore = loaded()
    if (petstore) return petstore
    throw new PetstoreError('not_ready', `petstore.${what} is not there yet: await worker.start() (or petstore.ready) before reading it`)
  }
  const later = async (): Promise<Petstore> => loaded() ?? (await loading)
  const ready = loading.then((petstore) => petstore.ready)
  // @note Marked handled, as `createPetstore()`'s own `ready` is: an app that awaits only
  // `worker.start()` sees the error there, and must not get an unhandled rejection besides.
  ready.catch(() => undefined)
  return {
    handlers,
    ready,
    get scenario() {
      return now('scenario').scenario
    },
    useScenario: async (scenario) => (await later()).useScenario(scenario),
    useBaseline: async (scenario) => (await later()).useBaseline(scenario),
    seed: async (data) => (await later()).seed(data),
    reset: async (resetOptions) => (await later()).reset(resetOptions),
    categories: {
      list: async () => (await later()).categories.list(),
      create: async (input) => (await later()).categories.create(input),
    },
    pets: {
      list: async () => (await later()).pets.list(),
      get: async (id) => (await later()).pets.get(id),
    },
    orders: {
      list: async () => (await later()).orders.list(),
    },
    answers: {
      next: (answer) => now('answers').answers.next(answer),
      pending: () => now('answers').answers.pending(),
      clear: () => now('answers').answers.clear(),
    },
    requests: {
      all: (filter) => now('requests').requests.all(filter),
      clear: () => now('requests').requests.clear(),
      waitFor: async (match, waitOptions) => (await later()).requests.waitFor(match, waitOptions),
    },
  }
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

export { PERSIST_STORAGE_KEY } from './browser/persist-key.js'
export { BUILTIN_SCENARIO_NAMES } from './scenario/builtin-names.js'
export { PetstoreError } from './core/petstore-error.js'

export type { Petstore, PetstoreOptions, ResetOptions } from './library/petstore.js'
export type { ScenarioFile, Scenario, SeedData } from './contract/scenario-format.js'
export type { BuiltinScenarioName } from './scenario/builtin-names.js'
export type { JournalEntry, JournalFilter } from './core/journal.js'
export type { AnswerPlan, PendingAnswer } from './core/planned-answers.js'
export type { OperationId } from './contract/operations.js'
