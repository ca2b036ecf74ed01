/** Error answers of the server's own routes, always the Error body of the error table. */
import type { ServerResponse } from 'node:http'
import { apiError, type ErrorCode, type ErrorParams } from '../contract/errors.js'
import { wwwAuthenticate } from '../core/auth.js'
import { afterDrained, mustCloseAfter } from './node-request.js'

/** Sends the Error body for `code`, with `WWW-Authenticate` on 401 as the API does. */
export function sendError(res: ServerResponse, code: ErrorCode, params: ErrorParams = {}, headers: Record<string, string> = {}): void {
  // An answer under way cannot be replaced: its connection is cut. One already sent (a 408 the
  // server wrote while the body still arrived) stands.
  if (res.headersSent) {
    if (!res.writableEnded) res.destroy()
    return
  }
  const body = apiError(code, params)
  const all: Record<string, string> = { ...headers, 'content-type': 'application/json; charset=utf-8' }
  if (body.status === 401) all['www-authenticate'] = wwwAuthenticate(code)
  writeJson(res, body.status, all, JSON.stringify(body))
}

/**
 * Writes a JSON answer: the one place the server's answers (API and admin alike) are written.
 * A HEAD request gets the headers and the Content-Length of its GET, and no body.
 */
export function writeJson(res: ServerResponse, status: number, headers: Readonly<Record<string, string>>, body: string): void {
  // A connection that closes after this answer waits for the rest of the body to be dropped.
  if (!res.shouldKeepAlive && afterDrained(res.req, () => res.destroyed || writeJson(res, status, headers, body))) return
  // @note Answered before the body was read in full (a 413) and not dropping the rest: the
  // unread rest would stall a keep-alive connection, so it is closed after this answer.
  if (mustCloseAfter(res.req)) res.setHeader('Connection', 'close')
  // @note Headers set one by one and the body given to `end()`, so that Node sends a
  // Content-Length (after `writeHead` the body would go chunked).
  res.statusCode = status
  for (const name in headers) res.setHeader(name, headers[name]!)
  // @note Node sends no body to a HEAD request, nor the Content-Length its GET would carry.
  if (res.req.method === 'HEAD') {
    res.setHeader('Content-Length', Buffer.byteLength(body))
    res.end()
    return
  }
  res.end(body)
}
