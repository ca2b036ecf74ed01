/**
 * CORS for browser partners. Preflights are answered here, before authentication and before the
 * API's 405 (browsers never send credentials on a preflight).
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { API_METHODS } from '../contract/operations.js'
import { ADMIN_METHODS } from './admin-routes.js'

/** Allowed origins: `'*'` for any, or exact origins (`https://app.example.com`). */
export type CorsOrigins = '*' | readonly string[]

/** What a preflight may ask for: the API's methods (from the operations table) and the admin API's. */
const ALLOWED_METHODS = [...new Set([...API_METHODS, ...ADMIN_METHODS])].join(', ')
const ALLOWED_HEADERS = 'Authorization, Content-Type, Prefer, X-Request-Id'
/** Response headers a browser script may read. */
const EXPOSED_HEADERS = 'X-Request-Id, Allow, Deprecation, Sunset, Link, WWW-Authenticate, Retry-After'
/** A header list as browsers send it in `Access-Control-Request-Headers`. */
const HEADER_LIST = /^[\w-]+(\s*,\s*[\w-]+)*$/

/** Whether a request is a CORS preflight (`OPTIONS` with `Access-Control-Request-Method`): answered at once, no body. */
export function isPreflight(req: IncomingMessage): boolean {
  return req.method === 'OPTIONS' && req.headers['access-control-request-method'] !== undefined
}

/**
 * Sets the CORS headers of an answer (any: one the server refuses itself too, so that a browser
 * script can read it); returns whether the request's origin is allowed.
 * @default origins '*'
 */
export function corsHeaders(origins: CorsOrigins): (req: IncomingMessage, res: ServerResponse) => boolean {
  return (req, res) => {
    const origin = req.headers.origin
    for (const [name, value] of corsHeadersFor(origins, origin)) res.setHeader(name, value)
    return allows(origins, origin)
  }
}

function allows(origins: CorsOrigins, origin: string | undefined): origin is string {
  return origin !== undefined && (origins === '*' || origins.includes(origin))
}

/**
 * The CORS headers of an answer to a request from `origin` (undefined: none sent, or not known):
 * what {@link corsHeaders} sets, as pairs, for answers written without a response object (a
 * request Node could not parse).
 * @example corsHeadersFor('*', 'https://app.example')[0] // ['Access-Control-Allow-Origin', '*']
 */
export function corsHeadersFor(origins: CorsOrigins, origin: string | undefined): [name: string, value: string][] {
  const headers: [string, string][] = allows(origins, origin)
    ? [
        ['Access-Control-Allow-Origin', origins === '*' ? '*' : origin],
        ['Access-Control-Expose-Headers', EXPOSED_HEADERS],
      ]
    : []
  if (origins !== '*') headers.push(['Vary', 'Origin'])
  return headers
}

/**
 * Sets the CORS headers of a request's answer, and answers it when it is a preflight: returns
 * true when it did.
 * @default origins '*'
 */
export function cors(origins: CorsOrigins): (req: IncomingMessage, res: ServerResponse) => boolean {
  const headers = corsHeaders(origins)
  return (req, res) => {
    const allowed = headers(req, res)
    if (!isPreflight(req)) return false
    if (allowed) {
      const requested = req.headers['access-control-request-headers']
      res.setHeader('Access-Control-Allow-Methods', ALLOWED_METHODS)
      res.setHeader(
        'Access-Control-Allow-Headers',
        requested !== undefined && HEADER_LIST.test(requested) ? requested : ALLOWED_HEADERS,
      )
      res.setHeader('Access-Control-Max-Age', '600')
    }
    // A refused origin gets no Access-Control-* headers: the browser then blocks the request.
    res.writeHead(204).end()
    return true
  }
}
