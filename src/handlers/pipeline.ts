/**
 * The request pipeline every runtime shares: authenticate, read the body, honour `Prefer`,
 * simulate latency and faults, run the operation, answer, journal. Order matters and is the
 * interface's: 401 comes before any validation.
 */
import { apiError, codeForStatus, type ErrorCode, type ErrorParams } from '../contract/errors.js'
import { readBearer } from '../core/auth.js'
import { journalBody, journalHeaders, journalWeight, type RequestJournal } from '../core/journal.js'
import { readText } from '../core/request-body.js'
import type { Tenant } from '../core/tenant.js'
import type { Operation, Outcome } from './operation.js'
import { readPrefer } from './prefer.js'

/** Finds the tenant an API key belongs to. */
export interface TenantResolver {
  /** The tenant for an accepted key; undefined when the key is not accepted. */
  resolve(token: string): Tenant | undefined
  /** Where requests without an accepted key are journaled (the library's single tenant), if anywhere. */
  readonly anonymousJournal?: RequestJournal | undefined
  /** Settles when keys and tenants can be judged (a scenario file may still be loading). */
  ready?(): Promise<void>
}

export interface PipelineOptions {
  readonly tenants: TenantResolver
  readonly strict: boolean
  readonly maxBodyBytes: number
}

type Params = Readonly<Record<string, string | readonly string[] | undefined>>

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export class Pipeline {
  readonly #options: PipelineOptions

  constructor(options: PipelineOptions) {
    this.#options = options
  }

  /** Answers a request routed to `operation`. Never throws: a bug answers a 500 Error body. */
  async operation(operation: Operation, request: Request, params: Params): Promise<Response> {
    const started = performance.now()
    let tenant: Tenant | undefined
    let bodyText = ''
    let outcome: Outcome | undefined
    let headers: Record<string, string> | undefined
    try {
      await this.#options.tenants.ready?.()
      const auth = readBearer(request.headers.get('authorization'))
      tenant = auth.ok ? this.#options.tenants.resolve(auth.token) : undefined
      if (operation.hasBody) {
        const raw = await readText(request, this.#options.maxBodyBytes)
        bodyText = raw.ok ? raw.text : ''
        if (!raw.ok && tenant) outcome = { kind: 'error', code: raw.code, params: raw.params }
      }
      if (!auth.ok) {
        outcome = auth.code === 'invalid_api_key' ? errorOutcome(auth.code, { reason: auth.reason }) : errorOutcome(auth.code)
      } else if (!tenant) {
        outcome = errorOutcome('invalid_api_key', { reason: 'the key is not accepted by this sandbox' })
      } else {
        headers = operation.headers?.(tenant)
        outcome ??= await this.#run(operation, request, params, tenant, bodyText)
      }
    } catch (error) {
      outcome = errorOutcome('internal_error', { reason: error instanceof Error ? error.message : String(error) })
    }
    return this.#answer(request, operation.id, outcome, started, tenant, bodyText, headers)
  }

  /** Answers a path under the base URL that exists, with a method it does not support. */
  notAllowed(request: Request, allowed: readonly Operation[]): Response {
    const allow = allowed.map((operation) => operation.method).join(', ')
    const path = new URL(request.url).pathname
    return this.#answer(
      request,
      null,
      errorOutcome('method_not_allowed', { method: request.method, path, allow }),
      performance.now(),
      undefined,
      undefined,
      { allow },
    )
  }

  /** Answers a path under the base URL that the interface does not have. */
  notFound(request: Request): Response {
    const path = new URL(request.url).pathname
    return this.#answer(request, null, errorOutcome('not_found', { what: `Path ${path}` }), performance.now())
  }

  async #run(operation: Operation, request: Request, params: Params, tenant: Tenant, bodyText: string): Promise<Outcome> {
    const prefer = readPrefer(request.headers.get('prefer'), operation.successStatus)
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
    request: Request,
    operation: string | null,
    outcome: Outcome,
    started: number,
    tenant?: Tenant,
    bodyText?: string,
    extraHeaders?: Record<string, string>,
  ): Response {
    let response: Response
    let responseText: string | undefined
    let responseBody: unknown
    if (outcome.kind === 'network') {
      response = Response.error()
    } else {
      const status = outcome.kind === 'json' ? outcome.status : apiError(outcome.code).status
      responseBody = outcome.kind === 'json' ? outcome.body : apiError(outcome.code, outcome.params, outcome.note)
      responseText = JSON.stringify(responseBody)
      const headers = new Headers(extraHeaders)
      headers.set('content-type', 'application/json')
      new Headers(outcome.headers).forEach((value, name) => headers.set(name, value))
      if (status === 401) {
        headers.set(
          'www-authenticate',
          outcome.kind === 'error' && outcome.code === 'invalid_api_key' ? 'Bearer error="invalid_token"' : 'Bearer',
        )
      }
      response = new Response(responseText, { status, headers })
    }
    const journal = tenant?.journal ?? this.#options.tenants.anonymousJournal
    if (journal) {
      const url = new URL(request.url)
      journal.record({
        time: new Date().toISOString(),
        durationMs: Math.round((performance.now() - started) * 100) / 100,
        operation,
        method: request.method,
        url: request.url,
        path: url.pathname,
        request: { headers: journalHeaders(request.headers), ...journalBody(bodyText) },
        response: { status: response.status, ...journalBody(responseText, responseBody) },
      }, journalWeight(bodyText) + journalWeight(responseText))
    }
    return response
  }
}

function errorOutcome(code: ErrorCode, params?: ErrorParams): Outcome {
  return params ? { kind: 'error', code, params } : { kind: 'error', code }
}

/** The outcome `Prefer: code=<status>` asks for: that status's first error code, state untouched. */
function forcedOutcome(status: number, request: Request, operation: Operation, tenant: Tenant, limit: number): Outcome {
  const code = codeForStatus(status) ?? 'internal_error'
  const path = new URL(request.url).pathname
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
