/**
 * Proxy mode's seam: the pipeline passes a request on to the real service through a
 * {@link ProxyTarget} (the server's `Upstream`), checks the exchange against the contract, and
 * answers what the service answered, with what it found.
 */
import type { HeaderReader } from './api-request.js'

/** The real service's answer, read whole. */
export interface UpstreamAnswer {
  readonly status: number
  /** Its headers, hop-by-hop and length headers left out (the sandbox frames the answer itself). */
  readonly headers: Readonly<Record<string, string>>
  readonly contentType: string | null
  /** Its body, the bytes as sent (passed on as they are, whatever their encoding). */
  readonly body: Uint8Array
}

/** Where proxy mode sends requests. */
export interface ProxyTarget {
  /**
   * Sends a request for `pathAndQuery` (under the service's base URL) and reads its whole answer;
   * rejects with {@link UpstreamError} when none comes within `timeoutMs`. `hold` is told how
   * many bytes of the answer will be held (its Content-Length, or what has arrived so far) before
   * they are read; when it throws, the request is given up and the send rejects with its error.
   */
  send(method: string, pathAndQuery: string, body: string, headers: HeaderReader, timeoutMs: number, hold?: (bytes: number) => void): Promise<UpstreamAnswer>
}

/**
 * The most bytes of one answer of the real service the proxy reads: above the longest list the
 * sandbox itself makes under its default limits (20,000 categories of 200 + 2,000 characters,
 * about 44 MB of JSON). A larger answer is a 502.
 */
export const MAX_UPSTREAM_ANSWER_BYTES = 64 * 1024 * 1024

/** Why the real service gave no answer: it could not be reached (502), or took too long (504). */
export class UpstreamError extends Error {
  override readonly name = 'UpstreamError'
  constructor(
    readonly kind: 'unavailable' | 'timeout',
    message: string,
  ) {
    super(message)
  }
}

/** The answer header that carries an exchange's violations, as Prism's `sl-violations` does. */
export const VIOLATIONS_HEADER = 'sandbox-violations'

/** The most characters of violations the header carries; the journal has them all. */
const HEADER_CHARS = 4096

/**
 * The {@link VIOLATIONS_HEADER} value: a JSON array of the sentences, ASCII only (a header is
 * Latin-1), cut to {@link HEADER_CHARS} with a last sentence saying how many more the journal has.
 * @example violationsHeader(['response: 200 body [0]: id: expected an integer']) // '["response: 200 body [0]: id: expected an integer"]'
 */
export function violationsHeader(violations: readonly string[]): string {
  const ascii = (text: string) => JSON.stringify(text).replace(/[\u007f-\uffff]/g, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, '0')}`)
  const kept: string[] = []
  let length = 2
  for (const [index, violation] of violations.entries()) {
    const text = ascii(violation)
    const more = violations.length - index
    if (length + text.length + 1 > HEADER_CHARS - 60) {
      kept.push(ascii(`...and ${more} more in the journal (GET /__sandbox/requests)`))
      break
    }
    kept.push(text)
    length += text.length + 1
  }
  return `[${kept.join(',')}]`
}
