/**
 * The error table: the only place an Error body is made. Handlers name a code and its
 * parameters; the error table of docs/errors.md and the OpenAPI document are generated from this one list.
 */
import type { ApiError } from './schemas.js'

interface ErrorSpec {
  readonly status: number
  /** `{name}` placeholders are filled from the parameters given to {@link apiError}. */
  readonly message: string
  /** When a client sees it; used for the error table in docs/errors.md. */
  readonly when: string
  /**
   * Only the standalone server's admin API (`/__sandbox/…`) answers it: `Prefer: code=` cannot
   * force it and the OpenAPI document of the interface does not list it.
   */
  readonly admin?: true
  /**
   * The standalone server answers it before any route, to a request HTTP itself refuses (Node's
   * parser, timeouts): `Prefer: code=` cannot force it, and the OpenAPI document lists it only
   * among its `x-error-codes`.
   */
  readonly http?: true
  /**
   * Only the server in proxy mode (`serve --proxy`) answers it, when the real service does not:
   * `Prefer: code=` cannot force it, and the OpenAPI document lists it only among its `x-error-codes`.
   */
  readonly proxy?: true
}

/**
 * How long `storage_unavailable` lasts, as its message's `{until}` says it: `brief`, a failure the
 * storage may recover from by itself; `restart`, storage lost (Redis went back to an older state),
 * which only a restart of the sandbox ends.
 * @note Always "retry shortly", partners retried against a sandbox that refused everything until
 * restarted (trial38).
 */
export const STORAGE_UNAVAILABLE_UNTIL = {
  brief: 'right now; retry shortly',
  restart: 'until the sandbox is restarted: its storage lost its data or went back to an older state, and it answers nothing from it (the operator\'s log says why); retrying will not help before then',
} as const

/**
 * Why a write's outcome is unknown, as `write_outcome_unknown`'s `{why}` says it: `late`, the
 * storage did not confirm it within the request's time; `replica`, a replica of the storage that
 * must have it is not online, so it was not waited for.
 * @note Always "did not confirm it in time", a refusal made at once for a missing replica read as
 * a slow storage, and invited a retry that duplicated the write (trial38).
 */
export const WRITE_OUTCOME_UNKNOWN_WHY = {
  late: 'the storage did not confirm it in time',
  partial: 'the storage stopped it part way (a key of the wrong type, or a command its user may not run), and what it wrote before stays',
  replica: 'it was applied, but a replica of the storage that must have it before it is confirmed is not online (a failover now would lose it)',
} as const

/** Every error the sandbox answers: code → status, when it happens, and the message template. */
export const ERROR_TABLE = {
  invalid_api_key: {
    status: 401,
    message: 'Invalid API key: {reason}',
    when: 'The header is not `Bearer <token>`, or the token is not an accepted key',
  },
  missing_api_key: {
    status: 401,
    message: 'Missing API key: send the header "Authorization: Bearer <API_KEY>"',
    when: 'No `Authorization` header',
  },
  invalid_body: {
    status: 400,
    message: '{reason}',
    when: 'Body missing or empty, or not a JSON object (array, string, null…)',
  },
  invalid_json: {
    status: 400,
    message: 'Request body is not valid JSON: {reason}',
    when: 'Malformed JSON, or bytes that are not UTF-8',
  },
  missing_field: {
    status: 400,
    message: '{field} is required',
    when: 'A required field (`name`) is absent',
  },
  invalid_field: {
    status: 400,
    message: '{reason}',
    when: 'A field has the wrong type, an empty value, more characters than its limit (name 200, description 2,000 by default), or an unpaired UTF-16 surrogate',
  },
  unknown_field: {
    status: 400,
    message: '{field} is not a field of NewCategory (strict mode rejects unknown fields)',
    when: 'Only with `strict: true`: a field NewCategory does not declare (including `id`)',
  },
  unsupported_media_type: {
    status: 400,
    message: 'Content-Type must be application/json, got {contentType}',
    when: 'A body sent with a content type that is not JSON',
  },
  payload_too_large: {
    status: 413,
    message: 'Request body is larger than the limit of {limit} bytes',
    when: 'A body over the limit (1 MiB by default)',
  },
  invalid_prefer: {
    status: 400,
    message: 'Invalid Prefer header: {reason}',
    when: 'A `Prefer` header asking for an unknown status or an out-of-range delay',
  },
  not_found: {
    status: 404,
    message: '{what} not found',
    when: 'An unknown path under the base URL, or an unknown pet id',
  },
  method_not_allowed: {
    status: 405,
    message: 'Method {method} is not allowed on {path}; allowed: {allow}',
    when: 'A method the path does not support (the `Allow` header lists those it does)',
  },
  category_limit: {
    status: 409,
    message: 'The tenant holds the most categories allowed ({max}); reset it to start again',
    when: 'A create beyond the categories one tenant may hold (20,000 by default on the server)',
  },
  gone: {
    status: 410,
    message: '{operation} was sunset on {sunset}',
    when: 'The deprecated pet operation, when the after-sunset mode is on',
  },
  internal_error: {
    status: 500,
    message: 'Internal error: {reason}',
    when: 'A simulated fault (`Prefer: code=500`, a fault rate), or the id space is exhausted',
  },
  service_unavailable: {
    status: 503,
    message: 'Service unavailable: {reason}',
    when: 'A simulated fault (`Prefer: code=503`, a fault rate)',
  },
  storage_unavailable: {
    status: 503,
    message: 'Storage unavailable: the sandbox cannot read or write its data {until}',
    when: `With a data directory, the disk is full, read-only or failing, or a create would leave it less room than deleting the tenants needs; with \`--redis-url\`, Redis does not answer (the operator's log says which); \`Retry-After\` says when to retry. \`{until}\` is "${STORAGE_UNAVAILABLE_UNTIL.brief}", or once Redis lost the sandbox's keys or went back to an older state (storage lost: only a restart of the sandbox ends it; \`Retry-After: 60\`) "${STORAGE_UNAVAILABLE_UNTIL.restart}"`,
  },
  write_outcome_unknown: {
    status: 503,
    message: 'The write may or may not have been applied: {why}; list the resource to check before retrying',
    when: `With \`--redis-url\`, a write sent to Redis went unanswered (Redis hung, or the connection dropped after sending) and Redis could not say within the request's time whether it was applied, or its master has replicas and none confirmed it in time (applied on the master; a failover would lose it); with a data directory, a write whose fsync failed could not be undone durably (the undo failed, or its own fsync did); \`Retry-After\` says when to check. \`{why}\` is "${WRITE_OUTCOME_UNKNOWN_WHY.late}", or, refused at once because fewer of the master's replicas are online than expected, "${WRITE_OUTCOME_UNKNOWN_WHY.replica}", or, stopped part way by Redis (a key of the wrong type, or a command the sandbox's Redis user may not run met inside the write's script), "${WRITE_OUTCOME_UNKNOWN_WHY.partial}"`,
  },
  tenant_capacity: {
    status: 503,
    message: 'The sandbox is full: it holds {limit} tenants and none can make room now; retry later',
    when: 'A new key when the server holds `--max-tenants` tenants and none may be evicted without losing data; `Retry-After` says when to retry',
  },
  over_capacity: {
    status: 503,
    message: 'The sandbox is at capacity: {reason}; retry after {retryAfter} s',
    when: 'The server is over its memory budget, store budget or connection cap, or a request\'s body waited half its request timeout for its turn (other bodies ahead of it; nothing of it handled), or with a data directory a scenario switch, a reset or a tenant delete (what the tenant holds, and what it will) or a tenant\'s first write of a large start scenario\'s seed would write more than its disk has room for; the answer carries `Retry-After`',
  },
  forbidden: {
    status: 403,
    message: 'Forbidden: {reason}',
    when: 'Admin API: an API key used where only the admin token is allowed (`?tenant=`, `GET /__sandbox/tenants`)',
    admin: true,
  },
  unknown_scenario: {
    status: 404,
    message: 'Unknown scenario {name}; known: {known}',
    when: 'Admin API: `PUT /__sandbox/scenario` with a name the sandbox does not have; a `POST /__sandbox/reset` without a body of a tenant whose scenario file is gone since a restart',
    admin: true,
  },
  scenario_not_allowed: {
    status: 403,
    message: 'Scenario {name} is not one tenants may switch to; allowed: {allowed}',
    when: 'Admin API: `PUT /__sandbox/scenario` with a scenario the operator did not allow (`--scenario-allow`)',
    admin: true,
  },
  invalid_scenario: {
    status: 500,
    message: 'The scenario cannot be loaded: {reason}',
    when: 'Admin API: `PUT /__sandbox/scenario` or `POST /__sandbox/reset` with a scenario of `--scenarios-dir` whose file, or a fixture it names, is broken (not JSON, not a scenario, unreadable, or named otherwise than its file); `{reason}` names the file by its name alone and the problem, the operator\'s log by its path. The operator fixes the file; nothing of the tenant changed. With `--watch`, a file the watch read whole before serves that last good version instead (a save under way, or a broken one)',
    admin: true,
  },
  unknown_tenant: {
    status: 404,
    message: 'Unknown tenant {tenant}: no tenant has this id, nor this unique prefix of 12 or more hex digits (see GET /__sandbox/tenants)',
    when: 'Admin API: `?tenant=` names no tenant',
    admin: true,
  },
  invalid_query: {
    status: 400,
    message: 'Invalid query parameter {name}: expected {reason}',
    when: 'Admin API: a filter of `GET /__sandbox/requests` that cannot match (`?status=abc`, `?path=categories`, `?method=FETCH`, `?operation=nope`, an unknown parameter)',
    admin: true,
  },
  answer_limit: {
    status: 409,
    message: 'The tenant has {max} planned answers pending, the most it may hold; let them be used, or drop them with DELETE /__sandbox/answers',
    when: 'Admin API: `POST /__sandbox/answers` when the tenant already holds 100 planned answers',
    admin: true,
  },
  plan_book_full: {
    status: 503,
    message: 'The sandbox holds {max} planned answers over all tenants, the most it may, and no tenant holds more than yours would: retry after {retryAfter} s (as plans are used), or plan fewer at once',
    when: 'Admin API: `POST /__sandbox/answers` when all tenants together hold the plan book\'s cap (10,000) and none holds more plans than the planner would after this one; the answer carries `Retry-After`',
    admin: true,
  },
  tenant_required: {
    status: 400,
    message: 'The admin token acts on one tenant at a time: add ?tenant=<id> (see GET /__sandbox/tenants)',
    when: 'Admin API: the admin token used on a tenant route without `?tenant=`',
    admin: true,
  },
  bad_request: {
    status: 400,
    message: 'Bad request: {reason}',
    when: 'Server: a request that is not valid HTTP/1.1 (a malformed request line or header, a bad chunk)',
    http: true,
  },
  request_timeout: {
    status: 408,
    message: 'Request timeout: {reason}',
    when: 'Server: the headers or the whole request took longer than the server allows',
    http: true,
  },
  headers_too_large: {
    status: 431,
    message: 'Request header fields are larger than the server accepts ({limit} bytes in all)',
    when: 'Server: headers over the size Node.js accepts',
    http: true,
  },
  chunk_extensions_too_large: {
    status: 413,
    message: 'Chunk extensions of the request body are larger than the server accepts',
    when: 'Server: chunked-encoding extensions over the size Node.js accepts',
    http: true,
  },
  expectation_failed: {
    status: 417,
    message: 'Expectation failed: only "Expect: 100-continue" is supported, got {expect}',
    when: 'Server: an `Expect` header other than `100-continue`',
    http: true,
  },
  upstream_unavailable: {
    status: 502,
    message: 'The real service could not be reached: {reason}',
    when: 'Proxy mode (`serve --proxy`): the upstream refused the connection, closed it without an answer, or answered more than the sandbox accepts',
    proxy: true,
  },
  upstream_timeout: {
    status: 504,
    message: 'The real service did not answer within {timeoutMs} ms',
    when: 'Proxy mode (`serve --proxy`): the upstream took longer than the request timeout allows',
    proxy: true,
  },
} as const satisfies Record<string, ErrorSpec>

/** A stable, machine-readable error code. */
export type ErrorCode = keyof typeof ERROR_TABLE

export type ErrorParams = Readonly<Record<string, string | number>>

/**
 * Builds the Error body for `code`, filling its message template from `params`; a `note` is
 * appended in parentheses (how the error came about, e.g. forced by a `Prefer` header).
 */
export function apiError(code: ErrorCode, params: ErrorParams = {}, note?: string): ApiError {
  const spec = ERROR_TABLE[code]
  const filled = spec.message.replace(/\{(\w+)\}/g, (placeholder, name: string) =>
    Object.hasOwn(params, name) ? String(params[name]) : placeholder,
  )
  return { code, message: note === undefined ? filled : `${filled} (${note})`, status: spec.status }
}

/** Whether only the admin API answers this code. */
export function isAdminCode(code: ErrorCode): boolean {
  const spec: ErrorSpec = ERROR_TABLE[code]
  return spec.admin === true
}

/** Whether the server answers this code to a request HTTP itself refuses, before any route. */
export function isHttpCode(code: ErrorCode): boolean {
  const spec: ErrorSpec = ERROR_TABLE[code]
  return spec.http === true
}

/** Whether only the server in proxy mode answers this code (the real service could not be reached). */
export function isProxyCode(code: ErrorCode): boolean {
  const spec: ErrorSpec = ERROR_TABLE[code]
  return spec.proxy === true
}

/** The codes a client of the API can see (the admin API's left out). */
export const API_ERROR_CODES: readonly ErrorCode[] = (Object.keys(ERROR_TABLE) as ErrorCode[]).filter(
  (code) => !isAdminCode(code),
)

/**
 * The first code of the table with this status that an operation answers: what
 * `Prefer: code=<status>` answers, which is why the table lists the most general code of each
 * status first.
 */
export function codeForStatus(status: number): ErrorCode | undefined {
  return codesForStatus(status)[0]
}

/**
 * Every code of the table with this status that an operation answers, the most general first:
 * the codes a planned answer may name for it (`{ "status": 401, "code": "missing_api_key" }`).
 */
export function codesForStatus(status: number): ErrorCode[] {
  return API_ERROR_CODES.filter((code) => ERROR_TABLE[code].status === status && !isHttpCode(code) && !isProxyCode(code))
}
