/** CORS for browser partners, and what every response carries: X-Request-Id, nosniff, a log line. */
import { describe, expect, it } from 'vitest'
import { DEV_API_KEY, tenantId } from '../../src/server.js'
import { exchange, responsesOf } from '../support/raw-http.js'
import { auth, startSandbox } from '../support/sandbox-server.js'

const ORIGIN = 'https://partner.example'

describe('CORS', () => {
  it.each(['/v1/categories', '/__sandbox/state', '/__sandbox/scenario'])('answers a preflight to %s without auth', async (path) => {
    const { fetch } = await startSandbox()
    const response = await fetch(path, {
      method: 'OPTIONS',
      headers: { origin: ORIGIN, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization, content-type' },
    })
    expect(response.status).toBe(204)
    expect(response.headers.get('access-control-allow-origin')).toBe('*')
    expect(response.headers.get('access-control-allow-methods')).toContain('PUT')
    expect(response.headers.get('access-control-allow-headers')).toBe('authorization, content-type')
    expect(response.headers.get('access-control-max-age')).toBe('600')
  })

  it('allows in a preflight every method the API and the admin API answer, HEAD included', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': 'HEAD' } })
    const allowed = (response.headers.get('access-control-allow-methods') ?? '').split(', ').sort()
    expect(allowed).toEqual(['DELETE', 'GET', 'HEAD', 'POST', 'PUT'])
  })

  it('lets a browser read X-Request-Id and Allow on actual responses', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { headers: { ...auth(), origin: ORIGIN } })
    expect(response.headers.get('access-control-allow-origin')).toBe('*')
    expect(response.headers.get('access-control-expose-headers')).toContain('X-Request-Id')
  })

  it('lets a browser read the Retry-After of a 503 (trial finding: it was not exposed)', async () => {
    const { fetch } = await startSandbox({ anyKey: true, maxTenants: 1 })
    await (await fetch('/v1/categories', { method: 'POST', headers: { ...auth('first', true), origin: ORIGIN }, body: '{"name":"Kept"}' })).arrayBuffer()
    const refused = await fetch('/v1/categories', { headers: { ...auth('second'), origin: ORIGIN } })
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toMatch(/^\d+$/)
    const exposed = (refused.headers.get('access-control-expose-headers') ?? '').split(/,\s*/).map((name) => name.toLowerCase())
    expect(exposed).toContain('retry-after')
  })

  it('echoes an allowed origin and says nothing to others when origins are configured', async () => {
    const { fetch } = await startSandbox({ corsOrigins: [ORIGIN] })
    const preflight = { 'access-control-request-method': 'GET' }
    const allowed = await fetch('/v1/categories', { method: 'OPTIONS', headers: { ...preflight, origin: ORIGIN } })
    expect(allowed.headers.get('access-control-allow-origin')).toBe(ORIGIN)
    expect(allowed.headers.get('vary')).toContain('Origin')
    const refused = await fetch('/v1/categories', { method: 'OPTIONS', headers: { ...preflight, origin: 'https://evil.example' } })
    expect(refused.headers.get('access-control-allow-origin')).toBeNull()
    const actual = await fetch('/v1/categories', { headers: { ...auth(), origin: 'https://evil.example' } })
    expect(actual.headers.get('access-control-allow-origin')).toBeNull()
  })

  it('lets a browser read the 400 and 431 of requests Node cannot parse, for an allowed origin only (attack14 C1)', async () => {
    const { origin } = await startSandbox({ corsOrigins: [ORIGIN] })
    const head = (from: string, extra: string) => `GET /v1/categories HTTP/1.1\r\nHost: x\r\nOrigin: ${from}\r\nAuthorization: Bearer k\r\n${extra}\r\n`
    const headerOf = (text: string, name: string) => new RegExp(`\\r\\n${name}: ([^\\r]*)`, 'i').exec(text)?.[1]
    // Content-Length with Transfer-Encoding: Node's 400 before any route.
    const malformed = await exchange(origin, [head(ORIGIN, 'Content-Length: 1\r\nTransfer-Encoding: chunked\r\n')])
    expect(malformed.status).toBe(400)
    expect(headerOf(malformed.text, 'access-control-allow-origin')).toBe(ORIGIN)
    expect(headerOf(malformed.text, 'access-control-expose-headers')).toContain('X-Request-Id')
    const tooLarge = await exchange(origin, [head(ORIGIN, `X-Big: ${'a'.repeat(20_000)}\r\n`)])
    expect(tooLarge.status).toBe(431)
    expect(headerOf(tooLarge.text, 'access-control-allow-origin')).toBe(ORIGIN)
    const other = await exchange(origin, [head('https://evil.example', 'Content-Length: 1\r\nTransfer-Encoding: chunked\r\n')])
    expect(other.status).toBe(400)
    expect(headerOf(other.text, 'access-control-allow-origin')).toBeUndefined()
    expect(headerOf(other.text, 'vary')).toBe('Origin')
  })

  it('answers a plain OPTIONS (not a preflight) with the API’s 405', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { method: 'OPTIONS', headers: auth() })
    expect(response.status).toBe(405)
    expect(response.headers.get('allow')).toBe('GET, HEAD, POST')
  })
})

describe('response headers and logs', () => {
  it.each([
    { name: 'an API answer', path: '/v1/categories' },
    { name: 'an API error', path: '/v1/nope' },
    { name: 'an admin answer', path: '/__sandbox/health' },
    { name: 'an unknown path', path: '/nope' },
  ])('sends X-Request-Id and nosniff on $name', async ({ path }) => {
    const { fetch } = await startSandbox()
    const response = await fetch(path, { headers: auth() })
    expect(response.headers.get('x-request-id')).toMatch(/^[\w.:-]{1,128}$/)
    expect(response.headers.get('x-content-type-options')).toBe('nosniff')
  })

  it('gives every request its own id', async () => {
    const { fetch } = await startSandbox()
    const ids = await Promise.all([1, 2, 3].map(async () => (await fetch('/v1/categories', { headers: auth() })).headers.get('x-request-id')))
    expect(new Set(ids).size).toBe(3)
  })

  it('echoes a plain incoming X-Request-Id and replaces an unsafe one', async () => {
    const { fetch } = await startSandbox()
    const kept = await fetch('/v1/categories', { headers: { ...auth(), 'x-request-id': 'trace-42' } })
    expect(kept.headers.get('x-request-id')).toBe('trace-42')
    const replaced = await fetch('/v1/categories', { headers: { ...auth(), 'x-request-id': 'bad id <script>' } })
    expect(replaced.headers.get('x-request-id')).not.toContain('script')
  })

  it('logs one line per request with method, path, status, time, tenant and request id', async () => {
    const { fetch, logs } = await startSandbox()
    const response = await fetch('/v1/categories?x=1', { headers: auth() })
    await response.text()
    await (await fetch('/nope')).text()
    await expect.poll(() => logs.length).toBe(2)
    expect(logs[0]).toEqual({
      time: expect.any(String),
      requestId: response.headers.get('x-request-id'),
      method: 'GET',
      path: '/v1/categories',
      status: 200,
      ms: expect.any(Number),
      tenant: tenantId('sandbox-dev-key'),
    })
    expect(logs[1]).toMatchObject({ path: '/nope', status: 404, tenant: null })
  })
})

describe('keep-alive', () => {
  it('keeps the connection after an admin 401 and 405 as after the API’s 401: the next request on it is answered (new-user trial P2)', async () => {
    const { origin } = await startSandbox()
    const get = (path: string, extra = '') => `GET ${path} HTTP/1.1\r\nHost: x\r\n${extra}\r\n`
    const answer = await exchange(origin, [
      get('/__sandbox/state'),
      `DELETE /__sandbox/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${DEV_API_KEY}\r\n\r\n`,
      get('/v1/categories'),
      get('/__sandbox/health'),
    ])
    expect(responsesOf(answer.text).map((response) => response.status)).toEqual([401, 405, 401, 200])
    expect(answer.text).not.toMatch(/\r\nconnection: close\r\n/i)
  })
})
