/**
 * What every response carries (`X-Request-Id`, `X-Content-Type-Options`) and the one log line
 * per request. The line names the tenant by id; the key itself is never logged.
 */
import { newRequestId } from './request-id.js'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { readBearer } from '../core/auth.js'
import type { TenantRegistry } from './tenant-registry.js'

/** One request, as logged. */
export interface RequestLogEntry {
  /** ISO 8601 time the request arrived. */
  readonly time: string
  readonly requestId: string
  readonly method: string
  /** The path, without the query string. */
  readonly path: string
  /** The status sent, or 0 when the connection closed without an answer (a network fault). */
  readonly status: number
  /**
   * Milliseconds from its arrival to its answer: written (the API's answers, CORS preflights) or
   * done with by the connection (the admin API's, the demo page's).
   */
  readonly ms: number
  /** The tenant id, `admin` for the admin token, or null without an accepted key. */
  readonly tenant: string | null
}

/** An incoming id is echoed only when it is short and plain, so logs stay readable. */
const SAFE_REQUEST_ID = /^[\w.:-]{1,128}$/

let lastMs = Number.NaN
let lastIso = ''

/** Now as ISO 8601: formatted once per millisecond, however many requests arrive in it. */
function isoNow(): string {
  const now = Date.now()
  if (now !== lastMs) {
    lastMs = now
    lastIso = new Date(now).toISOString()
  }
  return lastIso
}

/** What a request's log line needs from its arrival, kept on its response. */
interface Arrival {
  readonly started: number
  readonly time: string
  readonly requestId: string
  /** Read as it arrived: express rewrites `req.url` under a mounted router (`/__sandbox/health` became `/health`). */
  readonly path: string
}
const ARRIVAL = Symbol('petstore-sandbox arrival')
// @note Properties, not WeakMap entries: a WeakMap's bookkeeping cost a percent of a request.
type Stamped = ServerResponse & { [ARRIVAL]?: Arrival }

/** Stamps answers and logs requests: what the server does for each request around its answer. */
export interface RequestContext {
  /** Stamps the answer's headers (`X-Request-Id`, `X-Content-Type-Options`) as the request arrives. */
  stamp(req: IncomingMessage, res: ServerResponse): void
  /**
   * Logs the request once its connection is done with it (`close`): for answers written
   * elsewhere (the admin API, CORS preflights).
   */
  logOnClose(req: IncomingMessage, res: ServerResponse): void
  /**
   * Logs the request now, its answer written (or dropped), naming `tenant` (the id the pipeline
   * resolved) or, without one, whoever its key names.
   * @note The API's answers are logged here, as the bridge writes them: a `close` listener per
   * request cost more than formatting the line.
   */
  logWritten(req: IncomingMessage, res: ServerResponse, tenant: string | undefined): void
  /** Logs a request Node refused before it could read it: no method, path or tenant is known (`-`). */
  logUnread(requestId: string, status: number): void
}

/**
 * Stamps every answer with its headers and, with `log`, logs each request once. A `log` that
 * throws is reported to `report`, never thrown at Node (a `close` listener's exception ends the process).
 */
export function requestContext(
  tenants: TenantRegistry,
  userLog: ((entry: RequestLogEntry) => void) | undefined,
  report: (error: unknown) => void = () => undefined,
): RequestContext {
  const log =
    userLog &&
    ((entry: RequestLogEntry) => {
      try {
        userLog(entry)
      } catch (error) {
        report(error)
      }
    })
  const emit = (req: IncomingMessage, res: ServerResponse, tenant: string | undefined, status = res.headersSent ? res.statusCode : 0): void => {
    const arrival = (res as Stamped)[ARRIVAL]
    if (log === undefined || arrival === undefined) return
    ;(res as Stamped)[ARRIVAL] = undefined
    log({
      time: arrival.time,
      requestId: arrival.requestId,
      method: req.method ?? 'GET',
      path: arrival.path,
      status,
      ms: Math.round((performance.now() - arrival.started) * 100) / 100,
      tenant: tenant ?? callerOf(tenants, req.headers.authorization),
    })
  }
  const logWritten = (req: IncomingMessage, res: ServerResponse, tenant: string | undefined): void => {
    if (log === undefined) return
    // @note An answer that has not gone out yet is logged when its connection is done with it:
    // a pipelined request answered before the ones ahead of it waits for its turn (Node gives it
    // the socket then), so lines keep the order requests came in; a 413 on a connection that
    // closes after it waits for the rest of its body to be dropped.
    if ((res.socket === null || !res.headersSent) && !res.destroyed) {
      res.once('close', () => emit(req, res, tenant))
      // @note An answer queued behind a pipelined one ahead of it never gets the socket, nor a
      // `close`, when its client leaves: its request is aborted, and it is logged then, as dropped.
      if (res.socket === null) {
        if (req.destroyed) dropped(req, res, tenant)
        else req.once('close', () => dropped(req, res, tenant))
      }
    } else emit(req, res, tenant)
  }
  /** Logs a queued answer as dropped when its connection is gone before it was written. */
  const dropped = (req: IncomingMessage, res: ServerResponse, tenant: string | undefined): void => {
    if (res.socket !== null || res.writableFinished || !req.socket.destroyed) return
    emit(req, res, tenant, 0)
  }
  return {
    stamp(req, res) {
      const incoming = req.headers['x-request-id']
      const requestId = typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : newRequestId()
      res.setHeader('X-Request-Id', requestId)
      res.setHeader('X-Content-Type-Options', 'nosniff')
      if (log) {
        const target = req.url ?? ''
        const query = target.indexOf('?')
        const path = (query === -1 ? target : target.slice(0, query)).slice(0, 512)
        ;(res as Stamped)[ARRIVAL] = { started: performance.now(), time: isoNow(), requestId, path }
      }
    },
    logOnClose(req, res) {
      if (log) res.once('close', () => emit(req, res, undefined))
    },
    logWritten,
    logUnread(requestId, status) {
      log?.({ time: isoNow(), requestId, method: '-', path: '-', status, ms: 0, tenant: null })
    },
  }
}

/**
 * Who a request that the pipeline did not resolve a tenant for came as (the admin API, a refused
 * tenant, a 401): the admin token, an accepted key's tenant (its id remembered by the registry,
 * not hashed again), or nobody.
 */
function callerOf(tenants: TenantRegistry, authorization: string | undefined): string | null {
  const auth = readBearer(authorization ?? null)
  if (!auth.ok) return null
  if (tenants.isAdminToken(auth.token)) return 'admin'
  return tenants.idOfKey(auth.token) ?? null
}
