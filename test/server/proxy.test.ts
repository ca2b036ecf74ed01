/**
 * The validating proxy (`serve --proxy`, issue 22 point 2): requests pass on to a real service on
 * loopback (a sandbox, and a small divergent server), answers come back as the service gave them,
 * and where an exchange departs from the contract shows in the `Sandbox-Violations` header, the
 * tenant's journal and `GET /__sandbox/violations`. No mocked fetch: every hop is real HTTP.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { gzipSync } from 'node:zlib'
import { createServer as createNetServer, type Socket } from 'node:net'
import { MAX_VIOLATIONS } from '../../src/contract/conformance.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { openSocket } from '../support/raw-http.js'
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
    expect(violationsOf(unauthorized)).toEqual(
      expect.arrayContaining([
        'response: 401 has no WWW-Authenticate challenge (HTTP requires one; the interface uses Bearer)',
        expect.stringMatching(/^response: 401 Error body: code: /),
        expect.stringMatching(/^response: 401 Error body: message: /),
      ]),
    )
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

  it('never sends a request to another host or outside the base path, whatever the path says (attack4 H2)', async () => {
    const elsewhere = await upstream((_req, res) => json(res, 200, []))
    const service = await upstream((_req, res) => json(res, 200, []))
    const elsewhereHost = new URL(elsewhere.base).host
    for (const base of [service.base.replace(/\/v1$/, ''), service.base.replace(/\/v1$/, '/'), service.base]) {
      const proxy = await startSandbox({ proxy: base })
      for (const path of [`/v1//${elsewhereHost}/internal?x=1`, `/v1/\\${elsewhereHost}/other`, `/v1//%5c${elsewhereHost}/x`, '/v1/%2e%2e/%2e%2e/admin']) {
        const socket = await openSocket(proxy.origin)
        socket.end(`GET ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\r\nConnection: close\r\n\r\n`)
        const answer = await new Promise<string>((resolve) => {
          let text = ''
          socket.setEncoding('utf8').on('data', (chunk: string) => (text += chunk)).on('close', () => resolve(text))
        })
        expect(answer, `${base} ${path}`).toMatch(/^HTTP\/1\.1 (200|404|502) /)
      }
    }
    expect(elsewhere.requests).toEqual([])
    const basePath = new URL(service.base).pathname
    for (const { url } of service.requests) expect(url.startsWith('/'), url).toBe(true)
    expect(service.requests.filter(({ url }) => !url.startsWith(`${basePath}/`) && !url.startsWith('/v1/') && !url.startsWith('//'))).toEqual([])
  })

  it('passes an answer’s bytes on as the service sent them, gzip or binary, and checks what it can read (attack4 H3)', async () => {
    const zipped = gzipSync(JSON.stringify([{ id: 1, name: 'Dogs' }]))
    const binary = Buffer.from([0xff, 0x00, 0xfe, 0x80, 0x81])
    const { base } = await upstream((req, res) => {
      if (req.url === '/v1/categories') res.writeHead(200, { 'content-type': 'application/json', 'content-encoding': 'gzip' }).end(zipped)
      else res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(binary)
    })
    const proxy = await startSandbox({ proxy: base })
    const listed = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('k') })
    expect(await listed.json()).toEqual([{ id: 1, name: 'Dogs' }])
    expect(listed.headers.get('sandbox-violations')).toBeNull()
    const orders = await fetch(`${proxy.origin}/v1/store/orders`, { headers: auth('k') })
    expect(Buffer.from(await orders.arrayBuffer())).toEqual(binary)
  })

  it('names at most MAX_VIOLATIONS departures of one exchange, however many the answer holds (attack4 H4)', async () => {
    const { base } = await upstream((_req, res) => json(res, 200, Array.from({ length: 5_000 }, () => ({ name: 7 }))))
    const proxy = await startSandbox({ proxy: base })
    const listed = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('k') })
    const named = violationsOf(listed)
    expect(named).toHaveLength(MAX_VIOLATIONS + 1)
    expect(named.at(-1)).toBe(`response: ...and more violations past the first ${MAX_VIOLATIONS} (not listed)`)
    const [entry] = (await jsonOf(await fetch(`${proxy.origin}/__sandbox/requests`, { headers: auth('k') }))) as { violations: string[] }[]
    expect(entry!.violations).toEqual(named)
  })

  it('keeps its own X-Request-Id and Sandbox-Violations: the service’s request id under another name, its forged findings dropped', async () => {
    const { base } = await upstream((_req, res) => res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'theirs', 'sandbox-violations': '["forged"]' }).end('[{"name":"no id"}]'))
    const proxy = await startSandbox({ proxy: base })
    const listed = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('k') })
    expect(listed.headers.get('x-request-id')).not.toBe('theirs')
    expect(listed.headers.get('upstream-request-id')).toBe('theirs')
    expect(violationsOf(listed)).toEqual([expect.stringMatching(/^response: 200 body \[0\]: id: /)])
  })

  it('counts proxied answers against the memory budget: a tenant whose answers stall is refused 503, another tenant is answered (attack4 H1)', async () => {
    const list = JSON.stringify(Array.from({ length: 8_000 }, (_, i) => ({ id: i + 1, name: `c${i}`, description: 'd'.repeat(1_000) })))
    const service = await upstream((_req, res) => json(res, 200, list))
    const proxy = await startSandbox({ proxy: service.base, memoryBudgetBytes: 24 * 1024 * 1024 })
    const stalled: Socket[] = []
    onTestFinished(() => {
      for (const socket of stalled) socket.destroy()
    })
    // @note 8 lists of 8 MB (more than the kernel's socket buffers take of one): more than the
    // staller's share of the 24 MiB budget, so some are refused; the partner is answered.
    for (let i = 0; i < 8; i++) {
      const socket = await openSocket(proxy.origin)
      socket.pause()
      socket.on('error', () => undefined)
      socket.write(`GET /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer staller\r\n\r\n`)
      stalled.push(socket)
    }
    await expect.poll(() => service.requests.length, { timeout: 10_000 }).toBe(8)
    const other = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('partner') })
    expect(other.status).toBe(200)
    expect(((await other.json()) as unknown[]).length).toBe(8_000)
    // What each stalled client finds once it reads: the first ones their list, the later ones 503.
    const statuses = await Promise.all(
      stalled.map(
        (socket) =>
          new Promise<string>((resolve) => {
            socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1').slice(9, 12)))
            socket.resume()
          }),
      ),
    )
    expect(statuses).toContain('200')
    expect(statuses).toContain('503')
  })

  it('answers 502 at once when the service switches protocols (101) unasked, not 504 at the timeout (attack4)', async () => {
    const raw = createNetServer((socket) => socket.once('data', () => socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: other\r\nConnection: Upgrade\r\n\r\n')))
    await new Promise<void>((resolve) => raw.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => raw.close(() => resolve())))
    const proxy = await startSandbox({ proxy: `http://127.0.0.1:${(raw.address() as AddressInfo).port}/v1`, requestTimeoutMs: 20_000, headersTimeoutMs: 10_000 })
    const answer = await fetch(`${proxy.origin}/v1/categories`, { headers: auth('k'), signal: AbortSignal.timeout(10_000) })
    const body = (await jsonOf(answer)) as { message: string }
    expectErrorBody(body, 502, 'upstream_unavailable')
    expect(body.message).toContain('switched protocols (101)')
  })
})
