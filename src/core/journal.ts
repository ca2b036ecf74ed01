/**
 * The request journal: what reached the handlers and what they answered, newest last, capped.
 * Credentials never reach a reader: the values of credential headers and query parameters are
 * replaced as `redaction.ts` says.
 */
import { heapWeight, latin1Weight, stringWeight, type HeldBytesMeter } from './heap-weight.js'
import { DEFAULT_JOURNAL_BYTES } from '../contract/limits.js'
import { DEFAULT_REDACTION, type Redaction } from './redaction.js'
import type { OperationId } from '../contract/operations.js'
import type { JournalMethod } from './journal-filter.js'

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
  /** The absolute URL, query included (the values of credential query parameters redacted). */
  readonly url: string
  /** The URL's path, without the query. */
  readonly path: string
  /** The request's headers (credentials redacted) and body. */
  readonly request: JournalBody & { readonly headers: Readonly<Record<string, string>> }
  /** The status answered (0 for a dropped connection) and the body. */
  readonly response: JournalBody & { readonly status: number }
  /**
   * Proxy mode (`serve --proxy`): where the real service's answer (or the client's request)
   * departs from the contract, one sentence each; absent when the exchange holds to it, and
   * for every answer the sandbox makes itself.
   */
  readonly violations?: readonly string[]
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

/**
 * Filters for {@link RequestJournal.all}; a filter that can never match is refused (`journal-filter.ts`).
 * @example petstore.requests.all({ operation: 'createCategory', status: 201 })
 */
export interface JournalFilter {
  /** The HTTP method, either case. */
  readonly method?: JournalMethod | undefined
  /** Exact path, base path included (`/v1/categories`), or a prefix ending in `*` (`/v1/pets/*`). */
  readonly path?: string | undefined
  /** The operation answered. */
  readonly operation?: OperationId | undefined
  /** The status answered (0: a dropped connection). */
  readonly status?: number | undefined
}

/** A request's headers as `[name, value]` pairs, as the journal is given them. */
export interface JournalHeaders extends Iterable<[string, string]> {
  /** What they weigh for the journal (the sum of {@link headerWeight}), when the reader can tell without listing them. */
  heldBytes?(): number
}

/** The facts of one request as the pipeline has them, before anything is formatted for a reader. */
export interface JournalFacts {
  /** `Date.now()` when the request reached the handler. */
  readonly arrived: number
  readonly durationMs: number
  readonly operation: string | null
  readonly requestId?: string | undefined
  readonly method: string
  readonly url: string
  readonly path: string
  /**
   * The request's headers, as received (credentials are redacted when read).
   * @note Kept as given, not copied: a reader of headers that never change after the request
   * arrived (Node's parsed headers, a Fetch request's).
   */
  readonly headers: JournalHeaders
  /** The request body's text ('' for none). */
  readonly requestText: string
  /** The status answered (0 for a dropped connection). */
  readonly status: number
  /** The answer's body text, or undefined when none was sent. */
  readonly responseText: string | undefined
  /**
   * The length of the whole body when `responseText` is only its start (an answer sent in pieces,
   * of which the journal keeps the first {@link JOURNAL_BODY_LIMIT} characters).
   * @default the length of `responseText`
   */
  readonly responseSize?: number | undefined
  /** What a reader never sees of the headers and the URL. @default the default rule ({@link DEFAULT_REDACTION}) */
  readonly redaction?: Redaction | undefined
  /** Proxy mode: where the exchange departs from the contract. @default none */
  readonly violations?: readonly string[] | undefined
}

/**
 * One request on its way into a journal: the raw facts, kept as they are (texts, not parsed
 * bodies; the request's header reader, not a copy) and formatted as a {@link JournalEntry} only
 * when a reader asks for it. A request costs the journal what it keeps, not what a reader of
 * `GET /__sandbox/requests` would see; reading pays for the formatting.
 * @note The texts are the ones that were sent: parsed on read, they give the same bodies as the
 * objects serialised, and they weigh less than the objects they stand for.
 */
export class JournalDraft {
  readonly arrived: number
  readonly durationMs: number
  readonly operation: string | null
  readonly requestId: string | undefined
  readonly method: string
  readonly url: string
  readonly path: string
  readonly status: number
  /** The request's headers, credentials redacted (copied from the reader the first time they are asked for). */
  #headers: Iterable<[string, string]> | Record<string, string>
  readonly #requestText: string
  readonly #requestSize: number
  readonly #responseText: string | undefined
  readonly #responseSize: number
  readonly #redaction: Redaction
  readonly #violations: readonly string[] | undefined
  /** What the draft holds on the heap, estimated. */
  readonly weight: number

  constructor(facts: JournalFacts) {
    this.arrived = facts.arrived
    this.durationMs = facts.durationMs
    this.operation = facts.operation
    this.requestId = facts.requestId
    this.method = facts.method
    this.url = facts.url
    this.path = facts.path
    this.status = facts.status
    this.#headers = facts.headers
    this.#redaction = facts.redaction ?? DEFAULT_REDACTION
    this.#violations = facts.violations !== undefined && facts.violations.length > 0 ? facts.violations : undefined
    this.#requestSize = facts.requestText.length
    this.#requestText = keptText(facts.requestText)
    this.#responseSize = facts.responseSize ?? facts.responseText?.length ?? 0
    // @note The start of an answer sent in pieces is copied: as given, it holds the pieces it was cut from.
    this.#responseText = facts.responseText === undefined ? undefined : facts.responseSize === undefined ? keptText(facts.responseText) : copyString(facts.responseText)
    // @note A URL, a method, a request id and headers are Latin-1 text: weighed without reading them.
    let weight = DRAFT_BASE + latin1Weight(this.url) + latin1Weight(this.path) + latin1Weight(this.method)
    if (this.requestId !== undefined) weight += latin1Weight(this.requestId)
    weight += facts.headers.heldBytes?.() ?? headersWeight(facts.headers)
    weight += keptTextWeight(this.#requestText)
    if (this.#responseText !== undefined) weight += keptTextWeight(this.#responseText)
    if (this.#violations !== undefined) for (const violation of this.#violations) weight += HEADER_BASE + stringWeight(violation)
    this.weight = weight
  }

  /** The entry a reader sees, formatted now (bodies parsed, credentials redacted). */
  toEntry(id: number): JournalEntry {
    return { id, ...this.#fields() }
  }

  /** The entry's fields without its id, as a journal kept elsewhere stores them. */
  fields(): Omit<JournalEntry, 'id'> {
    return this.#fields()
  }

  #fields(): Omit<JournalEntry, 'id'> {
    if (!isRecord(this.#headers)) this.#headers = journalHeaders(this.#headers, this.#redaction)
    return {
      time: new Date(this.arrived).toISOString(),
      durationMs: this.durationMs,
      operation: this.operation,
      ...(this.requestId === undefined ? {} : { requestId: this.requestId }),
      method: this.method,
      url: this.#redaction.url(this.url),
      path: this.path,
      request: { headers: { ...this.#headers }, ...keptBody(this.#requestText, this.#requestSize) },
      response: { status: this.status, ...keptBody(this.#responseText, this.#responseSize) },
      ...(this.#violations === undefined ? {} : { violations: this.#violations }),
    }
  }
}

/** A draft's own fields on the heap: the object, its numbers and its slots. */
const DRAFT_BASE = 160
/** A header's pair and slots, beyond its two strings. */
const HEADER_BASE = 32

/** What the journal counts for one request header. */
export function headerWeight(name: string, value: string): number {
  return HEADER_BASE + latin1Weight(name) + latin1Weight(value)
}

function headersWeight(headers: Iterable<[string, string]>): number {
  let weight = 0
  for (const [name, value] of headers) weight += headerWeight(name, value)
  return weight
}

const isRecord = (headers: Iterable<[string, string]> | Record<string, string>): headers is Record<string, string> =>
  !(Symbol.iterator in headers)

/** What a journal is given: the pipeline's {@link JournalDraft}, or an entry already formatted (without its id). */
export type JournalInput = JournalDraft | Omit<JournalEntry, 'id'>

/**
 * What an input weighs against a journal's byte budget: a draft what it holds ({@link JournalDraft.weight}),
 * an entry what its fields hold ({@link entryWeight}). Every journal weighs alike, so that all keep the same entries.
 */
export function journalWeight(input: JournalInput): number {
  return input instanceof JournalDraft ? input.weight : entryWeight({ id: 0, ...input })
}

/**
 * Where a tenant's journal lives: the seam a store shared by several processes implements (Redis,
 * `storage/redis-journal.ts`). {@link RequestJournal}, in memory, is the default and the library's.
 * Same rules for every implementation: entries newest last, ids increasing and kept across
 * `clear()`, the oldest entries dropped past the entry limit or the byte budget (the newest stays),
 * and `all(filter)` filtering with {@link journalMatches}.
 */
export interface TenantJournal {
  /**
   * Adds an entry, weighed by {@link entryWeight} against the budget (see {@link RequestJournal.record});
   * with `grow` false it may not hold more than it does. May settle once it is stored.
   */
  record(entry: JournalInput, options?: { readonly grow?: boolean }): void | Promise<void>
  /** Entries oldest first, optionally filtered. */
  all(filter?: JournalFilter): JournalEntry[] | Promise<JournalEntry[]>
  clear(): void | Promise<void>
  /** How many entries it holds. */
  count(): number | Promise<number>
  /** What it holds on this process's heap, estimated in bytes (0 for a journal kept elsewhere). */
  readonly bytes: number
  /** Told of every change to {@link bytes}, when it can change at all. */
  meter?: HeldBytesMeter | undefined
}

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

/**
 * An entry as the in-memory journal keeps it: a draft until a reader first asks for it, then the
 * formatted entry (weighed again: a parsed body may weigh more than its text).
 */
interface Kept {
  readonly id: number
  draft: JournalDraft | undefined
  entry: JournalEntry | undefined
  size: number
}

export class RequestJournal implements TenantJournal {
  readonly #limit: number
  /**
   * The kept entries, oldest first, from `#head` on.
   * @note Dropping the oldest moves `#head` rather than splicing: a full journal drops one entry
   * per request, and a splice moved the other 999 every time.
   */
  #kept: (Kept | undefined)[] = []
  #head = 0
  #nextId = 1

  readonly #byteBudget: number
  #bytes = 0
  /** Told of every change to {@link bytes}. */
  meter: HeldBytesMeter | undefined
  /** Called after every entry recorded (`requests.waitFor()`). */
  readonly #listeners = new Set<() => void>()

  constructor(limit = DEFAULT_JOURNAL_LIMIT, byteBudget = DEFAULT_JOURNAL_BYTES) {
    this.#limit = limit
    this.#byteBudget = byteBudget
  }

  /**
   * Adds an entry. The oldest entries go once there are more than the limit, or once what they
   * hold on the heap (bodies, headers, URL: {@link journalWeight}) weighs more than the budget; the
   * newest entry always stays. With `grow` false (the server is over its memory budget) the
   * journal may not hold more than it does now: older entries make room for the new one.
   */
  record(entry: JournalInput, { grow = true }: { grow?: boolean } = {}): void {
    if (this.#limit === 0) return
    const size = journalWeight(entry)
    const budget = grow ? this.#byteBudget : Math.min(this.#byteBudget, this.#bytes)
    const id = this.#nextId++
    this.#kept.push(
      entry instanceof JournalDraft ? { id, draft: entry, entry: undefined, size } : { id, draft: undefined, entry: { id, ...entry }, size },
    )
    let bytes = this.#bytes + size
    while (this.#kept.length - this.#head > 1 && (this.#kept.length - this.#head > this.#limit || bytes > budget)) {
      bytes -= this.#kept[this.#head]!.size
      this.#kept[this.#head++] = undefined
    }
    this.#setBytes(bytes)
    if (this.#head > 64 && this.#head * 2 > this.#kept.length) {
      this.#kept = this.#kept.slice(this.#head)
      this.#head = 0
    }
    for (const listener of this.#listeners) listener()
  }

  /** Calls `listener` after every entry recorded, until the function returned is called. */
  onRecord(listener: () => void): () => void {
    // @note A wrapper per call, so that the same function subscribed twice is removed once per call.
    const once = () => listener()
    this.#listeners.add(once)
    return () => void this.#listeners.delete(once)
  }

  /**
   * Entries oldest first, optionally filtered. An entry is formatted the first time it is read
   * and kept formatted, so reading again costs nothing more.
   */
  all(filter: JournalFilter = {}): JournalEntry[] {
    const entries: JournalEntry[] = []
    for (let i = this.#head; i < this.#kept.length; i++) {
      const kept = this.#kept[i]!
      const draft = kept.draft
      if (draft) {
        // Filtered on the draft's facts: only the entries returned are formatted.
        if (factsMatch(draft.method, draft.operation, draft.status, draft.path, filter)) entries.push(this.#format(kept, draft))
      } else if (matches(kept.entry!, filter)) {
        entries.push(kept.entry!)
      }
    }
    return entries
  }

  /**
   * Formats a draft for good and weighs what it holds now.
   * @note Past the budget, the oldest entries go at the next record, as for any entry.
   */
  #format(kept: Kept, draft: JournalDraft): JournalEntry {
    const entry = draft.toEntry(kept.id)
    const size = entryWeight(entry)
    this.#setBytes(this.#bytes + size - kept.size)
    kept.size = size
    kept.entry = entry
    kept.draft = undefined
    return entry
  }

  clear(): void {
    this.#kept = []
    this.#head = 0
    this.#setBytes(0)
  }

  /** Sets what the entries hold, and tells the meter the difference. */
  #setBytes(bytes: number): void {
    const delta = bytes - this.#bytes
    this.#bytes = bytes
    if (delta !== 0) this.meter?.add(delta)
  }

  get size(): number {
    return this.#kept.length - this.#head
  }

  /** The heap bytes its entries hold, as {@link journalWeight} estimates them. */
  get bytes(): number {
    return this.#bytes
  }

  count(): number {
    return this.size
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
  return factsMatch(entry.method, entry.operation, entry.response.status, entry.path, filter)
}

function factsMatch(method: string, operation: string | null, status: number, path: string, filter: JournalFilter): boolean {
  if (filter.method && method !== filter.method.toUpperCase()) return false
  if (filter.operation && operation !== filter.operation) return false
  if (filter.status !== undefined && status !== filter.status) return false
  if (filter.path) {
    return filter.path.endsWith('*') ? path.startsWith(filter.path.slice(0, -1)) : path === filter.path
  }
  return true
}

/**
 * Request headers as the journal keeps them, credentials redacted: ours (`Authorization`) and
 * those of other services a client may send along, which the operator reading a partner's
 * journal must not see either.
 */
export function journalHeaders(headers: Iterable<[string, string]>, redaction: Redaction = DEFAULT_REDACTION): Record<string, string> {
  // @note Built from entries, not by assignment: `kept['__proto__'] = value` would hit the
  // prototype setter and drop a header a client may legally send under that name.
  return Object.fromEntries([...headers].map(([name, value]) => [name, redaction.headerValue(name, value)]))
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
 * The text a draft keeps of a body: all of it, or its first {@link JOURNAL_BODY_LIMIT}
 * characters as a flat copy.
 */
function keptText(text: string): string {
  if (text.length <= JOURNAL_BODY_LIMIT) return text
  // @note The same answer text (a cached list) is truncated once, not once per request.
  if (lastTruncated?.source !== text) {
    const kept = copyString(text.slice(0, JOURNAL_BODY_LIMIT))
    lastTruncated = { source: text, kept, weight: stringWeight(kept) }
  }
  return lastTruncated.kept
}

/**
 * The last long text truncated, with its kept start and that start's weight.
 * @note It holds one text (the newest long answer or body) beyond what journals hold.
 */
let lastTruncated: { readonly source: string; readonly kept: string; readonly weight: number } | undefined

/** {@link stringWeight} of a text {@link keptText} returned, without reading a truncated one again. */
function keptTextWeight(text: string): number {
  return text === lastTruncated?.kept ? lastTruncated.weight : stringWeight(text)
}

/** A body as a reader sees it, from the text a draft kept of it (`size`: the length of the whole text). */
function keptBody(text: string | undefined, size: number): JournalBody {
  if (text === undefined || text === '') return { body: undefined }
  if (size > JOURNAL_BODY_LIMIT) return { body: text, truncated: { size } }
  return journalBody(text)
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
