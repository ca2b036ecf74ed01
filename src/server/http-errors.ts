/** Error answers of the server's own routes, always the Error body of the error table. */
import type { ServerResponse } from 'node:http'
import { apiError, type ErrorCode, type ErrorParams } from '../contract/errors.js'
import { mustCloseAfter } from './node-request.js'

/** Sends the Error body for `code`, with `WWW-Authenticate` on 401 as the API does. */
export function sendError(res: ServerResponse, code: ErrorCode, params: ErrorParams = {}, headers: Record<string, string> = {}): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  const body = apiError(code, params)
  if (body.status === 401) {
    res.setHeader('WWW-Authenticate', code === 'invalid_api_key' ? 'Bearer error="invalid_token"' : 'Bearer')
  }
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value)
  // @note Answered before the body was read in full (a 413): the unread rest would stall a
  // keep-alive connection, so it is closed after this answer (as the API's bridge does).
  if (mustCloseAfter(res.req)) res.setHeader('Connection', 'close')
  // @note Headers set one by one and the body given to `end()`, so that Node sends a
  // Content-Length, as the API's answers carry (after `writeHead` the body would go chunked).
  res.statusCode = body.status
  res.setHeader('Content-Type', 'application/json; charset=utf-8')
  res.end(JSON.stringify(body))
}
