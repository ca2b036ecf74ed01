/**
 * The request pipeline every runtime shares: authenticate, read the body, take a planned answer
 * or honour `Prefer`, simulate latency and faults, run the operation, answer, journal. Order
 * matters and is the interface's: 401 comes before any validation.
 */
import { apiError, codeForStatus, STORAGE_UNAVAILABLE_UNTIL, WRITE_OUTCOME_UNKNOWN_WHY, type ErrorCode } from '../contract/errors.js'
import { authError, NOT_ACCEPTED, readBearer, wwwAuthenticate } from '../core/auth.js'
import { OverCapacityError, type Work } from '../core/capacity.js'
import { PetstoreError } from '../core/petstore-error.js'
import { JOURNAL_BODY_LIMIT, JournalDraft, type TenantJournal } from '../core/journal.js'
import type { Redaction } from '../core/redaction.js'
import { DEFAULT_CATEGORY_LIMITS, type CategoryLimits } from '../contract/limits.js'
import type { PlannedAnswer } from '../core/planned-answers.js'
import { StorageUnavailableError, WriteOutcomeUnknownError } from '../storage/storage.js'
import { TenantRefusedError, type Tenant } from '../storage/tenant.js'
import type { AnswerPieces, ApiAnswer, ApiRequest } from './api-request.js'
import { failure, type Operation, type Outcome } from './operation.js'
import { DEFAULT_MAX_DELAY_MS, readPrefer } from './prefer.js'
import { route } from './router.js'
import { exchangeViolations } from '../contract/conformance.js'
import { UpstreamError, VIOLATIONS_HEADER, violationsHeader, type ProxyTarget } from './proxy.js'
import { bodyReservation } from './request-body.js'

/** Finds the tenant an API key belongs to. */
export interface TenantResolver {
  /**
   * The tenant for an accepted key; undefined when the key is not accepted. May reject with
   * {@link TenantRefusedError} (no room for a new tenant) or {@link StorageUnavailableError}.
   * The tenant comes {@link Tenant.enter | entered} (in use from the moment the request is routed
   * to it, so it is not dropped to make room): the caller calls `leave()` once its answer is out.
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
  /** Name and description lengths. @default DEFAULT_CATEGORY_LIMITS */
  readonly limits?: CategoryLimits | undefined
  /** The longest delay (`Prefer: delay`, latency) before an answer, in ms. @default 60000 */
  readonly maxDelayMs?: number | undefined
  /** Throws {@link OverCapacityError} when the runtime has no room for this work. @default always room */
  readonly admit?: ((work: Work) => void) | undefined
  /**
   * Counts bytes a read for `tenant` is about to take (a list made per request) against the
   * runtime's memory budget until the function returned is called; throws
   * {@link OverCapacityError} when there is no room. @default not counted
   */
  readonly reserve?: ((bytes: number, tenant: Tenant | undefined) => () => void) | undefined
  /**
   * Whether the runtime sends an answer given in pieces as it is made (`ApiAnswer.pieces`): a
   * store that reads its list in pages (SQLite) then answers a list that way, holding one page
   * rather than the whole list. @default false: every answer is made whole
   */
  readonly streams?: boolean | undefined
  /** Whether journals may grow (false over the memory budget: they keep their size). @default always */
  readonly mayGrow?: (() => boolean) | undefined
  /** What journal entries never show of a request's headers and URL. @default the default rule */
  readonly redaction?: Redaction | undefined
  /**
   * Told about an exception a request ran into. The client's 500 never carries its message
   * (it may name a file path). @default none
   */
  readonly onUnexpectedError?: ((error: unknown, request: ApiRequest) => void) | undefined
  /**
   * Proxy mode: every request under the base path is passed on to the real service and its answer
   * checked against the contract (`conformance.ts`), instead of being answered from the tenant's
   * data. Keys are the service's to judge; the tenant is the key's, for its journal. @default none
   */
  readonly proxy?: { readonly target: ProxyTarget; readonly timeoutMs: number } | undefined
}

type Params = Readonly<Record<string, string>>


/** Seconds a request cut from its delay to make room for another tenant is told to wait. */
const CUT_RETRY_SECONDS = 1

/**
 * Waits out a request's delay (`Prefer: delay`, latency, a planned answer's `delayMs`), or until the runtime (`request.waiting`) or its tenant
 * ({@link Tenant.cutDelays}) cuts it: then rejects with an {@link OverCapacityError}, before
 * anything of the request has run (`after`: what the reason adds, a planned answer used).
 */
function delayed(ms: number, request: ApiRequest, tenant: Tenant, after = ''): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    let over: (() => void) | undefined
    const done = () => {
      clearTimeout(timer)
      tenant.delays.delete(cut)
      over?.()
    }
    const timer = setTimeout(() => {
      done()
      resolve()
    }, ms)
    const cut = (reason: string) => {
      done()
      reject(new OverCapacityError(`${reason}${after}`, CUT_RETRY_SECONDS))
    }
    tenant.delays.add(cut)
    over = request.waiting?.(cut)
  })
}

export class Pipeline {
  readonly #options: PipelineOptions

  constructor(options: PipelineOptions) {
    this.#options = options
  }

  /**
   * Answers a request whose path under the base URL is `path` (`/categories`, not yet decoded).
   * Never throws: a bug answers a 500 Error body.
   */
  handle(request: ApiRequest, path: string): Promise<ApiAnswer> {
    const found = route(request.method, path)
    if (this.#options.proxy !== undefined) return this.#proxied(this.#options.proxy, request, path, found.kind === 'operation' ? found.operation : undefined)
    if (found.kind === 'operation') return this.#operation(found.operation, request, found.params)
    return this.#unrouted(request, found.kind === 'not_allowed' ? found.allow : undefined)
  }

  /** A 404, or a 405 when `allow` lists the path's methods: journaled for the caller's tenant, which is where an integrator looks for a wrong path. */
  async #unrouted(request: ApiRequest, allow: string | undefined): Promise<ApiAnswer> {
    const started = performance.now()
    const arrived = Date.now()
    const outcome =
      allow === undefined
        ? failure('not_found', { what: `Path ${request.path}` })
        : failure('method_not_allowed', { method: request.method, path: request.path, allow })
    let tenant: Tenant | undefined
    try {
      tenant = await this.#tenantOf(request)
    } catch {
      // The answer is the 404 or 405 all the same; only its journal entry is lost.
    }
    return this.#leaving(tenant, this.#answer({ request, operation: null, outcome, started, arrived, tenant, headers: allow === undefined ? undefined : { allow } }))
  }

  /** The answer, once its tenant's use ends: the tenant is left when the answer is ready to be written. */
  #leaving(tenant: Tenant | undefined, answer: ApiAnswer | Promise<ApiAnswer>): ApiAnswer | Promise<ApiAnswer> {
    if (tenant === undefined) return answer
    if (!(answer instanceof Promise)) {
      tenant.leave()
      return answer
    }
    return answer.finally(() => tenant.leave())
  }

  /** The tenant of the request's bearer key, or undefined when it has no accepted key. */
  async #tenantOf(request: ApiRequest): Promise<Tenant | undefined> {
    await this.#options.tenants.ready?.()
    const auth = readBearer(request.headers.get('authorization'))
    return auth.ok ? this.#options.tenants.resolve(auth.token) : undefined
  }

  async #operation(operation: Operation, request: ApiRequest, params: Params): Promise<ApiAnswer> {
    const started = performance.now()
    const arrived = Date.now()
    let tenant: Tenant | undefined
    let bodyText = ''
    let outcome: Outcome | undefined
    let headers: Record<string, string> | undefined
    let releaseBody: (() => void) | undefined
    try {
      // @note Only what may be pending is awaited: every await of a plain value costs a turn of
      // the microtask queue and an allocation, on every request.
      const tenantsReady = this.#options.tenants.ready?.()
      if (tenantsReady !== undefined) await tenantsReady
      const auth = readBearer(request.headers.get('authorization'))
      let refused: { error: unknown } | undefined
      try {
        const found = auth.ok ? this.#options.tenants.resolve(auth.token) : undefined
        // @note In use from here (the resolver entered it) until its answer is out: it is not dropped
        // to make room meanwhile (a delay, a slow body, a slow store), so no write it acknowledges is lost.
        tenant = found instanceof Promise ? await found : found
      } catch (error) {
        refused = { error }
      }
      // @note The body is read even when the tenant is refused, so the answer never races a
      // client still sending (which it would see as a reset connection, not our Error body).
      // @note Without a tenant (and no journal for requests without one) it is read and dropped,
      // never held: 1,000 keyless 1 MiB bodies arriving slowly held 1.1 GB until the request
      // timeout, outside every budget (attack16 B1).
      if (operation.body !== undefined) {
        const kept = tenant !== undefined || (refused === undefined && this.#options.tenants.anonymousJournal !== undefined)
        let limit = kept ? this.#options.maxBodyBytes : 0
        if (tenant !== undefined) {
          try {
            releaseBody = this.#reserveBody(request, tenant)
          } catch (error) {
            // Refused before it is read: read and dropped as it arrives, then answered 503.
            refused = { error }
            limit = 0
          }
        }
        const raw = await request.readBody(limit, tenant)
        bodyText = raw.ok ? raw.text : ''
        // @note A client gone before its body ended gets no answer, and is journaled so (status 0, as the log has it).
        if (!raw.ok && tenant) outcome = raw.gone ? { kind: 'network' } : failure(raw.code, raw.params)
      }
      if (refused) throw refused.error
      if (!auth.ok || !tenant) {
        const { code, params } = authError(auth.ok ? NOT_ACCEPTED : auth)
        outcome = failure(code, params)
      } else {
        headers = operation.headers?.(tenant)
        if (!outcome) {
          this.#options.admit?.(operation.body !== undefined ? 'grow' : 'read')
          // @note A planned answer comes before `Prefer` and faults: the test asked for this request's answer.
          const taken = tenant.answers.take(operation.id)
          const planned = taken instanceof Promise ? await taken : taken
          const ran = planned ? this.#planned(planned, operation, request, params, tenant, bodyText, started) : this.#run(operation, request, params, tenant, bodyText, started)
          outcome = ran instanceof Promise ? await ran : ran
        }
      }
    } catch (error) {
      const failed = failureOf(error)
      // @note Never the exception's message in the answer: it may name a file path or other server detail.
      if (failed.unexpected) this.#options.onUnexpectedError?.(error, request)
      outcome = failed.outcome
      headers = { ...headers, ...failed.headers }
    }
    return this.#released(releaseBody, () => this.#answered({ request, operation: operation.id, outcome, started, arrived, tenant, bodyText, headers }))
  }

  /**
   * Reserves the room a request body of `tenant` takes while it is held, until answered (twice
   * its bytes, by its Content-Length, else the largest body allowed: the bytes, then their text)
   * against the runtime's memory budget, as a list read is (see {@link PipelineOptions.reserve});
   * throws its `OverCapacityError` when there is no room. Returns what lets it go, if anything.
   * @note Bodies with an accepted key (any token under `--any-key`) were held whole until
   * answered, outside every budget: the connection cap times 1 MiB (attack16 B1).
   */
  #reserveBody(request: ApiRequest, tenant: Tenant | undefined): (() => void) | undefined {
    const reserve = this.#options.reserve
    if (reserve === undefined) return undefined
    return reserve(bodyReservation(request.headers.get('content-length'), this.#options.maxBodyBytes), tenant)
  }

  /** `answer()`, with `release` (a body's reservation) called once it is made, or has failed. */
  #released(release: (() => void) | undefined, answer: () => ApiAnswer | Promise<ApiAnswer>): ApiAnswer | Promise<ApiAnswer> {
    if (release === undefined) return answer()
    let made: ApiAnswer | Promise<ApiAnswer>
    try {
      made = answer()
    } catch (error) {
      release()
      throw error
    }
    if (made instanceof Promise) return made.finally(release)
    release()
    return made
  }

  /** The answer made and journaled, its tenant left once it is ready (or at once should making it throw). */
  #answered(parts: AnswerParts): ApiAnswer | Promise<ApiAnswer> {
    let answer: ApiAnswer | Promise<ApiAnswer>
    try {
      answer = this.#answer(parts)
    } catch (error) {
      parts.tenant?.leave()
      throw error
    }
    return this.#leaving(parts.tenant, answer)
  }

  /**
   * Proxy mode: the request passed on to the real service as the client sent it, the answer
   * passed back as the service gave it, and where the exchange departs from the contract named
   * in the {@link VIOLATIONS_HEADER} header and the tenant's journal. The service judges keys: a
   * request without a key, or with one it refuses, is passed on too (its 401 is checked).
   */
  async #proxied(proxy: NonNullable<PipelineOptions['proxy']>, request: ApiRequest, path: string, operation: Operation | undefined): Promise<ApiAnswer> {
    const started = performance.now()
    const arrived = Date.now()
    let tenant: Tenant | undefined
    let bodyText = ''
    let outcome: Outcome | undefined
    let headers: Record<string, string> | undefined
    let passed: { bytes: Uint8Array; text: string; violations: string[] } | undefined
    let releaseBody: (() => void) | undefined
    const held = new HeldAnswer(this.#options.reserve)
    try {
      let refused: { error: unknown } | undefined
      try {
        tenant = await this.#tenantOf(request)
      } catch (error) {
        refused = { error }
      }
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        // @note Passed on whatever its key (the service judges keys), so held and counted whatever
        // its key: 600 keyless 1 MiB bodies took a sandbox capped at 1.4 GB down (attack21 B2).
        let limit = this.#options.maxBodyBytes
        try {
          releaseBody = this.#reserveBody(request, tenant)
        } catch (error) {
          refused ??= { error }
          limit = 0
        }
        const raw = await request.readBody(limit, tenant)
        bodyText = raw.ok ? raw.text : ''
        if (!raw.ok) outcome = raw.gone ? { kind: 'network' } : failure(raw.code, raw.params)
      }
      if (refused) throw refused.error
      if (!outcome) {
        const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : ''
        const timeLeft = proxy.timeoutMs - (performance.now() - started)
        const answer = await proxy.target.send(request.method, `${path}${query}`, bodyText, request.headers, timeLeft, (bytes) => held.hold(bytes, tenant))
        const bytes = request.method === 'HEAD' ? EMPTY : answer.body
        // @note A body the service encoded (gzip, though it was not asked to) is passed on as it
        // is, and cannot be checked: only its status and headers are.
        const encoded = (answer.headers['content-encoding'] ?? 'identity').toLowerCase() !== 'identity'
        const text = encoded ? undefined : UTF8.decode(bytes)
        const violations = exchangeViolations({
          operation: operation?.id ?? null,
          request: { contentType: request.headers.get('content-type'), text: bodyText },
          response: { status: answer.status, contentType: answer.contentType, text, wwwAuthenticate: answer.headers['www-authenticate'] ?? null },
        })
        headers = violations.length > 0 ? { ...answer.headers, [VIOLATIONS_HEADER]: violationsHeader(violations) } : { ...answer.headers }
        passed = { bytes, text: text ?? `[${bytes.length} bytes, Content-Encoding: ${answer.headers['content-encoding']}]`, violations }
        outcome = { kind: 'json', status: answer.status, body: undefined, release: held.release }
      }
    } catch (error) {
      held.release()
      if (error instanceof UpstreamError) {
        outcome =
          error.kind === 'timeout'
            ? failure('upstream_timeout', { timeoutMs: proxy.timeoutMs })
            : failure('upstream_unavailable', { reason: error.message })
      } else {
        const failed = failureOf(error)
        if (failed.unexpected) this.#options.onUnexpectedError?.(error, request)
        outcome = failed.outcome
        headers = { ...headers, ...failed.headers }
      }
    }
    return this.#released(releaseBody, () => this.#answered({ request, operation: operation?.id ?? null, outcome, started, arrived, tenant, bodyText, headers, passed }))
  }

  /** `started`: `performance.now()` when the request arrived, which its delay counts from. */
  #run(operation: Operation, request: ApiRequest, params: Params, tenant: Tenant, bodyText: string, started: number): Outcome | Promise<Outcome> {
    const maxDelay = this.#options.maxDelayMs ?? DEFAULT_MAX_DELAY_MS
    const prefer = readPrefer(request.headers.get('prefer'), operation, maxDelay)
    if (!prefer.ok) return failure('invalid_prefer', { reason: prefer.reason })
    const delay = delayLeft(Math.min(prefer.value.delay ?? tenant.faults.latency(), maxDelay), started)
    const forced = prefer.value.code
    if (delay > 0) return delayed(delay, request, tenant).then(() => this.#perform(operation, request, params, tenant, bodyText, forced))
    return this.#perform(operation, request, params, tenant, bodyText, forced)
  }

  /** A planned answer: after its delay, the connection dropped, its status's Error body, or the operation run as usual (no `Prefer`, latency or fault). */
  #planned(planned: PlannedAnswer, operation: Operation, request: ApiRequest, params: Params, tenant: Tenant, bodyText: string, started: number): Outcome | Promise<Outcome> {
    const answer = (): Outcome | Promise<Outcome> => {
      if (planned.network) return { kind: 'network' }
      if (planned.code !== undefined) return simulatedError(planned.code, 'planned answer', request, operation, tenant, this.#options.maxBodyBytes)
      return this.#operate(operation, request, params, tenant, bodyText)
    }
    const delay = delayLeft(planned.delayMs ?? 0, started)
    // @note Cut as any delay (attack9 C2): never cut, two keys' planned delays filled the hard cap
    // and every partner was refused at connect. The plan is taken already: the answer says it was used.
    return delay > 0 ? delayed(delay, request, tenant, '; its planned answer was used').then(answer) : answer()
  }

  /** After the delay: a forced or simulated failure, or the operation once the tenant's scenario is in. */
  #perform(operation: Operation, request: ApiRequest, params: Params, tenant: Tenant, bodyText: string, forced: number | undefined): Outcome | Promise<Outcome> {
    if (forced !== undefined && forced !== operation.success.status) {
      return forcedOutcome(forced, request, operation, tenant, this.#options.maxBodyBytes)
    }
    if (forced === undefined) {
      const fault = tenant.faults.fault()
      if (fault === 'network') return { kind: 'network' }
      if (fault) {
        const reason = 'simulated failure (the scenario sets a fault rate)'
        return failure(fault === '500' ? 'internal_error' : 'service_unavailable', { reason })
      }
    }
    return this.#operate(operation, request, params, tenant, bodyText)
  }

  /** The operation itself, once the tenant's scenario is in. */
  #operate(operation: Operation, request: ApiRequest, params: Params, tenant: Tenant, bodyText: string): Outcome | Promise<Outcome> {
    const reserve = this.#options.reserve
    const context = {
      request,
      params,
      tenant,
      bodyText,
      strict: this.#options.strict,
      limits: this.#options.limits ?? DEFAULT_CATEGORY_LIMITS,
      reserve: reserve && ((bytes: number) => reserve(bytes, tenant)),
      streams: this.#options.streams,
    }
    return tenant.settled ? operation.run(context) : tenant.ready.then(() => operation.run(context))
  }

  #answer({ request, operation, outcome, started, arrived, tenant, bodyText, headers: extraHeaders, passed }: AnswerParts): ApiAnswer | Promise<ApiAnswer> {
    let answer: ApiAnswer
    if (passed !== undefined && outcome.kind === 'json') {
      // The real service's answer, as it gave it: its status, headers and body (the bytes, whatever they are).
      answer = { kind: 'http', status: outcome.status, headers: extraHeaders ?? {}, body: passed.text, bytes: passed.bytes, release: outcome.release, tenant }
    } else if (outcome.kind === 'network') {
      answer = tenant ? { kind: 'network', tenant } : NETWORK_ERROR
    } else {
      const status = outcome.kind === 'json' ? outcome.status : apiError(outcome.code).status
      const body =
        outcome.kind === 'json'
          ? outcome.pieces === undefined
            ? (outcome.text ?? JSON.stringify(outcome.body))
            : ''
          : JSON.stringify(apiError(outcome.code, outcome.params, outcome.note))
      let headers: Record<string, string> = JSON_HEADERS
      if (extraHeaders !== undefined || status === 401) {
        headers = { ...extraHeaders, 'content-type': 'application/json' }
        if (status === 401) headers['www-authenticate'] = wwwAuthenticate(outcome.kind === 'error' ? outcome.code : '')
      }
      const kept = outcome.kind === 'json' ? outcome : undefined
      answer = { kind: 'http', status, headers, body, shared: kept?.text !== undefined, release: kept?.release, tenant, pieces: kept?.pieces }
    }
    const journal = tenant?.journal ?? this.#options.tenants.anonymousJournal
    if (!journal) return answer
    const durationMs = Math.round((performance.now() - started) * 100) / 100
    const record = (responseText: string | undefined, responseSize?: number) =>
      journal.record(
        new JournalDraft({
          arrived,
          durationMs,
          operation,
          requestId: request.id,
          method: request.method,
          url: request.url,
          path: request.path,
          headers: request.headers,
          requestText: bodyText ?? '',
          // @note A dropped connection (a network fault) is journaled with status 0, as `Response.error()` has.
          status: answer.kind === 'http' ? answer.status : 0,
          responseText,
          responseSize,
          redaction: this.#options.redaction,
          violations: passed?.violations,
        }),
        { grow: this.#options.mayGrow?.() ?? true },
      )
    // @note An answer sent in pieces is journaled once its last piece is given (or it is broken
    // off: then with what was given), with its start and its whole length.
    if (answer.kind === 'http' && answer.pieces !== undefined) {
      return { ...answer, pieces: journaledPieces(answer.pieces, (start, size) => void record(start, size)?.catch(() => undefined)) }
    }
    // @note A HEAD answer's body is never sent, so the journal keeps none either.
    const stored = record(answer.kind === 'http' && request.method !== 'HEAD' ? answer.body : undefined)
    // @note A journal in a shared store (Redis) is written before the answer leaves, so that any
    // replica lists the request once its client has the answer; a failed journal write costs
    // the entry, never the answer.
    if (stored) return stored.then(() => answer, () => answer)
    return answer
  }
}

/**
 * `pieces`, telling `done` once (at their end, or when closed before it) the start of the text
 * given (its first {@link JOURNAL_BODY_LIMIT} characters) and the length of all of it.
 */
function journaledPieces(pieces: AnswerPieces, done: (start: string, size: number) => void): AnswerPieces {
  let start = ''
  let size = 0
  let told = false
  const tell = () => {
    if (told) return
    told = true
    done(start, size)
  }
  return {
    next() {
      let piece: string | undefined
      try {
        piece = pieces.next()
      } catch (error) {
        tell()
        throw error
      }
      if (piece === undefined) {
        tell()
        return undefined
      }
      size += piece.length
      // @note Copied (through JSON, exact for any text): a slice would hold the whole piece it was cut from.
      if (start.length < JOURNAL_BODY_LIMIT) start = JSON.parse(JSON.stringify(start + piece.slice(0, JOURNAL_BODY_LIMIT - start.length))) as string
      return piece
    },
    close() {
      pieces.close()
      tell()
    },
  }
}

/** The headers of most answers, shared (answers' headers are read-only). */
const JSON_HEADERS: Readonly<Record<string, string>> = Object.freeze({ 'content-type': 'application/json' })

const NETWORK_ERROR: ApiAnswer = { kind: 'network' }

/** What an answer is made from, and journaled with. */
interface AnswerParts {
  readonly request: ApiRequest
  /** The operation's id, or null for a 404 or 405. */
  readonly operation: string | null
  readonly outcome: Outcome
  /** `performance.now()` when the request arrived. */
  readonly started: number
  /** `Date.now()` when the request arrived. */
  readonly arrived: number
  readonly tenant?: Tenant | undefined
  readonly bodyText?: string | undefined
  readonly headers?: Record<string, string> | undefined
  /** Proxy mode: the real service's answer (its bytes, and their text for the journal), and where the exchange departs from the contract. */
  readonly passed?: { readonly bytes: Uint8Array; readonly text: string; readonly violations: readonly string[] } | undefined
}

/**
 * What is left to wait of a simulated delay (`Prefer: delay`, a planned answer's `delayMs`, a
 * scenario's latency) once the request has been read: a delay counts from the request's arrival
 * (`started`, `performance.now()`), so a body sent slowly uses part of it.
 * @note So the longest delay allowed still ends within the request's time, however slow its body
 * (attack2 F7: a 27.5 s delay after a body trickled over 5 s took a healthy Redis past the
 * request's deadline, 503 storage_unavailable).
 */
function delayLeft(delayMs: number, started: number): number {
  return delayMs <= 0 ? 0 : Math.max(0, delayMs - (performance.now() - started))
}

/** How long a client is told to wait after a storage failure. */
const STORAGE_RETRY_SECONDS = 5
/** How long a client is told to wait when the storage is lost until the sandbox is restarted (an operator's step). */
const STORAGE_LOST_RETRY_SECONDS = 60

/** The reason a 500 gives for an exception: what happened stays in the server's log. */
export const UNEXPECTED = 'unexpected error (the sandbox log has the details)'

/**
 * What a thrown error answers: a refused tenant, a storage failure or a server over capacity its
 * own 503 with `Retry-After` (the storage's message, which may name paths, stays out of the
 * body); anything else a 500 that says nothing of the exception, marked `unexpected` so that
 * the caller logs it.
 */
export function failureOf(error: unknown): { outcome: Outcome; headers?: Record<string, string>; unexpected?: true } {
  if (error instanceof TenantRefusedError) {
    return { outcome: failure(error.code, error.params), headers: { 'retry-after': String(error.retryAfterSeconds) } }
  }
  if (error instanceof WriteOutcomeUnknownError) {
    return { outcome: failure('write_outcome_unknown', { why: WRITE_OUTCOME_UNKNOWN_WHY[error.why] }), headers: { 'retry-after': String(STORAGE_RETRY_SECONDS) } }
  }
  if (error instanceof StorageUnavailableError) {
    // @note Lost until a restart, a 5 s Retry-After invited clients to retry every 5 s for nothing (review39 R9): a minute.
    return { outcome: failure('storage_unavailable', { until: STORAGE_UNAVAILABLE_UNTIL[error.until] }), headers: { 'retry-after': String(error.until === 'restart' ? STORAGE_LOST_RETRY_SECONDS : STORAGE_RETRY_SECONDS) } }
  }
  if (error instanceof PetstoreError) {
    // Only the library's pipeline meets one: its scenario (a file of the user's own) failed to
    // load. The user is the only client, so the loader's message is the useful answer.
    return { outcome: failure('internal_error', { reason: `the petstore has no scenario to answer from: ${error.message}` }) }
  }
  if (error instanceof OverCapacityError) {
    return {
      outcome: failure('over_capacity', { reason: error.reason, retryAfter: error.retryAfterSeconds }),
      headers: { 'retry-after': String(error.retryAfterSeconds) },
    }
  }
  return { outcome: failure('internal_error', { reason: UNEXPECTED }), unexpected: true }
}

/** The outcome `Prefer: code=<status>` asks for: that status's first error code, state untouched. */
function forcedOutcome(status: number, request: ApiRequest, operation: Operation, tenant: Tenant, limit: number): Outcome {
  return simulatedError(codeForStatus(status) ?? 'internal_error', `forced by "Prefer: code=${status}"`, request, operation, tenant, limit)
}

/** The Error body of `code` for a request, every placeholder of its message filled, state untouched; `note` says how it came about. */
function simulatedError(code: ErrorCode, note: string, request: ApiRequest, operation: Operation, tenant: Tenant, limit: number): Outcome {
  const path = request.path
  return {
    kind: 'error',
    code,
    note,
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
      max: Number.isFinite(tenant.maxCategories) ? tenant.maxCategories : 'its limit',
      until: STORAGE_UNAVAILABLE_UNTIL.brief,
      why: WRITE_OUTCOME_UNKNOWN_WHY.late,
    },
  }
}

const EMPTY = new Uint8Array(0)
/** Decodes a proxied answer's text (for checking and the journal): no Node `Buffer`, as the pipeline also runs in browsers. */
const UTF8 = new TextDecoder()

/**
 * What a proxied answer holds of the memory budget while it is read and sent: its bytes and
 * their text, reserved for the tenant as they come (by its Content-Length when it has one), as a
 * list read per request reserves its room (attack4 H1: 60 clients that read nothing held 60
 * answers of 44 MB outside every budget, and the heap ran out). A reservation refused throws the
 * budget's `OverCapacityError`: the service's answer is given up, the client gets 503.
 * @note One reservation at a time, of the whole room the answer needs so far, doubled as it grows
 * (a few reservations for a long answer, not one a piece): the one before is let go first, so that
 * an answer is judged alone, not as a second read of its own tenant.
 */
class HeldAnswer {
  readonly #reserve: PipelineOptions['reserve']
  #release: (() => void) | undefined
  #held = 0

  constructor(reserve: PipelineOptions['reserve']) {
    this.#reserve = reserve
  }

  /** Reserves room for `bytes` of answer (twice: the bytes, and their text), for `tenant`. */
  hold(bytes: number, tenant: Tenant | undefined): void {
    const needed = 2 * bytes
    if (this.#reserve === undefined || tenant === undefined || needed <= this.#held) return
    const total = Math.max(needed, 2 * this.#held, 64 * 1024)
    this.release()
    this.#release = this.#reserve(total, tenant)
    this.#held = total
  }

  /** Lets go of the reservation (once the answer is out, or given up); calling it again does nothing. */
  readonly release = (): void => {
    this.#release?.()
    this.#release = undefined
    this.#held = 0
  }
}
