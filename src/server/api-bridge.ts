/**
 * The bridge from Node's HTTP server to the core: a request under the API's base path goes to
 * the pipeline, and its answer is written back, with no express and no Fetch objects in between
 * (docs/decisions/0001-lean-server-bridge.md has the figures). Every rule is the pipeline's.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { UNEXPECTED, type Pipeline } from '../handlers/pipeline.js'
import type { ApiAnswer } from '../handlers/api-request.js'
import { sendError } from './http-errors.js'
import { fromNodeRequest, mustCloseAfter, requestUrl } from './node-request.js'

/**
 * Answers requests whose path is under `basePath` (`/v1`) and returns true for them; returns
 * false, having done nothing, for every other request.
 */
export function apiBridge(
  pipeline: Pipeline,
  basePath: string,
  report: (error: unknown, req: IncomingMessage) => void = () => undefined,
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const prefix = `${basePath}/`
  return (req, res) => {
    const url = requestUrl(req)
    if (url === undefined || !(url.pathname === basePath || url.pathname.startsWith(prefix))) return false
    const id = res.getHeader('x-request-id')
    const request = fromNodeRequest(req, url, typeof id === 'string' ? id : undefined)
    pipeline
      .handle(request, url.pathname.slice(basePath.length) || '/')
      .then((answer) => write(req, res, answer))
      .catch((error: unknown) => {
        // @note `handle` never rejects; should a bug make it (or `write` throw), the client still
        // gets an Error body, never the exception's message (it may name a file path), and
        // nothing here can become an unhandled rejection.
        report(error, req)
        sendError(res, 'internal_error', { reason: UNEXPECTED })
      })
    return true
  }
}

function write(req: IncomingMessage, res: ServerResponse, answer: ApiAnswer): void {
  // @note A simulated network failure drops the connection, which is what the fault means.
  if (answer.kind === 'network') {
    res.destroy()
    return
  }
  if (res.destroyed) return
  // @note Answered before the body was read in full (a 413) and not dropping the rest: the
  // unread rest would stall a keep-alive connection, so it is closed after this answer.
  if (mustCloseAfter(req)) res.setHeader('Connection', 'close')
  // @note Headers set one by one and the body given to `end()`, so that Node sends a
  // Content-Length (after `writeHead` it would have to send the body chunked).
  res.statusCode = answer.status
  for (const name in answer.headers) res.setHeader(name, answer.headers[name]!)
  // @note Node sends no body to a HEAD request, nor the Content-Length its GET would carry.
  if (req.method === 'HEAD') {
    res.setHeader('Content-Length', Buffer.byteLength(answer.body))
    res.end()
    return
  }
  res.end(answer.body)
}
