/**
 * The request journal: what reached the handlers and what they answered, newest last, capped.
 * Credentials never enter it: the Authorization and Cookie values are replaced before storing.
 */
import { heapWeight } from './heap-weight.js'
import { DEFAULT_JOURNAL_BYTES } from './limits.js'

/** One request as the journal keeps it. */
export interface JournalEntry {
  /** Increasing per journal, starting at 1; survives `clear()` so entries stay distinguishable. */
  readonly id: number
  /** ISO 8601 time the request reached the handler. */
  readonly time: string
  /** The `X-Request-Id` the answer carried (standalone server only), to find a request a partner reports. */
  readonly requestId?: string
  /** Milliseconds from arrival to the response, including simulated latency. */
  readonly durationMs: number
  /** The operation matched (`listCategories`, …), or null for 404/405 answers. */
  readonly operation: string | null
  /** The HTTP method, upper-case. */
  readonly method: string
  /** The absolute URL, query included. */
  readonly url: string
  /** The URL's path, without the query. */
  readonly path: string
  /** The request's headers (credentials redacted) and body. */
  readonly request: JournalBody & { readonly headers: Readonly<Record<string, string>> }
  /** The status answered (0 for a dropped connection) and the body. */
  readonly response: JournalBody & { readonly status: number }
}

/** A request or response body as the journal keeps it. */
export interface JournalBody {
  /**
   * Parsed JSON when the body is JSON, the text otherwise, undefined when there was none. A JSON
   * body whose parsed form would weigh many times its text (`[{},{},…]`) is kept as text too.
   */
  readonly body: unknown
  /** Present when the body was longer than the journal keeps; `body` then holds its start as text. */
  readonly truncated?: { readonly size: number } | undefined
}

/** Filters for {@link RequestJournal.all}. */
export interface JournalFilter {
  readonly method?: string | undefined
  /** Exact path (`/v1/categories`) or a prefix ending in `*` (`/v1/pets/*`). */
  readonly path?: string | undefined
  readonly operation?: string | undefined
  readonly status?: number | undefined
}

/**
 * Where a tenant's journal lives: the seam a store shared by several processes implements (Redis,
 * `server/redis-journal.ts`). {@link RequestJournal}, in memory, is the default and the library's.
 * Same rules for every implementation: entries newest last, ids increasing and kept across
 * `clear()`, the oldest entries dropped past the entry limit or the byte budget (the newest stays),
 * and `all(filter)` filtering with {@link journalMatches}.
 */
export interface TenantJournal {
  /**
   * Adds an entry, weighed by {@link entryWeight} against the budget (see {@link RequestJournal.record});
   * with `grow` false it may not hold more than it does. May settle once it is stored.
   */
  record(entry: Omit<JournalEntry, 'id'>, options?: { readonly grow?: boolean }): void | Promise<void>
  /** Entries oldest first, optionally filtered. */
  all(filter?: JournalFilter): JournalEntry[] | Promise<JournalEntry[]>
  clear(): void | Promise<void>
  /** How many entries it holds. */
  count(): number | Promise<number>
  /** What it holds on this process's heap, estimated in bytes (0 for a journal kept elsewhere). */
  readonly bytes: number
}

const REDACTED_HEADERS = new Set(['authorization', 'cookie', 'proxy-authorization'])

/** @default 1000 entries */
export const DEFAULT_JOURNAL_LIMIT = 1000
export { DEFAULT_JOURNAL_BYTES }
/** Bodies longer than this many characters are kept truncated. */
export const JOURNAL_BODY_LIMIT = 64 * 1024
/**
 * A parsed body may weigh this many times its text (plus 16 KiB); past
 * that it is kept as text. Ordinary JSON weighs 2-4 times its text, `[{},{},…]` about 21 times.
 */
export const PARSED_BODY_FACTOR = 8
const PARSED_BODY_SLACK = 16 * 1024

export class RequestJournal implements TenantJournal {
  readonly #limit: number
  #entries: JournalEntry[] = []
  #nextId = 1

  readonly #byteBudget: number
  #sizes: number[] = []
  #bytes = 0

  constructor(limit = DEFAULT_JOURNAL_LIMIT, byteBudget = DEFAULT_JOURNAL_BYTES) {
    this.#limit = limit
    this.#byteBudget = byteBudget
  }

  /**
   * Adds an entry. The oldest entries go once there are more than the limit, or once what they
   * hold on the heap (bodies, headers, URL: {@link entryWeight}) weighs more than the budget; the
   * newest entry always stays. With `grow` false (the server is over its memory budget) the
   * journal may not hold more than it does now: older entries make room for the new one.
   */
  record(entry: Omit<JournalEntry, 'id'>, { grow = true }: { grow?: boolean } = {}): void {
    if (this.#limit === 0) return
    const kept = { id: this.#nextId++, ...entry }
    const size = entryWeight(kept)
    const budget = grow ? this.#byteBudget : Math.min(this.#byteBudget, this.#bytes)
    this.#entries.push(kept)
    this.#sizes.push(size)
    this.#bytes += size
    let drop = 0
    while (
      this.#entries.length - drop > 1 &&
      (this.#entries.length - drop > this.#limit || this.#bytes > budget)
    ) {
      this.#bytes -= this.#sizes[drop]!
      drop++
    }
    if (drop > 0) {
      this.#entries.splice(0, drop)
      this.#sizes.splice(0, drop)
    }
  }

  /** Entries oldest first, optionally filtered. */
  all(filter: JournalFilter = {}): JournalEntry[] {
    return this.#entries.filter((entry) => matches(entry, filter))
  }

  clear(): void {
    this.#entries = []
    this.#sizes = []
    this.#bytes = 0
  }

  get size(): number {
    return this.#entries.length
  }

  /** The heap bytes its entries hold, as {@link entryWeight} estimates them. */
  get bytes(): number {
    return this.#bytes
  }

  count(): number {
    return this.#entries.length
  }
}

/** What an entry holds on the heap: its object, strings, headers and bodies. */
export function entryWeight(entry: JournalEntry): number {
  return heapWeight(entry)
}

/** Whether an entry passes a {@link JournalFilter}: the one filter rule every journal applies. */
export function journalMatches(entry: JournalEntry, filter: JournalFilter): boolean {
  return matches(entry, filter)
}

function matches(entry: JournalEntry, filter: JournalFilter): boolean {
  if (filter.method && entry.method !== filter.method.toUpperCase()) return false
  if (filter.operation && entry.operation !== filter.operation) return false
  if (filter.status !== undefined && entry.response.status !== filter.status) return false
  if (filter.path) {
    return filter.path.endsWith('*') ? entry.path.startsWith(filter.path.slice(0, -1)) : entry.path === filter.path
  }
  return true
}

/** Request headers as the journal keeps them, credentials redacted. */
export function journalHeaders(headers: Iterable<[string, string]>): Record<string, string> {
  // @note Built from entries, not by assignment: `kept['__proto__'] = value` would hit the
  // prototype setter and drop a header a client may legally send under that name.
  return Object.fromEntries([...headers].map(([name, value]) => [name, REDACTED_HEADERS.has(name) ? '[redacted]' : value]))
}

/** A body for the journal: parsed when it is JSON text, truncated when long. */
export function journalBody(text: string | undefined, parsed?: unknown): JournalBody {
  if (text === undefined || text === '') return { body: undefined }
  if (text.length > JOURNAL_BODY_LIMIT) {
    return { body: copyString(text.slice(0, JOURNAL_BODY_LIMIT)), truncated: { size: text.length } }
  }
  if (parsed !== undefined) return { body: bloated(parsed, text) ? text : parsed }
  // @note A body nested deeper than this is kept as text: parsed, it would make every later
  // `JSON.stringify` of the journal (the admin API's `GET /__sandbox/requests`) overflow the stack.
  if (nestingDepth(text) > JOURNAL_DEPTH_LIMIT) return { body: text }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    return { body: text }
  }
  return { body: bloated(value, text) ? text : value }
}

/**
 * @note A 64 KiB `[{},{},…]` body parses to 1.4 MB: kept parsed, a few of them would fill a
 * journal's budget (and 48 tenants' journals ran a server out of heap). Its text is kept instead.
 */
function bloated(value: unknown, text: string): boolean {
  return heapWeight(value) > PARSED_BODY_FACTOR * text.length + PARSED_BODY_SLACK
}

/** Bodies nested deeper than this many arrays and objects are kept as text. */
export const JOURNAL_DEPTH_LIMIT = 256

/** The deepest nesting of `[` and `{` in a JSON text, brackets inside strings ignored. */
function nestingDepth(text: string): number {
  let depth = 0
  let deepest = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i)
    if (inString) {
      if (char === 0x5c) i++ // backslash: skip the escaped character
      else if (char === 0x22) inString = false
    } else if (char === 0x22) {
      inString = true
    } else if (char === 0x5b || char === 0x7b) {
      if (++depth > deepest) deepest = depth
    } else if (char === 0x5d || char === 0x7d) {
      depth--
    }
  }
  return deepest
}

/** @note A slice can keep its whole parent string alive; a round trip makes a flat copy. */
function copyString(text: string): string {
  return new TextDecoder().decode(new TextEncoder().encode(text))
}
