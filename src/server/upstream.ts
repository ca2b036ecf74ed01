/**
 * The real service behind the validating proxy (`serve --proxy <base-url>`): a request is sent on
 * as the client sent it (its key included, hop-by-hop headers left out), and the whole answer is
 * read back within the request's time, so that it can be checked against the contract before it
 * is passed on.
 */
import { Agent as HttpAgent, request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https'
import type { HeaderReader } from '../pipeline/api-request.js'
import { UpstreamError, type ProxyTarget, type UpstreamAnswer } from '../pipeline/proxy.js'

/**
 * Headers a proxy never passes on (RFC 9110 §7.6.1), and those it sets itself: `host` (the
 * upstream's own), the body's length and encoding (the body is passed whole), `accept-encoding`
 * (the answer must be readable to be checked).
 */
const NOT_FORWARDED = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'accept-encoding',
  'expect',
])

/** Headers of the answer the sandbox does not pass back: hop-by-hop, the framing it does itself, and its own (request id, violations). */
const NOT_RETURNED = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length', 'x-request-id', 'sandbox-violations'])

/** Options of {@link Upstream}. */
export interface UpstreamOptions {
  /** The real service's base URL, the interface's `{base_url}` (`https://staging.shop.test/v1`). */
  readonly baseUrl: string
  /** The most bytes of one answer the sandbox reads (a larger answer is a 502). */
  readonly maxAnswerBytes: number
}

/**
 * The real service, as the proxy reaches it: one keep-alive agent, every request bounded by the
 * time it has left.
 * @example await new Upstream({ baseUrl: 'https://staging.shop.test/v1', maxAnswerBytes: 2 ** 26 }).send('GET', '/categories', '', headers, 30_000)
 */
export class Upstream implements ProxyTarget {
  readonly #base: URL
  readonly #options: UpstreamOptions
  readonly #agent: HttpAgent

  constructor(options: UpstreamOptions) {
    this.#base = new URL(options.baseUrl)
    this.#options = options
    this.#agent = this.#base.protocol === 'https:' ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true })
  }

  /** The base URL requests go to. */
  get baseUrl(): string {
    return this.#options.baseUrl
  }

  /**
   * Sends a request for `pathAndQuery` (under the base URL, `/categories?x=1`) and reads its whole
   * answer; rejects with {@link UpstreamError} when none comes within `timeoutMs`.
   */
  send(method: string, pathAndQuery: string, body: string, headers: HeaderReader, timeoutMs: number, hold?: (bytes: number) => void): Promise<UpstreamAnswer> {
    const target = this.#target(pathAndQuery)
    const sent: Record<string, string> = {}
    for (const [name, value] of headers) if (!NOT_FORWARDED.has(name.toLowerCase())) sent[name] = value
    if (body.length > 0) sent['content-length'] = String(Buffer.byteLength(body))
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest
    return new Promise<UpstreamAnswer>((resolve, reject) => {
      let settled = false
      const fail = (error: Error) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        request.destroy()
        reject(error)
      }
      /** Whether `bytes` may be held: within the cap, and `hold` lets them. */
      const mayHold = (bytes: number): boolean => {
        if (bytes > this.#options.maxAnswerBytes) {
          fail(new UpstreamError('unavailable', `its answer is larger than ${this.#options.maxAnswerBytes} bytes`))
          return false
        }
        try {
          hold?.(bytes)
          return true
        } catch (error) {
          fail(error instanceof Error ? error : new Error(String(error)))
          return false
        }
      }
      const timer = setTimeout(() => fail(new UpstreamError('timeout', `no answer within ${timeoutMs} ms`)), Math.max(1, timeoutMs))
      const request = send(target, { method, headers: sent, agent: this.#agent }, (response) => {
        const declared = Number(response.headers['content-length'])
        if (Number.isSafeInteger(declared) && declared > 0 && !mayHold(declared)) return
        const chunks: Buffer[] = []
        let bytes = 0
        response.on('data', (chunk: Buffer) => {
          bytes += chunk.length
          if (mayHold(bytes)) chunks.push(chunk)
        })
        response.on('error', () => fail(new UpstreamError('unavailable', 'the connection broke while it answered')))
        response.on('aborted', () => fail(new UpstreamError('unavailable', 'the connection broke while it answered')))
        response.on('end', () => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          const returned = returnedHeaders(response.headers)
          resolve({ status: response.statusCode ?? 502, headers: returned, contentType: returned['content-type'] ?? null, body: Buffer.concat(chunks) })
        })
      })
      request.on('error', (error: NodeJS.ErrnoException) => fail(new UpstreamError('unavailable', error.code ?? error.message)))
      // @note A 101 (the service switched protocols, unasked) is no answer to pass on: at once a 502, not a 504 at the timeout (attack4).
      request.on('upgrade', (_response, socket) => {
        socket.destroy()
        fail(new UpstreamError('unavailable', 'it switched protocols (101), which the proxy does not pass on'))
      })
      request.end(body.length > 0 ? body : undefined)
    })
  }

  /**
   * The service's URL for a path under its base URL: the base's origin and path, then the path as
   * the client sent it, joined as text, never resolved as a URL (attack4 H2: `/v1//host:port/x`
   * resolved against a base without a path went to `host:port`, any host the client named).
   */
  #target(pathAndQuery: string): URL {
    const basePath = this.#base.pathname.replace(/\/$/, '')
    const text = `${this.#base.origin}${basePath}${pathAndQuery}`
    const target = URL.canParse(text) ? new URL(text) : undefined
    if (target === undefined || target.origin !== this.#base.origin || !target.pathname.startsWith(`${basePath}/`)) throw new UpstreamError('unavailable', 'the request path cannot be passed on under the base URL')
    return target
  }

  /** Lets go of the kept-alive connections. */
  close(): void {
    this.#agent.destroy()
  }
}

function returnedHeaders(headers: IncomingHttpHeaders): Record<string, string> {
  const returned: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue
    // @note The sandbox's own X-Request-Id and Sandbox-Violations are the ones the client reads:
    // the service's request id is kept under another name, and a `Sandbox-Violations` of its own is
    // dropped (it could claim a clean exchange, or forge findings).
    if (name === 'x-request-id') returned['upstream-request-id'] = Array.isArray(value) ? value.join(', ') : value
    if (NOT_RETURNED.has(name)) continue
    // @note Several `Set-Cookie` lines cannot be joined with a comma; the proxy keeps the first (the API sets none).
    returned[name] = Array.isArray(value) ? (name === 'set-cookie' ? value[0]! : value.join(', ')) : value
  }
  return returned
}
