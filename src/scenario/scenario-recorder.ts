/**
 * `scenarios record`: reads what the published interface lets a client read of a live service
 * (every category, the orders list, pets by id, the deprecation headers of the pet read) and turns
 * it into a scenario that the loader accepts. Only `fetch`: no file system (the CLI writes the file).
 *
 * What is read, and why:
 * - `GET /categories` lists every category: recorded with their ids, so the served list is the same.
 * - `GET /store/orders` lists every order.
 * - Pets can only be read one id at a time (`GET /pets/{petId}`): the ids given, and/or ids 1, 2, 3…
 *   until a run of them is not found. A 410 means the read is past its sunset: `afterSunset`.
 * Every answer is judged by the same schemas the loader judges a scenario with, so a file that
 * would not validate is never written; the first records it refuses are named.
 */
import type * as z from 'zod'
import { contractOf, type OperationId } from '../contract/operations.js'
import { Category, Order, Pet } from '../contract/schemas.js'
import { PetstoreError } from '../core/petstore-error.js'
import { AnswerTooLargeError, DEFAULT_MAX_ANSWER_BYTES, readAnswerText } from '../verify/answer-body.js'
import { describeIssues, ScenarioFile, ScenarioName } from '../contract/scenario-format.js'

/** Options of {@link recordScenario}. */
export interface RecordScenarioOptions {
  /** The service's base URL, as the interface gives it (ending in `/v1`): `https://staging.example.com/v1`. */
  readonly from: string
  /** The bearer key sent to the service; never written to the scenario nor into an error message. */
  readonly apiKey: string
  /** The scenario's name: 1-64 letters, digits, `-` or `_`. */
  readonly name: string
  /** The scenario's version. @default '1.0.0' */
  readonly version?: string | undefined
  /** The scenario's description. @default 'Recorded from <base URL> on <YYYY-MM-DD>' */
  readonly description?: string | undefined
  /** Pet ids read with `GET /pets/{petId}`, besides those probed. @default [] */
  readonly petIds?: readonly number[] | undefined
  /**
   * Probe pet ids 1, 2, 3… and stop after this many in a row are not found; 0 probes none.
   * @default 10 without `petIds`, 0 with them
   */
  readonly probePets?: number | undefined
  /** How long each request may take, its whole answer included, in milliseconds. @default 10000 */
  readonly timeoutMs?: number | undefined
  /** How long the whole recording may take, in milliseconds: past it, it stops with `upstream_unreachable`. @default 300000 (5 minutes) */
  readonly deadlineMs?: number | undefined
  /** The most bytes of one answer read: a larger (or endless) body stops the recording with `upstream_nonconformant`. @default 67108864 (64 MiB) */
  readonly maxAnswerBytes?: number | undefined
  /** Called after each pet read, so that a long recording can show how far it is. @default none */
  readonly onPetRead?: ((progress: RecordProgress) => void) | undefined
}

/** How far the pet reads of {@link recordScenario} are, as {@link RecordScenarioOptions.onPetRead} gets it. */
export interface RecordProgress {
  /** Pet reads answered so far. */
  readonly petsRead: number
  /** Of those, the pets found (200). */
  readonly petsFound: number
  /** The id just read. */
  readonly petId: number
}

/** A recorded scenario: the file's content, and what the recording noticed on the way. */
export interface RecordedScenario {
  /** The scenario as it is written to the file: categories, pets and orders inline, ids kept. */
  readonly scenario: RecordedScenarioFile
  /** One line per thing worth knowing that did not stop the recording (a named pet not found, fields dropped). */
  readonly notes: readonly string[]
}

/** What {@link recordScenario} produces: a scenario file with every collection inline. */
export interface RecordedScenarioFile {
  readonly name: string
  readonly version: string
  readonly description: string
  readonly seed: {
    readonly categories: readonly z.infer<typeof Category>[]
    readonly pets: readonly z.infer<typeof Pet>[]
    readonly orders: readonly z.infer<typeof Order>[]
  }
  readonly deprecation?: {
    readonly deprecatedAt?: string
    readonly sunset?: string
    readonly link?: string
    readonly sunsetLink?: string
    readonly afterSunset: boolean
  }
}

/** Default of {@link RecordScenarioOptions.probePets} when no pet ids are given. */
export const DEFAULT_PROBE_PETS = 10
/** Default of {@link RecordScenarioOptions.timeoutMs}. */
export const DEFAULT_RECORD_TIMEOUT_MS = 10_000
/** Default of {@link RecordScenarioOptions.deadlineMs}: a service answering each pet slowly cannot hold the command for hours. */
export const DEFAULT_RECORD_DEADLINE_MS = 300_000
/** Probing stops here whatever answers: a service that answers every id would otherwise be read forever. */
export const MAX_PROBED_PET_ID = 10_000
/** How many refused records a message names before it says "and N more". */
const NAMED_RECORDS = 3

/**
 * Reads a live service's categories, orders and pets into a scenario that `scenarios validate`
 * accepts. Throws {@link PetstoreError}: `upstream_refused_key` (401), `upstream_unreachable`
 * (no whole answer within `timeoutMs`, or the recording past `deadlineMs`), `upstream_nonconformant`
 * (an answer the contract or the scenario format refuses, naming the record, or one larger than
 * `maxAnswerBytes`), `invalid_option`.
 *
 * @example
 * const { scenario } = await recordScenario({ from: 'https://staging.example.com/v1', apiKey: key, name: 'staging' })
 * await writeFile('scenarios/staging.json', JSON.stringify(scenario, null, 2))
 */
export async function recordScenario(options: RecordScenarioOptions): Promise<RecordedScenario> {
  const base = baseUrl(options.from)
  if (typeof options.apiKey !== 'string' || options.apiKey === '') {
    throw new PetstoreError('invalid_option', 'Cannot record without an API key: give the key the service accepts')
  }
  const name = ScenarioName.safeParse(options.name)
  if (!name.success) {
    throw new PetstoreError('invalid_option', `Cannot record a scenario named ${JSON.stringify(options.name)}: a scenario name ${name.error.issues[0]?.message}`)
  }
  const version = options.version ?? '1.0.0'
  const versionCheck = ScenarioFile.shape.version.safeParse(version)
  if (!versionCheck.success) {
    throw new PetstoreError('invalid_option', `Cannot record a scenario with version ${JSON.stringify(version)}: the version ${versionCheck.error.issues[0]?.message}`)
  }
  const petIds = [...new Set(options.petIds ?? [])]
  for (const id of petIds) {
    if (!Number.isSafeInteger(id) || id < 1) throw new PetstoreError('invalid_option', `Cannot read pet ${id}: pet ids are whole numbers from 1`)
  }
  const probe = options.probePets ?? (petIds.length === 0 ? DEFAULT_PROBE_PETS : 0)
  const limits = {
    timeoutMs: options.timeoutMs ?? DEFAULT_RECORD_TIMEOUT_MS,
    deadlineMs: options.deadlineMs ?? DEFAULT_RECORD_DEADLINE_MS,
    maxAnswerBytes: options.maxAnswerBytes ?? DEFAULT_MAX_ANSWER_BYTES,
  }
  for (const [option, value] of Object.entries(limits)) {
    if (!Number.isSafeInteger(value) || value < 1) throw new PetstoreError('invalid_option', `Cannot record with ${option} ${JSON.stringify(value)}: it must be a whole number from 1`)
  }
  const upstream = new Upstream(base, options.apiKey, limits)
  const notes: string[] = []

  const categories = await readList(upstream, 'listCategories', Category, 'category')
  const named = new Set(Object.keys(Category.shape))
  const dropped = new Set(categories.flatMap(({ raw }) => Object.keys(raw).filter((key) => !named.has(key))))
  if (dropped.size > 0) notes.push(`categories: fields the contract does not name were left out (${[...dropped].join(', ')})`)
  const orders = await readList(upstream, 'listOrders', Order, 'order')
  const pets = await readPets(upstream, petIds, probe, notes, options.onPetRead)

  const recorded: RecordedScenarioFile = {
    name: name.data,
    version,
    description: options.description ?? `Recorded from ${base} on ${new Date().toISOString().slice(0, 10)}`,
    seed: { categories: categories.map(({ record }) => record), pets: pets.records, orders: orders.map(({ record }) => record) },
    ...(pets.deprecation ? { deprecation: pets.deprecation } : {}),
  }
  // @note The loader's own check, last: what it refuses here (duplicate ids, a header date it
  // cannot read) would make a file that `scenarios validate` refuses.
  const parsed = ScenarioFile.safeParse(recorded)
  if (!parsed.success) throw upstream.nonconformant(`the recorded scenario would not validate: ${describeIssues(parsed.error)}`)
  return { scenario: recorded, notes }
}

/** The URL requests start from, as messages show it too: no trailing slash, query, fragment, user name or password. */
function baseUrl(from: string): string {
  let url: URL
  try {
    url = new URL(from)
  } catch {
    throw new PetstoreError('invalid_option', `Cannot record from ${JSON.stringify(from)}: not an absolute URL (give the service's base URL, such as https://staging.example.com/v1)`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new PetstoreError('invalid_option', `Cannot record from ${url.protocol}//${url.host}: only http and https base URLs can be read`)
  }
  if (url.username !== '' || url.password !== '') {
    throw new PetstoreError('invalid_option', `Cannot record from ${url.protocol}//${url.host}: the URL holds a user name or password; give the key on its own instead`)
  }
  // @note Query and fragment left out: the interface's paths are appended to the base URL.
  const path = url.pathname.replace(/\/+$/, '')
  return `${url.origin}${path}`
}

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly body: unknown
  /** `GET /pets/7`, for messages. */
  readonly request: string
}

/** The service, as the recording talks to it: one authenticated GET at a time, every one before the recording's deadline. */
class Upstream {
  /** Aborts whatever request is in flight once the whole recording has taken `deadlineMs`. */
  private readonly deadline: AbortSignal
  /** Requests answered whole so far, for the deadline's message. */
  private answered = 0

  constructor(
    private readonly base: string,
    private readonly apiKey: string,
    private readonly limits: { readonly timeoutMs: number; readonly deadlineMs: number; readonly maxAnswerBytes: number },
  ) {
    this.deadline = AbortSignal.timeout(limits.deadlineMs)
  }

  /** An error naming the base URL, with nothing of the key in it. */
  nonconformant(problem: string): PetstoreError {
    return new PetstoreError('upstream_nonconformant', this.redact(`Cannot record from ${this.base}: ${problem}.`))
  }

  async get(operation: OperationId, params: Record<string, number> = {}): Promise<Answer> {
    const path = contractOf(operation).path.replace(/\{(\w+)\}/g, (_, param: string) => String(params[param]))
    const request = `GET ${path}`
    const { timeoutMs, deadlineMs, maxAnswerBytes } = this.limits
    let response: Response | undefined
    let text: string
    try {
      if (this.deadline.aborted) throw this.deadline.reason
      response = await fetch(`${this.base}${path}`, {
        headers: { authorization: `Bearer ${this.apiKey}`, accept: 'application/json' },
        // @note Not followed: a redirect elsewhere is not the base URL given, and would see the key.
        redirect: 'manual',
        // @note One signal for the head and the body: a body that drips or never ends is cut at the timeout too.
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), this.deadline]),
      })
      text = await readAnswerText(response, maxAnswerBytes)
    } catch (error) {
      if (error instanceof AnswerTooLargeError) {
        throw this.nonconformant(`${request} answered more than ${maxAnswerBytes} bytes, the most the recording reads of one answer (--max-answer-bytes); the rest was not read`)
      }
      if (this.deadline.aborted) {
        throw new PetstoreError(
          'upstream_unreachable',
          `Cannot record from ${this.base}: the recording took longer than its deadline of ${deadlineMs} ms (stopped on ${request}, after ${this.answered} answers). Give more time with --deadline, or read fewer pets with --pet-ids or --probe-pets.`,
          { cause: error },
        )
      }
      const timedOut = error instanceof DOMException && error.name === 'TimeoutError'
      const reason = timedOut
        ? `no ${response === undefined ? '' : 'complete '}answer within ${timeoutMs} ms`
        : response === undefined
          ? causeCode(error)
          : `the connection broke while it answered, ${causeCode(error)}`
      throw new PetstoreError(
        'upstream_unreachable',
        this.redact(`Cannot record from ${this.base}: the service cannot be reached (${reason}, on ${request}). Check --from and that the service is up.`),
        { cause: error },
      )
    }
    this.answered += 1
    if (response.status === 401) {
      throw new PetstoreError(
        'upstream_refused_key',
        `Cannot record from ${this.base}: the service refused the API key (401 on ${request}${errorCode(text)}). Check --api-key.`,
      )
    }
    let body: unknown
    try {
      body = text === '' ? undefined : JSON.parse(text)
    } catch {
      body = undefined
    }
    const json = /^application\/([\w.-]*\+)?json\b/i.test(response.headers.get('content-type') ?? '')
    if (response.status === 200 && (!json || body === undefined)) {
      const type = response.headers.get('content-type') ?? 'no content type'
      throw this.nonconformant(`${request} answered 200 with ${json ? 'a body that is not JSON' : `${type}, not application/json`}`)
    }
    return { status: response.status, headers: response.headers, body, request }
  }

  /** A non-200 answer where the contract promises a 200. */
  unexpected(answer: Answer, hint = ''): PetstoreError {
    const where = answer.status >= 300 && answer.status < 400 ? ' (redirects are not followed: give the base URL it points to)' : answer.status === 404 ? ' (is --from the base URL, ending in /v1?)' : ''
    return this.nonconformant(`${answer.request} answered ${answer.status}${errorCode(answer.body)}${where || hint}`)
  }

  private redact(text: string): string {
    return this.apiKey === '' ? text : text.split(this.apiKey).join('***')
  }
}

/** The code of an Error body (a short token only: a message could echo anything). */
function errorCode(body: unknown): string {
  let value = body
  if (typeof body === 'string') {
    try {
      value = JSON.parse(body)
    } catch {
      return ''
    }
  }
  const code = typeof value === 'object' && value !== null ? (value as { code?: unknown }).code : undefined
  return typeof code === 'string' && /^[\w.-]{1,64}$/.test(code) ? `, code ${code}` : ''
}

/** `ECONNREFUSED`, `ENOTFOUND`…: what `fetch` failed on. */
function causeCode(error: unknown): string {
  for (let cause: unknown = error; cause instanceof Error; cause = cause.cause) {
    const code = (cause as NodeJS.ErrnoException).code
    if (typeof code === 'string' && code !== '') return code
  }
  return error instanceof Error ? error.message : String(error)
}

/** A list operation's records, each judged by `schema`; the first refused ones named. */
async function readList<T extends { id: number }>(
  upstream: Upstream,
  operation: OperationId,
  schema: z.ZodType<T>,
  what: string,
): Promise<{ record: T; raw: Record<string, unknown> }[]> {
  const answer = await upstream.get(operation)
  if (answer.status !== 200) throw upstream.unexpected(answer)
  if (!Array.isArray(answer.body)) throw upstream.nonconformant(`${answer.request} answered ${describeShape(answer.body)}, not an array of ${what} records`)
  const refused: string[] = []
  const records = answer.body.flatMap((raw: unknown, index) => {
    const parsed = schema.safeParse(raw)
    if (parsed.success) return [{ record: parsed.data, raw: raw as Record<string, unknown> }]
    // @note Said plainly: the schema's own message for a missing id is "id must be a safe integer".
    const problem = isObject(raw) && !Object.hasOwn(raw, 'id') ? 'id: missing (every record needs an integer id)' : describeIssues(parsed.error)
    refused.push(`${what} [${index}]${idOf(raw)}: ${problem}`)
    return []
  })
  if (refused.length > 0) {
    const more = refused.length > NAMED_RECORDS ? `; and ${refused.length - NAMED_RECORDS} more` : ''
    throw upstream.nonconformant(`${answer.request} answered ${refused.length === 1 ? 'a record' : `${refused.length} records`} the contract refuses: ${refused.slice(0, NAMED_RECORDS).join('; ')}${more}`)
  }
  return records
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function idOf(raw: unknown): string {
  const id = isObject(raw) ? raw['id'] : undefined
  return id === undefined ? ' (no id)' : ` (id ${JSON.stringify(id)})`
}

function describeShape(body: unknown): string {
  if (body === undefined) return 'no JSON body'
  if (body === null) return 'null'
  return Array.isArray(body) ? 'an array' : `a${typeof body === 'object' ? 'n object' : ` ${typeof body}`}`
}

/** The pets read by id, and the deprecation the pet read announces. */
async function readPets(
  upstream: Upstream,
  petIds: readonly number[],
  probe: number,
  notes: string[],
  onPetRead: RecordScenarioOptions['onPetRead'],
): Promise<{ records: z.infer<typeof Pet>[]; deprecation: RecordedScenarioFile['deprecation'] }> {
  const pets = new Map<number, z.infer<typeof Pet>>()
  let deprecation: RecordedScenarioFile['deprecation']
  let gone = false
  let petsRead = 0
  /** Reads one id, then says how far the reads are: true when found. */
  const read = async (id: number): Promise<boolean> => {
    const found = await readOne(id)
    petsRead += 1
    onPetRead?.({ petsRead, petsFound: pets.size, petId: id })
    return found
  }
  const readOne = async (id: number): Promise<boolean> => {
    const answer = await upstream.get('getPetById', { petId: id })
    deprecation ??= deprecationOf(answer.headers)
    if (answer.status === 410) {
      gone = true
      return false
    }
    if (answer.status === 404) return false
    if (answer.status !== 200) throw upstream.unexpected(answer)
    const parsed = Pet.safeParse(answer.body)
    if (!parsed.success) throw upstream.nonconformant(`${answer.request} answered a pet the contract refuses: ${describeIssues(parsed.error)}`)
    if (parsed.data.id !== id) throw upstream.nonconformant(`${answer.request} answered the pet with id ${parsed.data.id}`)
    pets.set(id, parsed.data)
    return true
  }
  for (const id of petIds) {
    if (!(await read(id)) && !gone) notes.push(`pet ${id}: not found (404), not recorded`)
    if (gone) break
  }
  let misses = 0
  let id = 1
  for (; probe > 0 && !gone && misses < probe && id <= MAX_PROBED_PET_ID; id++) {
    misses = pets.has(id) || (await read(id)) ? 0 : misses + 1
  }
  if (probe > 0 && !gone && misses < probe) notes.push(`pets: probing stopped at id ${MAX_PROBED_PET_ID} (give more with --pet-ids)`)
  if (gone) {
    notes.push(`pets: ${contractOf('getPetById').method} ${contractOf('getPetById').path} answered 410 Gone: recorded as past its sunset, without pets`)
    deprecation = { ...deprecation, afterSunset: true }
  }
  return { records: [...pets.values()].sort((a, b) => a.id - b.id), deprecation }
}

/**
 * The scenario's `deprecation` from a pet read's headers: `Deprecation` (RFC 9745 `@<seconds>`,
 * or a date as older drafts wrote it), `Sunset` (an HTTP date, RFC 8594) and the `Link`s with
 * rel `deprecation` and `sunset`. Undefined when the answer says nothing of a deprecation.
 */
export function deprecationOf(headers: Headers): RecordedScenarioFile['deprecation'] {
  const deprecation = headers.get('deprecation')
  const sunset = headers.get('sunset')
  if (deprecation === null && sunset === null) return undefined
  const epoch = deprecation === null ? undefined : /^@(-?\d+)$/.exec(deprecation.trim())
  const deprecatedAt = epoch ? isoDate(Number(epoch[1]) * 1000) : deprecation === null ? undefined : isoDate(Date.parse(deprecation))
  const links = linksOf(headers.get('link') ?? '')
  return {
    ...(deprecatedAt !== undefined ? { deprecatedAt } : {}),
    ...(links.deprecation !== undefined ? { link: links.deprecation } : {}),
    ...(sunset !== null && isoDate(Date.parse(sunset)) !== undefined ? { sunset: isoDate(Date.parse(sunset))! } : {}),
    ...(links.sunset !== undefined ? { sunsetLink: links.sunset } : {}),
    afterSunset: false,
  }
}

/** `2027-06-30T00:00:00Z`, or undefined for a date that cannot be read. */
function isoDate(milliseconds: number): string | undefined {
  const date = new Date(milliseconds)
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString().replace(/\.000Z$/, 'Z')
}

/** The http(s) targets of a `Link` header's `rel="deprecation"` and `rel="sunset"` entries. */
function linksOf(header: string): { deprecation?: string; sunset?: string } {
  const found: { deprecation?: string; sunset?: string } = {}
  for (const [, target, params] of header.matchAll(/<([^>]*)>((?:\s*;\s*[^;,]+)*)/g)) {
    const rel = /;\s*rel="?([^";]+)"?/i.exec(params ?? '')?.[1]?.toLowerCase().split(/\s+/) ?? []
    if (!/^https?:\/\//i.test(target ?? '')) continue
    for (const kind of ['deprecation', 'sunset'] as const) if (rel.includes(kind)) found[kind] ??= target!
  }
  return found
}
