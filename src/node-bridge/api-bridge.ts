/**
 * The bridge from Node's HTTP server to the core: a request under the API's base path goes to
 * the pipeline, and its answer is written back, with no express and no Fetch objects in between
 * (docs/decisions/0001-lean-server-bridge.md has the figures). Every rule is the pipeline's.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { UNEXPECTED, type Pipeline } from '../pipeline/pipeline.js'
import type { ApiAnswer } from '../pipeline/api-request.js'
import { sendError, writeJson, writePieces, type AnswerSending } from './http-errors.js'
import { fromNodeRequest, requestUrl } from './node-request.js'

/**
 * Answers requests whose path is under `basePath` (`/v1`) and returns true for them; returns
 * false, having done nothing, for every other request. `written` is told of each request once
 * its answer is written (or dropped), with that answer (undefined when an exception took its
 * place): the server logs it then. `sending` says how long answers are sent: counted while they
 * are (an answer made for its request, not a text the store keeps ready) and for how long a
 * client may take nothing of one.
 */
export function apiBridge(
  pipeline: Pipeline,
  basePath: string,
  report: (error: unknown, req: IncomingMessage) => void = () => undefined,
  written?: (req: IncomingMessage, res: ServerResponse, answer: ApiAnswer | undefined) => void,
  sending: AnswerSending = {},
): (req: IncomingMessage, res: ServerResponse) => boolean {
  const prefix = `${basePath}/`
  const uncounted: AnswerSending = { stallMs: sending.stallMs }
  return (req, res) => {
    const url = requestUrl(req)
    if (url === undefined || !(url.pathname === basePath || url.pathname.startsWith(prefix))) return false
    const id = res.getHeader('x-request-id')
    const request = fromNodeRequest(req, url, typeof id === 'string' ? id : undefined)
    // @note Should `handle` reject (it never does) or `write` throw, the client still gets an Error
    // body (when nothing was sent yet), never the exception's message (it may name a file path),
    // and nothing here can become an unhandled rejection. (`written` logs, and a log that throws
    // is reported where the log is: request-context.ts.)
    const failed = (error: unknown) => {
      report(error, req)
      sendError(res, 'internal_error', { reason: UNEXPECTED })
      written?.(req, res, undefined)
    }
    pipeline.handle(request, url.pathname.slice(basePath.length) || '/').then((answer) => {
      try {
        write(res, answer, answer.kind === 'http' && answer.shared === true ? uncounted : sending)
      } catch (error) {
        if (answer.kind === 'http') answer.pieces?.close()
        failed(error)
        return
      } finally {
        // @note Only now, the answer counted as it is sent (`sending`): let go earlier, the read's
        // reservation left a gap in which other reads were let through uncounted.
        if (answer.kind === 'http') answer.release?.()
      }
      written?.(req, res, answer)
    }, failed)
    return true
  }
}

function write(res: ServerResponse, answer: ApiAnswer, sending: AnswerSending): void {
  // @note A simulated network failure drops the connection, which is what the fault means.
  if (answer.kind === 'network') {
    res.destroy()
    return
  }
  // @note An answer already sent in this one's place (a 408 at the request timeout, while the
  // body was still arriving) stands.
  if (res.destroyed || res.headersSent) {
    answer.pieces?.close()
    return
  }
  if (answer.pieces !== undefined) {
    writePieces(res, answer.status, answer.headers, answer.pieces, sending.stallMs, answer.tenant)
    return
  }
  writeJson(res, answer.status, answer.headers, answer.bytes ?? answer.body, sending, answer.tenant)
}
