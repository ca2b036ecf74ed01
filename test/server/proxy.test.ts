/**
 * The validating proxy (`serve --proxy`, issue 22 point 2): requests pass on to a real service on
 * loopback (a sandbox, and a small divergent server), answers come back as the service gave them,
 * and where an exchange departs from the contract shows in the `Sandbox-Violations` header, the
 * tenant's journal and `GET /__sandbox/violations`. No mocked fetch: every hop is real HTTP.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { expectErrorBody } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'

/** A node:http server on loopback answering with `answer`; closed when the test ends. */
async function upstream(answer: (req: IncomingMessage, res: ServerResponse, body: string) => void): Promise<{ base: string; requests: { method: string; url: string; authorization: string | undefined; body: string }[] }> {
  const requests: { method: string; url: string; authorization: string | undefined; body: string }[] = []
  const server: Server = createServer((req, res) => {
    let body = ''
    req.setEncoding('utf8').on('data', (chunk: string) => (body += chunk))
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, body })
      answer(req, res, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return { base: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, requests }
}

const json = (res: ServerResponse, status: number, body: unknown, contentType = 'application/json') => {
  res.writeHead(status, { 'content-type': contentType }).end(typeof body === 'string' ? body : JSON.stringify(body))
}

const violationsOf = (response: Response): string[] => JSON.parse(response.headers.get('sandbox-violations') ?? '[]') as string[]

describe('validating proxy (serve --proxy)', () => {
  it('passes requests on to a conforming service and its answers back unchanged, with no violations', async () => {
    const real = await startSandbox({ apiKeys: ['partner-key'], scenario: 'default' })
    const proxy = await startSandbox({ proxy: `${real.origin}/v1` })
    const created = await fetch(`${proxy.origin}/v1/categories`, { method: 'POST', headers: auth('partner-key', true), body: JSON.stringify({ name: 'Hamsters', description: 'Small' }) })
    expect(created.status).toBe(201)
    expect(created.headers.get('sandbox-violations')).toBeNull()
    const body = (await jsonOf(created)) as { id: number; name: string }
    expect(body).toMatchObject({ name: 'Hamsters', description: 'Small' })
    // Stored by the real service, which lists it to its own clients.
    const listed = (await jsonOf(await real.fetch('/v1/categories', { headers: auth('partner-key') }))) as { id: number }[]
    expect(listed.map((category) => category.id)).toContain(body.id)
    const throughProxy = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('partner-key') })
    expect(await jsonOf(throughProxy)).toEqual(listed)
    // The service judges keys: a key it refuses gets its 401, which holds to the contract (and is journaled for that key).
    const refused = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('not-a-key') })
    expectErrorBody(await jsonOf(refused), 401, 'invalid_api_key')
    expect(refused.headers.get('sandbox-violations')).toBeNull()
    const invalid = await fetch(`${proxy.origin}/v1/categories`, { method: 'POST', headers: auth('partner-key', true), body: '{"name":""}' })
    expect(invalid.status).toBe(400)
    expect(invalid.headers.get('sandbox-violations')).toBeNull()
    const summary = (await jsonOf(await fetch(`${proxy.origin}/__sandbox/violations`, { headers: auth('partner-key') }))) as { proxy: string; exchanges: number; violating: number }
    expect(summary).toEqual({ proxy: `${real.origin}/v1`, exchanges: 3, violating: 0, violations: [] })
  })

  it('names each departure from the contract in the header, the journal and the summary', async () => {
    const { base } = await upstream((req, res, body) => {
      if (req.url === '/v1/categories' && req.method === 'GET') {
        if (req.headers.authorization !== 'Bearer k') return json(res, 401, { error: 'no' })
        return json(res, 200, [{ id: 1, name: 'Dogs' }, { name: 'no id' }])
      }
      if (req.url === '/v1/categories' && req.method === 'POST') {
        const sent = JSON.parse(body) as { name?: string }
        if (!sent.name) return json(res, 422, { code: 'invalid', message: 'name', status: 400 })
        return json(res, 201, { id: 7, name: `${sent.name}!` })
      }
      if (req.url === '/v1/store/orders') return json(res, 200, 'plain text', 'text/plain')
      return json(res, 404, { code: 'not_found', message: 'x', status: 404 })
    })
    const proxy = await startSandbox({ proxy: base })
    const list = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('k') })
    expect(list.status).toBe(200)
    expect(await jsonOf(list)).toEqual([{ id: 1, name: 'Dogs' }, { name: 'no id' }])
    expect(violationsOf(list)).toEqual([expect.stringMatching(/^response: 200 body \[1\]: id: /)])
    const unauthorized = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('wrong') })
    expect(unauthorized.status).toBe(401)
    expect(violationsOf(unauthorized)).toEqual(expect.arrayContaining([expect.stringMatching(/^response: 401 Error body: code: /), expect.stringMatching(/^response: 401 Error body: message: /)]))
    const unprocessable = await fetch(`${proxy.origin}/v1/categories`, { method: 'POST', headers: auth('k', true), body: '{}' })
    expect(violationsOf(unprocessable)).toEqual([
      'response: status 422 is not one createCategory answers (201, 400, 401, 409, 413, 500, 503)',
      'response: 422 Error body says status 400',
    ])
    const renamed = await fetch(`${proxy.origin}/v1/categories`, { method: 'POST', headers: { authorization: 'Bearer k', 'content-type': 'text/plain' }, body: '{"name":"Cats"}' })
    expect(renamed.status).toBe(201)
    expect(violationsOf(renamed)).toEqual(['request: Content-Type is "text/plain", the interface asks for application/json', 'response: 201 name is not the name sent'])
    // Orders are not shown by the interface: their answer is passed on unchecked.
    const orders = await fetch(`${proxy.origin}/v1/store/orders`, { headers: auth('k') })
    expect(await orders.text()).toBe('plain text')
    expect(orders.headers.get('sandbox-violations')).toBeNull()

    const journal = (await jsonOf(await fetch(`${proxy.origin}/__sandbox/requests`, { headers: auth('k') }))) as { response: { status: number }; violations?: string[]; request: { headers: Record<string, string> } }[]
    expect(journal.map((entry) => [entry.response.status, entry.violations?.length ?? 0])).toEqual([
      [200, 1],
      [422, 2],
      [201, 2],
      [200, 0],
    ])
    expect(journal.every((entry) => entry.request.headers['authorization'] === '[redacted]')).toBe(true)
    const summary = (await jsonOf(await fetch(`${proxy.origin}/__sandbox/violations`, { headers: auth('k') }))) as { exchanges: number; violating: number; violations: { operation: string; violation: string; count: number }[] }
    expect(summary.exchanges).toBe(4)
    expect(summary.violating).toBe(3)
    expect(summary.violations).toHaveLength(5)
    expect(summary.violations.map((row) => row.operation)).toEqual(expect.arrayContaining(['listCategories', 'createCategory']))
    // The wrong key has a journal of its own.
    const other = (await jsonOf(await fetch(`${proxy.origin}/__sandbox/violations`, { headers: auth('wrong') }))) as { violating: number }
    expect(other.violating).toBe(1)
  })

  it('passes the client’s own key on and never writes it in the request log', async () => {
    const seen = await upstream((_req, res) => json(res, 200, []))
    const proxy = await startSandbox({ proxy: seen.base })
    await fetch(`${proxy.origin}/v1/categories?page=2`, { headers: auth('secret-partner-key-123') })
    expect(seen.requests).toEqual([{ method: 'GET', url: '/v1/categories?page=2', authorization: 'Bearer secret-partner-key-123', body: '' }])
    expect(JSON.stringify(proxy.logs)).not.toContain('secret-partner-key-123')
  })

  it('answers 502 upstream_unavailable when the service cannot be reached, and 504 upstream_timeout within the request timeout when it does not answer', async () => {
    const gone = await upstream(() => undefined)
    const closedPort = gone.base
    // A port nothing listens on: the server's, once closed.
    const unreachable = await startSandbox({ proxy: closedPort.replace(/:\d+\//, ':1/') })
    const refused = await fetch(`${unreachable.origin}/v1/categories`, { headers: auth('k') })
    expectErrorBody(await jsonOf(refused), 502, 'upstream_unavailable')

    const silent = await upstream(() => undefined)
    const slow = await startSandbox({ proxy: silent.base, requestTimeoutMs: 600, headersTimeoutMs: 500 })
    const started = performance.now()
    const timedOut = await fetch(`${slow.origin}/v1/categories`, { headers: auth('k') })
    const waited = performance.now() - started
    const body = (await jsonOf(timedOut)) as { message: string }
    expectErrorBody(body, 504, 'upstream_timeout')
    expect(body.message).toBe('The real service did not answer within 600 ms')
    expect(waited).toBeLessThan(5_000)
    const summary = (await jsonOf(await fetch(`${slow.origin}/__sandbox/violations`, { headers: auth('k') }))) as { exchanges: number; violating: number }
    expect(summary).toMatchObject({ exchanges: 1, violating: 0 })
  })

  it('refuses a proxy URL that is not an http(s) base URL, naming the option', async () => {
    await expect(startSandbox({ proxy: 'ftp://staging.test/v1' })).rejects.toMatchObject({ code: 'invalid_option', message: expect.stringContaining('proxy') as unknown })
  })

  it('answers /__sandbox/violations with proxy null and nothing found when the sandbox answers from its own data', async () => {
    const { fetch: call } = await startSandbox()
    await call('/v1/categories', { headers: auth() })
    expect(await jsonOf(await call('/__sandbox/violations', { headers: auth() }))).toEqual({ proxy: null, exchanges: 1, violating: 0, violations: [] })
  })
})
