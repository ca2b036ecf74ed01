/**
 * What every response carries (`X-Request-Id`, `X-Content-Type-Options`) and the one log line
 * per request. The line names the tenant by id; the key itself is never logged.
 */
import { randomUUID } from 'node:crypto'
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

/** The tenant the pipeline resolved for a request, noted on its response by the API bridge for the log line. */
const RESOLVED = Symbol('petstore-sandbox tenant')
type Noted = ServerResponse & { [RESOLVED]?: string }

/**
 * Notes the id of the tenant the pipeline answered a request for, so that its log line names it
 * without judging the key again.
 */
export function noteTenant(res: ServerResponse, id: string): void {
  // @note A property, not a WeakMap entry: a WeakMap's bookkeeping cost a percent of a request.
  ;(res as Noted)[RESOLVED] = id
}

/** Stamps every answer with its headers and, with `log`, logs the request once it ends. */
export function requestContext(
  tenants: TenantRegistry,
  log: ((entry: RequestLogEntry) => void) | undefined,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const started = performance.now()
    const incoming = req.headers['x-request-id']
    const requestId = typeof incoming === 'string' && SAFE_REQUEST_ID.test(incoming) ? incoming : randomUUID()
    res.setHeader('X-Request-Id', requestId)
    res.setHeader('X-Content-Type-Options', 'nosniff')
    if (log) {
      const time = isoNow()
      const path = ((req.url ?? '').split('?', 1)[0] ?? '').slice(0, 512)
      res.once('close', () => {
        log({
          time,
          requestId,
          method: req.method ?? 'GET',
          path,
          status: res.headersSent ? res.statusCode : 0,
          ms: Math.round((performance.now() - started) * 100) / 100,
          tenant: (res as Noted)[RESOLVED] ?? callerOf(tenants, req.headers.authorization),
        })
      })
    }
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
