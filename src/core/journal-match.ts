/**
 * Matching journal entries against what a test expects: a {@link JournalFilter} plus the request's
 * body, headers and query, compared as `toMatchObject` compares (objects by the keys given, deep;
 * asymmetric matchers such as `expect.any(Number)` work). One rule for `requests.waitFor()` and
 * the Vitest and Jest matchers; the matchers pass their runner's own `equals`.
 */
import type { JournalEntry, JournalFilter } from './journal.js'
import { JOURNAL_FILTER_FIELDS, type FilterProblem } from './journal-filter.js'

/**
 * What a test expects of a request: the journal filter's fields, and parts of the request.
 * @example { operation: 'createCategory', status: 201, body: { name: 'Ferrets' } }
 */
export interface JournalMatch extends JournalFilter {
  /** The request body, matched as `toMatchObject` does (only the keys given, deep); asymmetric matchers work. */
  readonly body?: unknown
  /** Request headers by lower-case name; only those given are compared. */
  readonly headers?: Readonly<Record<string, unknown>>
  /** The URL's query parameters (text values); only those given are compared. */
  readonly query?: Readonly<Record<string, unknown>>
}

/** The fields of a {@link JournalMatch} beyond the filter's. */
export const MATCH_FIELDS = ['body', 'headers', 'query'] as const

/** The fields a match may ask for, in the order messages show them. */
export const ALL_MATCH_FIELDS = [...JOURNAL_FILTER_FIELDS, ...MATCH_FIELDS] as const
type MatchField = (typeof ALL_MATCH_FIELDS)[number]

/** Deep equality that honours asymmetric matchers (a test runner's `this.equals`, or {@link plainEquals}). */
export type Equals = (actual: unknown, expected: unknown) => boolean

/** Judges the fields beyond the filter's (the filter's are judged by `requests.all()`'s rule). */
export function matchExtrasProblem(match: JournalMatch): FilterProblem | undefined {
  for (const field of ['headers', 'query'] as const) {
    const value: unknown = match[field]
    if (value !== undefined && (typeof value !== 'object' || value === null || Array.isArray(value))) {
      return { field, reason: `an object of ${field === 'headers' ? 'header names (lower case)' : 'query parameter names'} to values` }
    }
  }
  return undefined
}

/** The filter part of a match, for `requests.all()`. */
export function filterOf(match: JournalMatch): JournalFilter {
  const filter: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(match)) if (!(MATCH_FIELDS as readonly string[]).includes(key)) filter[key] = value
  return filter
}

/** The fields a match asks for (those given), and which of them an entry has. */
export function compareEntry(entry: JournalEntry, match: JournalMatch, equals: Equals): { asked: MatchField[]; missed: MatchField[] } {
  const asked = ALL_MATCH_FIELDS.filter((field) => match[field] !== undefined)
  const missed = asked.filter((field) => !fieldMatches(entry, match, field, equals))
  return { asked, missed }
}

/** Whether an entry has everything a match asks for. */
export function entryMatches(entry: JournalEntry, match: JournalMatch, equals: Equals = plainEquals): boolean {
  return compareEntry(entry, match, equals).missed.length === 0
}

function fieldMatches(entry: JournalEntry, match: JournalMatch, field: MatchField, equals: Equals): boolean {
  switch (field) {
    case 'method':
      return entry.method === match.method!.toUpperCase()
    case 'operation':
      return entry.operation === match.operation
    case 'status':
      return entry.response.status === match.status
    case 'path':
      return match.path!.endsWith('*') ? entry.path.startsWith(match.path!.slice(0, -1)) : entry.path === match.path
    case 'body':
      return partialEquals(entry.request.body, match.body, equals)
    case 'headers':
      return partialEquals(entry.request.headers, lowerCaseKeys(match.headers!), equals)
    case 'query':
      return partialEquals(queryOf(entry.url), match.query, equals)
  }
}

function lowerCaseKeys(record: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(record).map(([name, value]) => [name.toLowerCase(), value]))
}

/** The URL's query as an object: a repeated parameter's values as an array. */
export function queryOf(url: string): Record<string, string | string[]> {
  const query: Record<string, string | string[]> = {}
  for (const [name, value] of new URL(url).searchParams) {
    const before = Object.hasOwn(query, name) ? query[name] : undefined
    query[name] = before === undefined ? value : Array.isArray(before) ? [...before, value] : [before, value]
  }
  return query
}

/**
 * `toMatchObject`'s comparison: a plain object expected matches an object having at least its
 * keys, each matching deeply; an array matches an array of the same length, item by item;
 * anything else (asymmetric matchers included) is left to `equals`.
 */
export function partialEquals(actual: unknown, expected: unknown, equals: Equals): boolean {
  if (Array.isArray(expected)) {
    return Array.isArray(actual) && actual.length === expected.length && expected.every((item, i) => partialEquals(actual[i], item, equals))
  }
  if (isPlainObject(expected)) {
    if (typeof actual !== 'object' || actual === null || Array.isArray(actual)) return false
    const record = actual as Record<string, unknown>
    return Object.entries(expected).every(([key, value]) => Object.hasOwn(record, key) && partialEquals(record[key], value, equals))
  }
  return equals(actual, expected)
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null) return false
  if (typeof (value as { asymmetricMatch?: unknown }).asymmetricMatch === 'function') return false
  const proto: unknown = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * Equality for use without a test runner (`requests.waitFor()`): asymmetric matchers
 * (`expect.any(String)`, `expect.stringContaining('x')`) by their `asymmetricMatch`, the rest
 * structurally, as JSON bodies are.
 */
export function plainEquals(actual: unknown, expected: unknown): boolean {
  if (typeof expected === 'object' && expected !== null && typeof (expected as { asymmetricMatch?: unknown }).asymmetricMatch === 'function') {
    return Boolean((expected as { asymmetricMatch(other: unknown): unknown }).asymmetricMatch(actual))
  }
  if (Object.is(actual, expected)) return true
  if (typeof actual !== 'object' || typeof expected !== 'object' || actual === null || expected === null) return false
  if (Array.isArray(actual) !== Array.isArray(expected)) return false
  const a = actual as Record<string, unknown>
  const b = expected as Record<string, unknown>
  const keys = Object.keys(b)
  return keys.length === Object.keys(a).length && keys.every((key) => Object.hasOwn(a, key) && plainEquals(a[key], b[key]))
}

/**
 * Entries ordered closest first: by how many of the asked fields they have, journal order
 * among equals.
 */
export function closestFirst(entries: readonly JournalEntry[], match: JournalMatch, equals: Equals): JournalEntry[] {
  return entries
    .map((entry, index) => ({ entry, index, missed: compareEntry(entry, match, equals).missed.length }))
    .sort((a, b) => a.missed - b.missed || a.index - b.index)
    .map(({ entry }) => entry)
}

/** One line for an entry in a message: `POST /v1/categories (createCategory) → 201, body {"name": "Ferrets"}`. */
export function describeEntry(entry: JournalEntry, show: (value: unknown) => string = printValue): string {
  const operation = entry.operation === null ? '' : ` (${entry.operation})`
  const body = entry.request.body === undefined ? '' : `, body ${show(entry.request.body)}`
  return `${entry.method} ${entry.path}${operation} → ${entry.response.status}${body}`
}

/** A match as a message shows it: `{ operation: "createCategory", body: {"name": "Ferrets"} }`. */
export function describeMatch(match: JournalMatch, show: (value: unknown) => string = printValue): string {
  const fields = ALL_MATCH_FIELDS.filter((field) => match[field] !== undefined).map((field) => `${field}: ${show(match[field])}`)
  return fields.length === 0 ? '{}' : `{ ${fields.join(', ')} }`
}

/**
 * A value as messages show it, the same under every runner: JSON with a space after `:` and `,`
 * (`{"name": "Owls"}`), asymmetric matchers as they name themselves (`StringContaining "x"`).
 */
export function printValue(value: unknown, depth = 0): string {
  if (typeof value === 'object' && value !== null && typeof (value as { asymmetricMatch?: unknown }).asymmetricMatch === 'function') {
    // As pretty-format's plugin prints them: `StringContaining "x"`, `ObjectContaining {"a": 1}`, `Any<String>`.
    const matcher = value as { sample?: unknown; toAsymmetricMatcher?: () => string; toString(): string }
    const name = matcher.toString()
    if (/^(Array|Object|String)(Not)?(Containing|Matching)$/.test(name)) return `${name} ${printValue(matcher.sample, depth + 1)}`
    return typeof matcher.toAsymmetricMatcher === 'function' ? matcher.toAsymmetricMatcher() : name
  }
  if (value instanceof RegExp) return String(value)
  if (depth > 10) return Array.isArray(value) ? '[…]' : '{…}'
  if (Array.isArray(value)) return `[${value.map((item) => printValue(item, depth + 1)).join(', ')}]`
  if (typeof value === 'object' && value !== null) {
    return `{${Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}: ${printValue(item, depth + 1)}`).join(', ')}}`
  }
  if (value === undefined || typeof value === 'function' || typeof value === 'symbol' || typeof value === 'bigint') return String(value)
  return JSON.stringify(value)
}
