/**
 * Reading a live service's answer body with a byte cap, for `verify` and `scenarios record`: a
 * service that sends a body that never ends, or one far larger than any list it could make, is
 * stopped at the cap instead of filling memory (the bytes `fetch` buffers live outside the heap,
 * so a heap limit does not bound them).
 */
import { joinChunks, readCapped } from '../pipeline/request-body.js'
import { MAX_UPSTREAM_ANSWER_BYTES } from '../pipeline/proxy.js'

/** The most bytes of one answer `verify` and `scenarios record` read: the validating proxy's cap (64 MiB). */
export const DEFAULT_MAX_ANSWER_BYTES = MAX_UPSTREAM_ANSWER_BYTES

/** Thrown by {@link readAnswerText} when the body passes the cap; the rest is not read. */
export class AnswerTooLargeError extends Error {
  override readonly name = 'AnswerTooLargeError'
  constructor(readonly maxBytes: number) {
    super(`the answer is larger than ${maxBytes} bytes`)
  }
}

/**
 * The body as UTF-8 text, read chunk by chunk: at most `maxBytes` are held, and the connection is
 * let go of as soon as the body passes them. Other failures (the request's signal aborting, the
 * connection breaking) reject as `fetch` itself rejects.
 */
export async function readAnswerText(response: Response, maxBytes: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? Number.NaN)
  if (declared > maxBytes) {
    await response.body?.cancel().catch(() => undefined)
    throw new AnswerTooLargeError(maxBytes)
  }
  if (response.body === null) return ''
  // @note Cancelling the stream is what closes the connection: without it the service keeps sending.
  const read = await readCapped(response.body, maxBytes, (reader) => reader.cancel().catch(() => undefined))
  if (read === undefined) throw new AnswerTooLargeError(maxBytes)
  return new TextDecoder().decode(joinChunks(read.chunks, read.size))
}
