/**
 * What every response carries (`X-Request-Id`, `X-Content-Type-Options`) and the one log line
 * per request. The line names the tenant by id; the key itself is never logged.
 */
import { randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { readBearer } from '../core/auth.js'
import { tenantId, type TenantRegistry } from './tenant-registry.js'

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
      const time = new Date().toISOString()
      const path = ((req.url ?? '').split('?', 1)[0] ?? '').slice(0, 512)
      res.once('close', () => {
        log({
          time,
          requestId,
          method: req.method ?? 'GET',
          path,
          status: res.headersSent ? res.statusCode : 0,
          ms: Math.round((performance.now() - started) * 100) / 100,
          tenant: callerOf(tenants, req.headers.authorization),
        })
      })
    }
  }
}

function callerOf(tenants: TenantRegistry, authorization: string | undefined): string | null {
  const auth = readBearer(authorization ?? null)
  if (!auth.ok) return null
  if (tenants.isAdminToken(auth.token)) return 'admin'
  return tenants.accepts(auth.token) ? tenantId(auth.token) : null
}
