/**
 * msw's side of the pipeline's request and answer: a Fetch `Request` (what msw hands its
 * handlers) read as an {@link ApiRequest}, and an {@link ApiAnswer} written as a Fetch `Response`.
 */
import type { ApiAnswer, ApiRequest } from '../pipeline/api-request.js'
import { decodeUtf8, payloadTooLarge, readCapped, type RawBody } from '../pipeline/request-body.js'

/** A Fetch `Request` (what msw hands its handlers) as an {@link ApiRequest}. */
export function fromFetchRequest(request: Request): ApiRequest {
  return {
    method: request.method,
    url: request.url,
    path: new URL(request.url).pathname,
    headers: request.headers,
    readBody: (limit) => readText(request, limit),
  }
}

/**
 * An {@link ApiAnswer} to `method` as a Fetch `Response`; a network failure is `Response.error()`.
 * A HEAD answer has the headers of its GET and no body.
 */
export function toFetchResponse(answer: ApiAnswer, method: string): Response {
  if (answer.kind === 'network') return Response.error()
  return new Response(method === 'HEAD' ? null : answer.body, { status: answer.status, headers: answer.headers })
}

/** Reads the body as UTF-8 text, refusing more than `limit` bytes without buffering them. */
async function readText(request: Request, limit: number): Promise<RawBody> {
  const declared = Number(request.headers.get('content-length') ?? Number.NaN)
  if (declared > limit) {
    discard(request.body)
    return payloadTooLarge(limit)
  }
  if (!request.body) return { ok: true, text: '' }
  const read = await readCapped(request.body, limit, discard)
  return read === undefined ? payloadTooLarge(limit) : decodeUtf8(read.chunks, read.size)
}

/**
 * @note Not awaited: msw hands handlers one branch of a tee'd stream, and cancelling a branch
 * only settles once the other branch is cancelled too, which never happens.
 */
function discard(stream: { cancel(): Promise<void> } | null): void {
  stream?.cancel().catch(() => undefined)
}
