/**
 * `requests.waitFor()`: the first journal entry matching what a test expects, already there or
 * still to come, as Testing Library's `waitFor` retries until its callback passes. Woken by the
 * journal on every request (no polling); its timer is cleared once it settles.
 */
import type { JournalEntry } from './journal.js'
import { describeEntry, describeMatch, entryMatches, type JournalMatch } from './journal-match.js'

/**
 * Options of `requests.waitFor()`.
 * @example await petstore.requests.waitFor({ operation: 'listCategories' }, { timeout: 2000 })
 */
export interface WaitForOptions {
  /** How long to wait for a matching request, in ms. @default 1000 */
  readonly timeout?: number
}

/** The default of {@link WaitForOptions.timeout}, Testing Library's own. */
export const DEFAULT_WAIT_TIMEOUT = 1000

/** What waiting reads: the journal's entries and its news. */
export interface WatchedJournal {
  all(): JournalEntry[]
  onRecord(listener: () => void): () => void
}

/**
 * What `requests.waitFor()` rejects with when no request matched in time: its message says what
 * it waited for and lists what arrived meanwhile; `arrived` holds those entries.
 * @example
 * await expect(petstore.requests.waitFor({ status: 401 }, { timeout: 100 })).rejects.toThrow(WaitForTimeoutError)
 */
export class WaitForTimeoutError extends Error {
  override readonly name = 'WaitForTimeoutError'
  /** The entries that arrived while it waited, oldest first. */
  readonly arrived: readonly JournalEntry[]

  constructor(message: string, arrived: readonly JournalEntry[]) {
    super(message)
    this.arrived = arrived
  }
}

/** Resolves with the oldest entry matching `match`, waiting up to `timeout` ms for one to arrive. */
export function waitForEntry(journal: WatchedJournal, match: JournalMatch, timeout: number): Promise<JournalEntry> {
  // @note Taken now: the timeout's error carries the caller's stack (the test's own line), not the timer's.
  const callSite = new Error()
  const present = journal.all()
  const found = present.find((entry) => entryMatches(entry, match))
  if (found) return Promise.resolve(found)
  const lastSeen = present.at(-1)?.id ?? 0
  let checked = lastSeen
  return new Promise((resolve, reject) => {
    const stop = () => {
      clearTimeout(timer)
      unsubscribe()
    }
    const unsubscribe = journal.onRecord(() => {
      // @note Called while the pipeline records a request: a matcher of the test's that throws
      // rejects the wait, never the request.
      try {
        const fresh = journal.all().filter((entry) => entry.id > checked)
        checked = fresh.at(-1)?.id ?? checked
        const hit = fresh.find((entry) => entryMatches(entry, match))
        if (hit) {
          stop()
          resolve(hit)
        }
      } catch (error) {
        stop()
        reject(error instanceof Error ? error : new Error(String(error)))
      }
    })
    const timer = setTimeout(() => {
      unsubscribe()
      const arrived = journal.all().filter((entry) => entry.id > lastSeen)
      const listed = arrived.length === 0 ? ' Nothing arrived meanwhile.' : ` Arrived meanwhile (${arrived.length}):\n${arrived.map((entry, i) => `  ${i + 1}: ${describeEntry(entry)}`).join('\n')}`
      const error = new WaitForTimeoutError(`No request matched ${describeMatch(match)} within ${timeout} ms.${listed}`, arrived)
      error.stack = `${error.name}: ${error.message}\n${callSite.stack?.split('\n').slice(1).join('\n') ?? ''}`
      reject(error)
    }, timeout)
  })
}
