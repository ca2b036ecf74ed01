/**
 * `toHaveReceived` and `toHaveReceivedTimes`, written once for Vitest and Jest: both runners call
 * a matcher with the same `this` (their `equals`, so asymmetric matchers work, and `utils` to
 * print). Their failure messages list what the journal did receive, closest first, as Jest's
 * `toHaveBeenCalledWith` lists the calls.
 */
import { REDACTED } from '../core/redaction.js'
import type { JournalEntry, JournalFilter } from '../core/journal.js'
import { ALL_MATCH_FIELDS, closestFirst, compareEntry, filterOf, matchExtrasProblem, describeEntry, describeMatch, type Equals, type JournalMatch } from '../core/journal-match.js'
import { describeValue, PetstoreError } from '../core/petstore-error.js'

/**
 * The journal matchers, as `expect(petstore)` offers them once registered
 * (`import 'petstore-sandbox/vitest'` or `import 'petstore-sandbox/jest'`).
 * @example
 * expect(petstore).toHaveReceived({ operation: 'createCategory', body: { name: 'Ferrets' } })
 */
export interface JournalMatchers<R = unknown> {
  /**
   * Passes when the petstore's journal holds a request matching `match`: a journal filter
   * (`method`, `path`, `operation`, `status`) plus the request's `body`, `headers` and `query`,
   * compared as `toMatchObject` does (asymmetric matchers work).
   * @example expect(petstore).toHaveReceived({ operation: 'listCategories', status: 200 })
   */
  toHaveReceived(match?: JournalMatch): R
  /**
   * Passes when exactly `times` requests of the journal match `match`.
   * @example expect(petstore).toHaveReceivedTimes(1, { method: 'POST', path: '/v1/categories' })
   */
  toHaveReceivedTimes(times: number, match?: JournalMatch): R
}

/** What both runners give a matcher as `this`. */
export interface MatcherContext {
  readonly isNot?: boolean | undefined
  readonly customTesters?: readonly unknown[] | undefined
  equals(a: unknown, b: unknown, customTesters?: never[], strictCheck?: boolean): boolean
  readonly utils: {
    matcherHint(name: string, received?: string, expected?: string, options?: { isNot?: boolean; secondArgument?: string }): string
  }
}

interface MatcherResult {
  readonly pass: boolean
  readonly message: () => string
}

/** The petstore's side the matchers read: its journal. */
interface JournalHolder {
  readonly requests: { all(filter?: JournalFilter): JournalEntry[] }
}

/** How many entries a message lists before it says how many more there are. */
const LISTED = 10

/** The matchers, for `expect.extend()`. */
export const journalMatchers = {
  toHaveReceived(this: MatcherContext, received: unknown, match: JournalMatch = {}): MatcherResult {
    const { entries, matching, equals } = read(this, 'toHaveReceived', received, match)
    const pass = matching.length > 0
    return {
      pass,
      message: () =>
        [
          this.utils.matcherHint('toHaveReceived', 'petstore', 'match', { isNot: this.isNot ?? false }),
          '',
          `Expected: ${pass ? 'no request' : 'a request'} matching ${describeMatch(match)}`,
          ...listing(entries, match, equals),
        ].join('\n'),
    }
  },

  toHaveReceivedTimes(this: MatcherContext, received: unknown, times: number, match: JournalMatch = {}): MatcherResult {
    if (!(typeof times === 'number' && Number.isInteger(times) && times >= 0)) {
      throw new PetstoreError('invalid_option', `Invalid toHaveReceivedTimes() count: expected a whole number of requests (0, 1, 2, …), received ${describeValue(times)}`)
    }
    const { entries, matching, equals } = read(this, 'toHaveReceivedTimes', received, match)
    return {
      pass: matching.length === times,
      message: () =>
        [
          this.utils.matcherHint('toHaveReceivedTimes', 'petstore', 'times', { isNot: this.isNot ?? false, secondArgument: 'match' }),
          '',
          `Expected: ${this.isNot ? 'not ' : ''}${requests(times)} matching ${describeMatch(match)}`,
          ...listing(entries, match, equals),
        ].join('\n'),
    }
  },
}

/** The journal's entries and those matching, once the petstore and the match are judged. */
function read(context: MatcherContext, name: string, received: unknown, match: JournalMatch) {
  if (!isJournalHolder(received)) {
    throw new PetstoreError('invalid_option', `${name}() expects a petstore (createPetstore(), setupPetstoreWorker()), received ${describeValue(received)}`)
  }
  const given: unknown = match
  if (typeof given !== 'object' || given === null || Array.isArray(given)) {
    throw new PetstoreError('invalid_option', `Invalid ${name}() match: expected an object such as { operation: 'createCategory' }, received ${describeValue(given)}`)
  }
  for (const key of Object.keys(match)) {
    if (!(ALL_MATCH_FIELDS as readonly string[]).includes(key)) {
      throw new PetstoreError('invalid_option', `Invalid ${name}() match ${key}: expected a match field: ${ALL_MATCH_FIELDS.join(', ')}`)
    }
  }
  const problem = matchExtrasProblem(match)
  if (problem) throw new PetstoreError('invalid_option', `Invalid ${name}() match ${problem.field}: expected ${problem.reason}`)
  // The filter's own rule (base paths, methods, operations): a filter that can never match throws here.
  received.requests.all(filterOf(match))
  const customTesters = (context.customTesters ?? []) as never[]
  const equals: Equals = (actual, expected) => context.equals(actual, expected, customTesters)
  const entries = received.requests.all()
  const matching = entries.filter((entry) => compareEntry(entry, match, equals).missed.length === 0)
  return { entries, matching, equals }
}

function isJournalHolder(value: unknown): value is JournalHolder {
  const requests: unknown = typeof value === 'object' && value !== null ? (value as { requests?: unknown }).requests : undefined
  return typeof requests === 'object' && requests !== null && typeof (requests as { all?: unknown }).all === 'function'
}

/** The lines listing the journal, closest first, each saying how it differs from the match. */
function listing(entries: readonly JournalEntry[], match: JournalMatch, equals: Equals): string[] {
  const matching = entries.filter((entry) => compareEntry(entry, match, equals).missed.length === 0).length
  if (entries.length === 0) return ['Received: no requests', '', 'Number of requests: 0']
  const ordered = closestFirst(entries, match, equals)
  const lines = ordered.slice(0, LISTED).map((entry, i) => {
    const { missed } = compareEntry(entry, match, equals)
    const verdict = missed.length === 0 ? 'matches' : `differs in ${missed.join(', ')}${redactedNote(entry, match)}`
    return `${String(i + 1).padStart(8)}: ${describeEntry(entry)} (${verdict})`
  })
  if (ordered.length > LISTED) lines.push(`          … and ${ordered.length - LISTED} more`)
  return ['Received, closest first:', ...lines, '', `Number of matching requests: ${matching} of ${entries.length}`]
}

function requests(count: number): string {
  return count === 1 ? '1 request' : `${count} requests`
}

/** Why a header match cannot hold: the journal keeps credential headers as `[redacted]`. */
function redactedNote(entry: JournalEntry, match: JournalMatch): string {
  const asked = typeof match.headers === 'object' && match.headers !== null ? Object.keys(match.headers) : []
  const redacted = asked.filter((name) => entry.request.headers[name.toLowerCase()] === REDACTED)
  return redacted.length === 0 ? '' : `; the journal keeps ${redacted.join(', ')} as ${REDACTED}`
}
