/**
 * The journal filter's rule, one for every runtime: which filters can match an entry at all. A
 * filter that never can (a path without the base path, `FETCH`, an operation the interface does
 * not have) is a mistake in the test, reported as such rather than answered with `[]`. The
 * library throws `invalid_option` with it, `GET /__sandbox/requests` answers 400 `invalid_query`.
 */
import { OPERATION_CONTRACTS } from '../contract/operations.js'
import { describeValue } from './petstore-error.js'

/** The fields of a journal filter. */
export const JOURNAL_FILTER_FIELDS = ['method', 'path', 'operation', 'status'] as const

/**
 * The methods a journal entry can hold: those a client can send (`fetch` refuses `CONNECT` and
 * `TRACE`); the API answers GET, HEAD and POST, the others are journaled with their 405.
 */
export const JOURNAL_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'] as const

/**
 * A method a journal entry can hold, in either case.
 * @example petstore.requests.all({ method: 'delete' }) // the 405s an app got
 */
export type JournalMethod = (typeof JOURNAL_METHODS)[number] | Lowercase<(typeof JOURNAL_METHODS)[number]>

/** What a filter field was refused for: the field, and what was expected instead (with what came). */
export interface FilterProblem {
  readonly field: string
  /** Reads after "expected": `an HTTP method: GET, …, got "FETCH"`. */
  readonly reason: string
}

/** A filter as judged: the filter itself, or the first field that can never match. */
export type FilterJudgement<F> = { readonly ok: true; readonly filter: F } | { readonly ok: false; readonly problem: FilterProblem }

const OPERATION_IDS: readonly string[] = OPERATION_CONTRACTS.map((contract) => contract.id)

/** The base URL's own path: `/v1` of `*\/v1` or `https://api.shop.test/v1`, `''` of `*`. */
export function baseUrlPath(base: string): string {
  return base
    .replace(/^\*+/, '')
    .replace(/^[a-z][a-z\d+.-]*:\/\/[^/]*/i, '')
    .replace(/\/+$/, '')
}

/**
 * The base path journal paths start with ({@link baseUrlPath}), or undefined when the base's path
 * is itself a pattern (`*` or `:name` in it) and any path may be under it.
 */
export function basePathOf(base: string): string | undefined {
  const path = baseUrlPath(base)
  return /[*:]/.test(path) ? undefined : path
}

/**
 * Judges a journal filter given as data (`requests.all(filter)`, the query of
 * `GET /__sandbox/requests`) against the base paths the API is served under (see {@link basePathOf}).
 * Fields left undefined are no filter. `extra` names further fields the caller accepts and judges itself.
 */
export function judgeJournalFilter(
  input: unknown,
  basePaths: readonly (string | undefined)[],
  extra: readonly string[] = [],
): FilterJudgement<Record<string, unknown>> {
  if (input === undefined) return { ok: true, filter: {} }
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return refuse('(filter)', `an object such as { operation: 'createCategory' }`, input)
  }
  const fields = input as Record<string, unknown>
  const known: readonly string[] = [...JOURNAL_FILTER_FIELDS, ...extra]
  for (const key of Object.keys(fields)) {
    if (!known.includes(key)) return { ok: false, problem: { field: key, reason: `a filter field: ${known.join(', ')}` } }
  }
  const { method, path, operation, status } = fields
  if (method !== undefined && !(typeof method === 'string' && (JOURNAL_METHODS as readonly string[]).includes(method.toUpperCase()))) {
    return refuse('method', `an HTTP method: ${JOURNAL_METHODS.join(', ')}`, method)
  }
  if (path !== undefined) {
    const why = pathProblem(path, basePaths)
    if (why !== undefined) return refuse('path', why, path)
  }
  if (operation !== undefined && !(typeof operation === 'string' && OPERATION_IDS.includes(operation))) {
    return refuse('operation', `an operation name: ${OPERATION_IDS.join(', ')}`, operation)
  }
  if (status !== undefined) {
    if (typeof status !== 'number') {
      return refuse('status', `an HTTP status as a number (201, not "201")`, status)
    }
    if (!(Number.isInteger(status) && (status === 0 || (status >= 100 && status <= 599)))) {
      return refuse('status', 'an HTTP status (100-599), or 0 for a dropped connection', status)
    }
  }
  return { ok: true, filter: fields }
}

function refuse(field: string, expected: string, value: unknown): { ok: false; problem: FilterProblem } {
  return { ok: false, problem: { field, reason: `${expected}, got ${describeValue(value)}` } }
}

/** Why a path filter can never match an operation's path under any of the base paths, or undefined. */
function pathProblem(path: unknown, basePaths: readonly (string | undefined)[]): string | undefined {
  const known = basePaths.filter((base) => base !== undefined)
  const examples = [...new Set(known.flatMap((base) => OPERATION_CONTRACTS.map((contract) => `${base}${contract.path}`)))]
  const expected = `the full URL path of an operation, base path included: ${examples.join(', ')} ({petId}: an id; a trailing * matches a prefix, as in ${known[0] ?? ''}/pets/*)`
  if (typeof path !== 'string' || !path.startsWith('/')) return expected
  // A base that is a pattern itself: any path may be under it.
  if (known.length < basePaths.length) return undefined
  const prefix = path.endsWith('*')
  const wanted = prefix ? path.slice(0, -1) : path
  if (/[*?#{}]/.test(wanted)) return `${expected}; no query, and * only at the end`
  const segments = wanted.split('/').slice(1)
  const matches = (template: readonly string[]) => (prefix ? prefixMatches(template, segments) : exactMatches(template, segments))
  return known.some((base) => OPERATION_CONTRACTS.some((contract) => matches(`${base}${contract.path}`.split('/').slice(1)))) ? undefined : expected
}

const isParam = (segment: string) => segment.startsWith('{')

function exactMatches(template: readonly string[], segments: readonly string[]): boolean {
  return template.length === segments.length && template.every((expected, i) => segmentMatches(expected, segments[i]!))
}

/** Whether some path of the template starts with the segments (the last one possibly cut short). */
function prefixMatches(template: readonly string[], segments: readonly string[]): boolean {
  if (segments.length > template.length) return false
  const last = segments.length - 1
  return segments.every((segment, i) => (i < last ? segmentMatches(template[i]!, segment) : isParam(template[i]!) || template[i]!.startsWith(segment)))
}

function segmentMatches(expected: string, actual: string): boolean {
  return isParam(expected) ? actual !== '' : expected === actual
}
