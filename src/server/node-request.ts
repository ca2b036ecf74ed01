/**
 * Node's `IncomingMessage` as the pipeline's {@link ApiRequest}: headers read in place and the
 * body read from the stream, bounded, with the core's own rules for size and UTF-8.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { decodeUtf8, payloadTooLarge, type RawBody } from '../core/request-body.js'
import type { ApiRequest, HeaderReader } from '../handlers/api-request.js'

/** A Host header that can stand in a URL as it is (a name or address, an optional port). */
export const PLAIN_HOST = /^(?:[\w.-]+|\[[\da-f:.]+\])(?::\d{1,5})?$/i

/** The request's URL parts, or undefined when its target cannot be parsed. */
export function requestUrl(req: IncomingMessage): URL | undefined {
  const protocol = 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http'
  const target = req.url ?? '/'
  const host = req.headers.host
  if (host !== undefined && PLAIN_HOST.test(host) && URL.canParse(target, `${protocol}://${host}`)) {
    return new URL(target, `${protocol}://${host}`)
  }
  // @note The sandbox does not route by host: a Host it cannot use (`a b`, `[`, `x:99999`) is read as localhost.
  return URL.canParse(target, `${protocol}://localhost`) ? new URL(target, `${protocol}://localhost`) : undefined
}

/** `req` as an {@link ApiRequest} for the URL {@link requestUrl} read, answered with the id `id`. */
export function fromNodeRequest(req: IncomingMessage, url: URL, id: string | undefined): ApiRequest {
  return {
    id,
    method: req.method ?? 'GET',
    url: url.href,
    path: url.pathname,
    headers: new NodeHeaders(req.headers),
    readBody: (limit) => readNodeBody(req, limit),
  }
}

/** Node's parsed headers (names already lower-case) as a {@link HeaderReader}, without copying them. */
class NodeHeaders implements HeaderReader {
  readonly #headers: IncomingHttpHeaders

  constructor(headers: IncomingHttpHeaders) {
    this.#headers = headers
  }

  get(name: string): string | null {
    const value = this.#headers[name]
    if (value === undefined) return null
    return Array.isArray(value) ? value.join(', ') : value
  }

  *[Symbol.iterator](): Iterator<[string, string]> {
    for (const name of Object.keys(this.#headers)) {
      const value = this.get(name)
      if (value !== null) yield [name, value]
    }
  }
}

const CUT_OFF: RawBody = { ok: false, code: 'invalid_body', params: { reason: 'The request body was cut off before its end' } }

/**
 * Reads the body as UTF-8 text, at most `limit` bytes. Over the limit it stops reading and
 * leaves the rest unread: the answer then closes the connection.
 */
export function readNodeBody(req: IncomingMessage, limit: number): Promise<RawBody> {
  if (Number(req.headers['content-length'] ?? Number.NaN) > limit) return Promise.resolve(payloadTooLarge(limit))
  if (req.readableEnded) return Promise.resolve({ ok: true, text: '' })
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    let size = 0
    const finish = (result: RawBody) => {
      req.off('data', onData).off('end', onEnd).off('error', onCut).off('close', onCut)
      resolve(result)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength
      if (size <= limit) {
        chunks.push(chunk)
        return
      }
      req.pause()
      finish(payloadTooLarge(limit))
    }
    const onEnd = () => finish(decodeUtf8(chunks, size))
    const onCut = () => finish(CUT_OFF)
    req.on('data', onData).on('end', onEnd).on('error', onCut).on('close', onCut)
  })
}
