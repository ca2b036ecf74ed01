/**
 * The request pipeline every runtime shares: authenticate, read the body, honour `Prefer`,
 * simulate latency and faults, run the operation, answer, journal. Order matters and is the
 * interface's: 401 comes before any validation.
 */
import { apiError, codeForStatus, type ErrorCode, type ErrorParams } from '../contract/errors.js'
import { readBearer } from '../core/auth.js'
import { journalBody, journalHeaders, journalWeight, type TenantJournal } from '../core/journal.js'
import { StorageUnavailableError } from '../core/storage.js'
import { TenantRefusedError, type Tenant } from '../core/tenant.js'
import type { ApiAnswer, ApiRequest } from './api-request.js'
import type { Operation, Outcome } from './operation.js'
import { readPrefer } from './prefer.js'
import { route } from './router.js'

/** Finds the tenant an API key belongs to. */
export interface TenantResolver {
  /**
   * The tenant for an accepted key; undefined when the key is not accepted. May reject with
   * {@link TenantRefusedError} (no room for a new tenant) or {@link StorageUnavailableError}.
   */
  resolve(token: string): Tenant | undefined | Promise<Tenant | undefined>
  /** Where requests without an accepted key are journaled (the library's single tenant), if anywhere. */
  readonly anonymousJournal?: TenantJournal | undefined
  /** Settles when keys and tenants can be judged (a scenario file may still be loading). */
  ready?(): Promise<void>
}

export interface PipelineOptions {
  readonly tenants: TenantResolver
  readonly strict: boolean
  readonly maxBodyBytes: number
}

type Params = Readonly<Record<string, string>>

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export class Pipeline {
  readonly #options: PipelineOptions

  constructor(options: PipelineOptions) {
    this.#options = options
  }

  /**
   * Answers a request whose path under the base URL is `path` (`/categories`, not yet decoded).
   * Never throws: a bug answers a 500 Error body.
   */
  handle(request: ApiRequest, path: string): Promise<ApiAnswer> | ApiAnswer {
    const found = route(request.method, path)
    switch (found.kind) {
      case 'operation':
        return this.#operation(found.operation, request, found.params)
      case 'not_allowed': {
        const allow = found.allowed.map((operation) => operation.method).join(', ')
        const outcome = errorOutcome('method_not_allowed', { method: request.method, path: request.path, allow })
        return this.#answer(request, null, outcome, performance.now(), Date.now(), undefined, undefined, { allow })
      }
      case 'not_found':
        return this.#answer(request, null, errorOutcome('not_found', { what: `Path ${request.path}` }), performance.now(), Date.now())
    }
  }

  async #operation(operation: Operation, request: ApiRequest, params: Params): Promise<ApiAnswer> {
    const started = performance.now()
    const arrived = Date.now()
    let tenant: Tenant | undefined
    let bodyText = ''
    let outcome: Outcome | undefined
    let headers: Record<string, string> | undefined
    try {
      await this.#options.tenants.ready?.()
      const auth = readBearer(request.headers.get('authorization'))
      let refused: { error: unknown } | undefined
      try {
        tenant = auth.ok ? await this.#options.tenants.resolve(auth.token) : undefined
      } catch (error) {
        refused = { error }
      }
      // @note The body is read even when the tenant is refused, so the answer never races a
      // client still sending (which it would see as a reset connection, not our Error body).
      if (operation.hasBody) {
        const raw = await request.readBody(this.#options.maxBodyBytes)
        bodyText = raw.ok ? raw.text : ''
        if (!raw.ok && tenant) outcome = { kind: 'error', code: raw.code, params: raw.params }
      }
      if (refused) throw refused.error
      if (!auth.ok) {
        outcome = auth.code === 'invalid_api_key' ? errorOutcome(auth.code, { reason: auth.reason }) : errorOutcome(auth.code)
      } else if (!tenant) {
        outcome = errorOutcome('invalid_api_key', { reason: 'the key is not accepted by this sandbox' })
      } else {
        headers = operation.headers?.(tenant)
        outcome ??= await this.#run(operation, request, params, tenant, bodyText)
      }
    } catch (error) {
      const failure = failureOf(error)
      outcome = failure.outcome
      headers = { ...headers, ...failure.headers }
    }
    return this.#answer(request, operation.id, outcome, started, arrived, tenant, bodyText, headers)
  }

  async #run(operation: Operation, request: ApiRequest, params: Params, tenant: Tenant, bodyText: string): Promise<Outcome> {
    const prefer = readPrefer(request.headers.get('prefer'), operation)
    if (!prefer.ok) return errorOutcome('invalid_prefer', { reason: prefer.reason })
    const delay = prefer.value.delay ?? tenant.faults.latency()
    if (delay > 0) await sleep(delay)
    const forced = prefer.value.code
    if (forced !== undefined && forced !== operation.successStatus) {
      return forcedOutcome(forced, request, operation, tenant, this.#options.maxBodyBytes)
    }
    if (forced === undefined) {
      const fault = tenant.faults.fault()
      if (fault === 'network') return { kind: 'network' }
      if (fault) {
        const reason = 'simulated failure (the scenario sets a fault rate)'
        return errorOutcome(fault === '500' ? 'internal_error' : 'service_unavailable', { reason })
      }
    }
    await tenant.ready
    return operation.run({ request, params, tenant, bodyText, strict: this.#options.strict })
  }

  #answer(
    request: ApiRequest,
    operation: string | null,
    outcome: Outcome,
    started: number,
    arrived: number,
    tenant?: Tenant,
    bodyText?: string,
    extraHeaders?: Record<string, string>,
  ): ApiAnswer | Promise<ApiAnswer> {
    let answer: ApiAnswer
    let responseBody: unknown
    if (outcome.kind === 'network') {
      answer = NETWORK_ERROR
    } else {
      const status = outcome.kind === 'json' ? outcome.status : apiError(outcome.code).status
      responseBody = outcome.kind === 'json' ? outcome.body : apiError(outcome.code, outcome.params, outcome.note)
      const headers: Record<string, string> = { ...extraHeaders, 'content-type': 'application/json' }
      if (status === 401) {
        headers['www-authenticate'] =
          outcome.kind === 'error' && outcome.code === 'invalid_api_key' ? 'Bearer error="invalid_token"' : 'Bearer'
      }
      answer = { kind: 'http', status, headers, body: JSON.stringify(responseBody) }
    }
    const journal = tenant?.journal ?? this.#options.tenants.anonymousJournal
    if (journal) {
      const responseText = answer.kind === 'http' ? answer.body : undefined
      const stored = journal.record({
        time: new Date(arrived).toISOString(),
        durationMs: Math.round((performance.now() - started) * 100) / 100,
        operation,
        method: request.method,
        url: request.url,
        path: request.path,
        request: { headers: journalHeaders(request.headers), ...journalBody(bodyText) },
        // @note A dropped connection (a network fault) is journaled with status 0, as `Response.error()` has.
        response: { status: answer.kind === 'http' ? answer.status : 0, ...journalBody(responseText, responseBody) },
      }, journalWeight(bodyText) + journalWeight(responseText))
      // @note A journal in a shared store (Redis) is written before the answer leaves, so that any
      // replica lists the request once its client has the answer; a failed journal write costs
      // the entry, never the answer.
      if (stored) return stored.then(() => answer, () => answer)
    }
    return answer
  }
}

const NETWORK_ERROR: ApiAnswer = { kind: 'network' }

/** How long a client is told to wait after a storage failure. */
const STORAGE_RETRY_SECONDS = 5

/**
 * What a thrown error answers: a refused tenant or a storage failure its own 503 (the storage's
 * message, which may name paths, stays out of the body), anything else a 500.
 */
export function failureOf(error: unknown): { outcome: Outcome; headers?: Record<string, string> } {
  if (error instanceof TenantRefusedError) {
    return { outcome: errorOutcome(error.code, error.params), headers: { 'retry-after': String(error.retryAfterSeconds) } }
  }
  if (error instanceof StorageUnavailableError) {
    return { outcome: errorOutcome('storage_unavailable'), headers: { 'retry-after': String(STORAGE_RETRY_SECONDS) } }
  }
  return { outcome: errorOutcome('internal_error', { reason: error instanceof Error ? error.message : String(error) }) }
}

function errorOutcome(code: ErrorCode, params?: ErrorParams): Outcome {
  return params ? { kind: 'error', code, params } : { kind: 'error', code }
}

/** The outcome `Prefer: code=<status>` asks for: that status's first error code, state untouched. */
function forcedOutcome(status: number, request: ApiRequest, operation: Operation, tenant: Tenant, limit: number): Outcome {
  const code = codeForStatus(status) ?? 'internal_error'
  const path = request.path
  return {
    kind: 'error',
    code,
    note: `forced by "Prefer: code=${status}"`,
    params: {
      reason: 'simulated',
      what: `Resource ${path}`,
      field: 'name',
      contentType: request.headers.get('content-type') ?? 'no Content-Type',
      limit,
      method: request.method,
      path,
      allow: operation.method,
      operation: `${operation.method} ${operation.path}`,
      sunset: tenant.sunset ?? 'an earlier date',
    },
  }
}
