/**
 * `verifyService`: the contract's conformance checks, run against a live deployment over HTTP.
 * Every check is a rule the sandbox itself holds to for the operations the interface specifies,
 * read from the contract (operations table, schemas, error table, the served OpenAPI document):
 * a service that passes them all answers as the sandbox does, as far as the interface says.
 */
import { randomBytes } from 'node:crypto'
import { buildOpenApiDocument } from '../contract/openapi.js'
import { contractOf, OPERATION_CONTRACTS, type OperationContract, type OperationId } from '../contract/operations.js'
import { ApiError, StoredCategory } from '../contract/schemas.js'
import { DEFAULT_DESCRIPTION_MAX_LENGTH, DEFAULT_NAME_MAX_LENGTH } from '../contract/limits.js'
import { PetstoreError } from '../core/petstore-error.js'
import { isJsonMediaType } from '../contract/media-type.js'
import { AnswerTooLargeError, DEFAULT_MAX_ANSWER_BYTES, readAnswerText } from './answer-body.js'
import { invalidBodies, type ProbeBody } from './invalid-bodies.js'

/** Options of {@link verifyService}. */
export interface VerifyOptions {
  /** The interface's base URL, ending in `/v1`: `https://staging.shop.test/v1`. */
  readonly baseUrl: string
  /** An API key the service accepts. */
  readonly apiKey: string
  /** A well-formed key the service rejects, for the wrong-key checks. @default `verify-wrong-key-` and 24 random hex digits */
  readonly wrongKey?: string
  /** Send no `POST`: the checks that would create (or could, on a broken service) are reported as not applicable. @default false */
  readonly readOnly?: boolean
  /** The pet id the deprecated `GET /pets/{petId}` is asked for (its answer may be 200 or 404: the headers are checked). @default '1' */
  readonly petId?: string
  /** The longest name the service accepts, as `serve --name-max-length`. @default 200 */
  readonly nameMaxLength?: number
  /** The longest description the service accepts, as `serve --description-max-length`. @default 2000 */
  readonly descriptionMaxLength?: number
  /** How long each request may take before it counts as unanswered, in milliseconds: its whole answer, body included. @default 10000 */
  readonly timeoutMs?: number
  /** The most bytes of one answer read: a larger (or endless) body stops the run with `upstream_nonconformant`. @default 67108864 (64 MiB) */
  readonly maxAnswerBytes?: number
  /** The `fetch` requests go through. @default globalThis.fetch */
  readonly fetch?: typeof fetch
}

/** `held`: the service answers as the contract says; `broken`: it does not; `not_applicable`: not checked (why in `note`). */
export type VerifyOutcome = 'held' | 'broken' | 'not_applicable'

/** A request `verify` sent and the answer it got, as the report shows them (the API key redacted, long bodies cut). */
export interface VerifyExchange {
  readonly request: { readonly method: string; readonly url: string; readonly headers: Readonly<Record<string, string>>; readonly body?: string }
  /** Undefined when no answer came (`problems` says why). */
  readonly response?: { readonly status: number; readonly headers: Readonly<Record<string, string>>; readonly body: string }
}

/** One conformance check and how it went. */
export interface VerifyCheck {
  /** Stable id: `createCategory.201`, `listCategories.401-wrong-key`, `createCategory.400.invalid_json`. */
  readonly id: string
  readonly operation: OperationId
  /** What the contract says, in a line: `401 with an Error body when the key is wrong`. */
  readonly title: string
  readonly outcome: VerifyOutcome
  /** What differs from the contract (empty unless broken). */
  readonly problems: readonly string[]
  /** Why a check is not applicable. */
  readonly note?: string
  /** The request and its answer, for a broken check. */
  readonly exchange?: VerifyExchange
}

/** What {@link verifyService} found. */
export interface VerifyReport {
  readonly baseUrl: string
  readonly readOnly: boolean
  readonly checks: readonly VerifyCheck[]
  readonly summary: { readonly held: number; readonly broken: number; readonly notApplicable: number }
}

/** A body cut to this many characters in a report. */
const SHOWN_BODY_CHARS = 600
/** The answer headers a report shows. */
const SHOWN_HEADERS = ['content-type', 'www-authenticate', 'deprecation', 'sunset', 'link', 'location']

interface Answer {
  readonly status: number
  readonly headers: Headers
  readonly text: string
  /** The body as JSON, or undefined when it is not JSON. */
  readonly json: unknown
}

/**
 * Runs the contract's conformance checks against the service at `baseUrl` and resolves with each
 * check's outcome. Rejects with a `PetstoreError` when the options are wrong (`invalid_option`),
 * the service does not answer the first request whole (`upstream_unreachable`), or an answer is
 * larger than `maxAnswerBytes` (`upstream_nonconformant`).
 * @example
 * const report = await verifyService({ baseUrl: 'http://127.0.0.1:4010/v1', apiKey: 'sandbox-dev-key' })
 * if (report.summary.broken > 0) console.log(report.checks.filter((check) => check.outcome === 'broken'))
 */
export async function verifyService(options: VerifyOptions): Promise<VerifyReport> {
  const baseUrl = checkBaseUrl(options.baseUrl)
  const { apiKey, readOnly = false, petId = '1', timeoutMs = 10_000, maxAnswerBytes = DEFAULT_MAX_ANSWER_BYTES, fetch: send = globalThis.fetch } = options
  if (!Number.isSafeInteger(maxAnswerBytes) || maxAnswerBytes < 1) throw new PetstoreError('invalid_option', `maxAnswerBytes must be a whole number of bytes from 1, got ${JSON.stringify(maxAnswerBytes)}`)
  const wrongKey = options.wrongKey ?? `verify-wrong-key-${randomBytes(12).toString('hex')}`
  for (const [name, key] of [['apiKey', apiKey], ['wrongKey', wrongKey]] as const) {
    if (!/^\S+$/.test(key)) throw new PetstoreError('invalid_option', `${name} must be a bearer token: non-empty, without spaces, got ${JSON.stringify(key)}`)
  }
  if (wrongKey === apiKey) throw new PetstoreError('invalid_option', 'wrongKey must differ from apiKey: the wrong-key checks need a key the service rejects')
  const limits = {
    nameMaxLength: options.nameMaxLength ?? DEFAULT_NAME_MAX_LENGTH,
    descriptionMaxLength: options.descriptionMaxLength ?? DEFAULT_DESCRIPTION_MAX_LENGTH,
  }
  const checks: VerifyCheck[] = []
  let answered = false
  // A run's own token, so that what it creates is recognisable and never taken for what another run created.
  const run = randomBytes(4).toString('hex')
  const validBody = (purpose: string): Record<string, string> => ({ name: `verify ${run} ${purpose}`, description: 'Created by petstore-sandbox verify' })

  /** Sends one request; a service that never answers the first one is unreachable. */
  const exchange = async (operation: OperationContract, { key, body, params = {} }: { key?: string | undefined; body?: ProbeBody; params?: Record<string, string> }) => {
    const path = operation.path.replace(/\{(\w+)\}/g, (_whole, name: string) => encodeURIComponent(params[name] ?? ''))
    const url = `${baseUrl}${path}`
    const headers: Record<string, string> = {}
    if (key !== undefined) headers['authorization'] = `Bearer ${key}`
    if (body !== undefined && body.contentType !== null) headers['content-type'] = body.contentType
    const shownHeaders = key === undefined ? { ...headers } : { ...headers, authorization: key === apiKey ? 'Bearer [the API key]' : `Bearer ${key}` }
    const request: VerifyExchange['request'] = {
      method: operation.method,
      url,
      headers: shownHeaders,
      ...(body && { body: cut(new TextDecoder().decode(body.bytes)) }),
    }
    let response: Response | undefined
    let text: string
    try {
      // @note One signal for the head and the body: a body that drips or never ends is cut at `timeoutMs` too.
      response = await send(url, { method: operation.method, headers, body: body?.bytes, redirect: 'manual', signal: AbortSignal.timeout(timeoutMs) })
      text = await readAnswerText(response, maxAnswerBytes)
    } catch (error) {
      if (error instanceof AnswerTooLargeError) {
        throw new PetstoreError(
          'upstream_nonconformant',
          `${operation.method} ${url} answered more than ${maxAnswerBytes} bytes, the most verify reads of one answer (maxAnswerBytes): the rest was not read`,
          { cause: error },
        )
      }
      const why = describeFetchError(error, timeoutMs, response !== undefined)
      // @note A service that answers, only slowly, is told apart: the fix is more time, not another address (trial finding).
      const hint = /within \d+ ms$/.test(why) ? ', or give a slow service more time (--timeout)' : ''
      if (!answered) throw new PetstoreError('upstream_unreachable', `Cannot reach ${url}: ${why}. Check the base URL (it ends in /v1) and that the service is running${hint}`, { cause: error })
      return { request, answer: undefined, failure: `no answer: ${why}` }
    }
    answered = true
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    const answer: Answer = { status: response.status, headers: response.headers, text, json }
    return { request, answer, failure: undefined }
  }

  const record = (
    operation: OperationContract,
    id: string,
    title: string,
    sent: Awaited<ReturnType<typeof exchange>>,
    judge: (answer: Answer) => string[],
  ): Answer | undefined => {
    const problems = sent.answer === undefined ? [sent.failure] : judge(sent.answer)
    const fullId = `${operation.id}.${id}`
    if (problems.length === 0) {
      checks.push({ id: fullId, operation: operation.id, title, outcome: 'held', problems: [] })
    } else {
      const response = sent.answer && { status: sent.answer.status, headers: shownHeaders(sent.answer.headers), body: cut(sent.answer.text) }
      checks.push({ id: fullId, operation: operation.id, title, outcome: 'broken', problems, exchange: { request: sent.request, ...(response && { response }) } })
    }
    return sent.answer
  }
  const notApplicable = (operation: OperationContract, id: string, title: string, note: string) => {
    checks.push({ id: `${operation.id}.${id}`, operation: operation.id, title, outcome: 'not_applicable', problems: [], note })
  }

  const list = contractOf('listCategories')
  const create = contractOf('createCategory')
  const first = await exchange(list, { key: apiKey })
  // @note A refused key is the caller's mistake, not the service's: nothing could be checked with it.
  if (first.answer?.status === 401 || first.answer?.status === 403) {
    throw new PetstoreError('invalid_option', `apiKey is refused by the service: GET ${first.request.url} answered ${first.answer.status} ${cut(first.answer.text, 200)}. Give a key it accepts`)
  }
  if (first.answer?.status === 404) {
    throw new PetstoreError('invalid_option', `baseUrl has no ${list.path} under it: GET ${first.request.url} answered 404. Give the interface's base URL (it ends in /v1)`)
  }
  const listed = record(list, String(list.success.status), `${list.success.status} with a JSON array of Category`, first, (answer) => categoryList(answer, list.success.status))
  // The interface's security requirement is global: every operation it names refuses a missing or wrong key.
  for (const operation of OPERATION_CONTRACTS as readonly OperationContract[]) {
    if (operation.body !== undefined && readOnly) {
      notApplicable(operation, '401-missing-key', '401 with an Error body when the key is missing', READ_ONLY_NOTE)
      notApplicable(operation, '401-wrong-key', '401 with an Error body when the key is wrong', READ_ONLY_NOTE)
      continue
    }
    const body = operation.body === undefined ? undefined : jsonBody(validBody('401 check'))
    const params = { petId }
    record(operation, '401-missing-key', '401 with an Error body when the key is missing', await exchange(operation, { body, params }), (answer) => errorAnswer(answer, 401))
    record(operation, '401-wrong-key', '401 with an Error body when the key is wrong', await exchange(operation, { key: wrongKey, body, params }), (answer) => errorAnswer(answer, 401))
  }

  for (const operation of (OPERATION_CONTRACTS as readonly OperationContract[]).filter((contract) => contract.deprecated)) {
    const sent = await exchange(operation, { key: apiKey, params: { petId } })
    const headers = deprecationHeaders(operation)
    const statuses = [operation.success.status, ...(operation.errorStatuses ?? [])]
    record(operation, 'deprecation', `Deprecation header (RFC 9745, ${headers.deprecationPattern}) on its answer`, sent, (answer) => {
      const problems = statuses.includes(answer.status) ? [] : [`status ${answer.status}: the operation answers ${statuses.join(', ')} to an accepted key`]
      const value = answer.headers.get('deprecation')
      if (value === null) problems.push('no Deprecation header: the operation is deprecated')
      else if (!new RegExp(headers.deprecationPattern).test(value)) problems.push(`Deprecation is ${JSON.stringify(value)}, not ${headers.deprecationPattern} (RFC 9745: @<seconds since the epoch>)`)
      return problems
    })
    const sunset = sent.answer?.headers.get('sunset') ?? null
    if (sent.answer !== undefined && sunset === null) {
      notApplicable(operation, 'sunset', 'Sunset header (RFC 8594) an HTTP date after the deprecation', 'the answer has no Sunset header (the interface shows no date; the sandbox sends one when its scenario sets one)')
    } else {
      record(operation, 'sunset', 'Sunset header (RFC 8594) an HTTP date after the deprecation', sent, (answer) => sunsetProblems(answer))
    }
  }

  if (readOnly) {
    for (const { what, expected } of invalidBodies(validBody('400 check'), limits)) {
      notApplicable(create, `400.${expected.code}.${slug(what)}`, `400 with an Error body (${what})`, READ_ONLY_NOTE)
    }
    for (const [id, title] of CREATE_CHECKS) notApplicable(create, id, title, READ_ONLY_NOTE)
  } else {
    for (const body of invalidBodies(validBody('400 check'), limits)) {
      record(create, `400.${body.expected.code}.${slug(body.what)}`, `400 with an Error body (${body.what})`, await exchange(create, { key: apiKey, body }), (answer) =>
        errorAnswer(answer, body.expected.status),
      )
    }
    const full = validBody('with a description')
    const nameOnly = validBody('without a description')
    delete nameOnly['description']
    const created: Record<string, unknown>[] = []
    for (const [index, sentBody] of [full, nameOnly].entries()) {
      const [id, title] = CREATE_CHECKS[index]!
      record(create, id, title, await exchange(create, { key: apiKey, body: jsonBody(sentBody) }), (answer) => {
        const problems = createdCategory(answer, create.success.status, sentBody)
        const category = answer.json as Record<string, unknown>
        if (problems.length === 0) {
          const known = [...(Array.isArray(listed?.json) ? (listed.json as { id?: unknown }[]) : []), ...created].map((item) => item.id)
          if (known.includes(category['id'])) problems.push(`id ${String(category['id'])} is not new: an existing category has it`)
        }
        if (answer.status === create.success.status && typeof answer.json === 'object' && answer.json !== null) created.push(category)
        return problems
      })
    }
    const [id, title] = CREATE_CHECKS[2]
    record(create, id, title, await exchange(list, { key: apiKey }), (answer) => {
      // @note Only what the creates changed: the list's shape is `listCategories.200`'s to judge.
      const problems = [...statusProblems(answer, list.success.status), ...bodyProblems(answer)]
      if (!Array.isArray(answer.json)) return problems.length > 0 ? problems : ['the body is not a JSON array']
      const items = (answer.json as unknown[]).filter((item): item is Record<string, unknown> => typeof item === 'object' && item !== null)
      for (const [index, sentBody] of [full, nameOnly].entries()) {
        const answered = created.find((category) => category['name'] === sentBody['name'])
        const found = items.find((item) => item['name'] === sentBody['name'] && (answered?.['id'] === undefined || item['id'] === answered['id']))
        if (found === undefined) problems.push(`the category created ${index === 0 ? 'with' : 'without'} a description (${JSON.stringify(sentBody['name'])}) is not listed`)
        else if (found['description'] !== sentBody['description']) problems.push(`the category ${JSON.stringify(sentBody['name'])} is listed with description ${JSON.stringify(found['description'])}, sent ${JSON.stringify(sentBody['description'])}`)
      }
      return problems
    })
  }

  const count = (outcome: VerifyOutcome) => checks.filter((check) => check.outcome === outcome).length
  return { baseUrl, readOnly, checks, summary: { held: count('held'), broken: count('broken'), notApplicable: count('not_applicable') } }
}

const READ_ONLY_NOTE = 'read-only: no POST is sent'

/** The checks of valid creates: id and title. */
const CREATE_CHECKS = [
  ['201', '201 with the created Category: a new int64 id, name and description as sent'],
  ['201-name-only', '201 with the created Category when no description is sent: a new id, the name, no description'],
  ['201-listed', 'the created categories are listed, as created'],
] as const


function jsonBody(value: unknown): ProbeBody {
  return { what: 'a valid NewCategory', contentType: 'application/json', bytes: new TextEncoder().encode(JSON.stringify(value)) }
}

function checkBaseUrl(text: string): string {
  let url: URL
  try {
    url = new URL(text)
  } catch {
    throw new PetstoreError('invalid_option', `baseUrl must be an http(s) URL such as http://127.0.0.1:4010/v1, got ${JSON.stringify(text)}`)
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new PetstoreError('invalid_option', `baseUrl must be an http(s) URL such as http://127.0.0.1:4010/v1, got ${JSON.stringify(text)}`)
  }
  if (url.search !== '' || url.hash !== '') throw new PetstoreError('invalid_option', `baseUrl must not hold a query or fragment, got ${JSON.stringify(text)}`)
  return url.href.replace(/\/+$/, '')
}

/** The Deprecation header's pattern, as the served OpenAPI document declares it. */
function deprecationHeaders(operation: OperationContract): { deprecationPattern: string } {
  const document = buildOpenApiDocument({ profile: 'strict' }) as { paths: Record<string, Record<string, { responses: Record<string, { headers?: Record<string, { schema: { pattern?: string } }> }> }>> }
  const declared = document.paths[operation.path]?.[operation.method.toLowerCase()]?.responses[String(operation.success.status)]?.headers
  return { deprecationPattern: declared?.['Deprecation']?.schema.pattern ?? '.' }
}

function sunsetProblems(answer: Answer): string[] {
  const sunset = answer.headers.get('sunset') ?? ''
  const at = Date.parse(sunset)
  if (!/^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(sunset) || Number.isNaN(at)) {
    return [`Sunset is ${JSON.stringify(sunset)}, not an HTTP date (RFC 8594: IMF-fixdate, "Wed, 30 Jun 2027 00:00:00 GMT")`]
  }
  const deprecation = /^@(-?\d+)$/.exec(answer.headers.get('deprecation') ?? '')
  if (deprecation && at < Number(deprecation[1]) * 1000) return [`Sunset ${sunset} is before the Deprecation date`]
  return []
}

function contentTypeProblems(answer: Answer): string[] {
  const type = answer.headers.get('content-type')
  return isJsonMediaType(type) ? [] : [`Content-Type is ${type === null ? 'missing' : JSON.stringify(type)}, not application/json`]
}

function statusProblems(answer: Answer, status: number): string[] {
  return answer.status === status ? [] : [`status ${answer.status}, expected ${status}`]
}

function bodyProblems(answer: Answer): string[] {
  return answer.json === undefined ? [`the body is not JSON: ${JSON.stringify(cut(answer.text, 80))}`] : []
}

/** An Error answer: the status, JSON, the Error shape, `status` repeating the HTTP status, and for a 401 a `WWW-Authenticate` challenge. */
function errorAnswer(answer: Answer, status: number): string[] {
  const problems = [...statusProblems(answer, status), ...contentTypeProblems(answer), ...bodyProblems(answer)]
  if (answer.json !== undefined) {
    const parsed = ApiError.safeParse(answer.json)
    if (!parsed.success) problems.push(`the body is not an Error (code, message, status): ${issueText(parsed.error.issues)}`)
    else if (parsed.data.status !== answer.status) problems.push(`the Error's status is ${parsed.data.status}, the HTTP status ${answer.status}`)
  }
  if (status === 401 && !/^bearer\b/i.test(answer.headers.get('www-authenticate') ?? '')) {
    problems.push('no WWW-Authenticate: Bearer challenge (RFC 9110 §11.6.1, RFC 6750 §3)')
  }
  return problems
}

function categoryList(answer: Answer, status: number): string[] {
  const problems = [...statusProblems(answer, status), ...contentTypeProblems(answer), ...bodyProblems(answer)]
  if (answer.json === undefined) return problems
  if (!Array.isArray(answer.json)) return [...problems, 'the body is not a JSON array']
  for (const [index, item] of (answer.json as unknown[]).entries()) {
    const parsed = StoredCategory.safeParse(item)
    if (!parsed.success) problems.push(`item ${index} is not a Category: ${issueText(parsed.error.issues)}`)
  }
  const ids = (answer.json as { id?: unknown }[]).map((item) => item?.id)
  const repeated = ids.find((id, index) => id !== undefined && ids.indexOf(id) !== index)
  if (repeated !== undefined) problems.push(`id ${String(repeated)} is listed twice`)
  return problems
}

function createdCategory(answer: Answer, status: number, sent: Record<string, string>): string[] {
  const problems = [...statusProblems(answer, status), ...contentTypeProblems(answer), ...bodyProblems(answer)]
  if (answer.json === undefined) return problems
  const parsed = StoredCategory.safeParse(answer.json)
  if (!parsed.success) problems.push(`the body is not a Category: ${issueText(parsed.error.issues)}`)
  const body = (typeof answer.json === 'object' && answer.json !== null ? answer.json : {}) as Record<string, unknown>
  for (const field of ['name', 'description'] as const) {
    if (body[field] !== sent[field] && (body[field] !== undefined || sent[field] !== undefined)) {
      problems.push(sent[field] === undefined ? `${field} ${JSON.stringify(body[field])} was not sent` : `${field} is ${JSON.stringify(body[field])}, sent ${JSON.stringify(sent[field])}`)
    }
  }
  return problems
}

function issueText(issues: readonly { readonly path: readonly PropertyKey[]; readonly message: string }[]): string {
  return issues
    .slice(0, 3)
    .map((issue) => (issue.path.length === 0 ? issue.message : `${issue.path.map(String).join('.')}: ${issue.message}`))
    .join('; ')
}

function shownHeaders(headers: Headers): Record<string, string> {
  const shown: Record<string, string> = {}
  for (const name of SHOWN_HEADERS) {
    const value = headers.get(name)
    if (value !== null) shown[name] = value
  }
  return shown
}

function cut(text: string, length = SHOWN_BODY_CHARS): string {
  return text.length > length ? `${text.slice(0, length)}… (${text.length} characters)` : text
}

/** `name 201 characters long` → `name-201-characters-long`. */
function slug(text: string): string {
  return text.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '')
}

/** Why a request got no whole answer; `started` when its status and headers came, and then the body did not. */
function describeFetchError(error: unknown, timeoutMs: number, started: boolean): string {
  if (error instanceof DOMException && error.name === 'TimeoutError') return `no ${started ? 'complete ' : ''}answer within ${timeoutMs} ms`
  if (started) return `the connection broke while it answered (${describeFetchError(error, timeoutMs, false)})`
  const cause = error instanceof Error && error.cause instanceof Error ? error.cause : error
  const code = typeof cause === 'object' && cause !== null && 'code' in cause ? String(cause.code) : undefined
  const message = cause instanceof Error ? cause.message : String(cause)
  return code === undefined || message.includes(code) ? message : `${code} ${message}`
}
