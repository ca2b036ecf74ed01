/**
 * Hostile HTTP against the running sandbox, over raw sockets on 127.0.0.1: random bytes, cut and
 * oversized bodies, deep nesting, huge and duplicated headers, invalid UTF-8, bad hosts, slow
 * clients. After each, the server still answers and no tenant's data changed.
 */
import { createServer, type IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, expect, it } from 'vitest'
import { readNodeBody } from '../../src/node-bridge/node-request.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { collect, exchange, openSocket, seededBytes } from '../support/raw-http.js'
import { jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'

const KEYS = ['tenant-a', 'tenant-b'] as const
const LIMIT = 1024 * 1024
const utf8 = (text: string) => Buffer.from(text, 'utf8')

/** A request head; `Host` first unless given, each header a `Name: value` line. */
function head(method: string, path: string, headers: readonly string[] = [], host = 'Host: 127.0.0.1'): string {
  return `${method} ${path} HTTP/1.1\r\n${[host, ...headers].filter((line) => line !== '').map((line) => `${line}\r\n`).join('')}\r\n`
}
const authA = `Authorization: Bearer ${KEYS[0]}`
const json = 'Content-Type: application/json'
const post = (body: string | Uint8Array, headers: readonly string[] = [authA, json]) => [
  head('POST', '/v1/categories', [...headers, `Content-Length: ${Buffer.byteLength(body)}`]),
  body,
]
const deepArrays = `${'['.repeat(100_000)}${']'.repeat(100_000)}`

/** Starts a sandbox with two tenants, each holding one category of its own. */
async function twoTenants(options: Parameters<typeof startSandbox>[0] = {}): Promise<RunningSandbox> {
  const sandbox = await startSandbox({ apiKeys: [...KEYS], ...options })
  for (const key of KEYS) {
    const response = await sandbox.fetch('/v1/categories', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: `Only ${key}` }),
    })
    expect(response.status).toBe(201)
  }
  return sandbox
}

/** Every tenant's categories, as the API and the admin API show them. */
async function stateOf(sandbox: RunningSandbox): Promise<unknown[]> {
  const states = []
  for (const key of KEYS) {
    const headers = { authorization: `Bearer ${key}` }
    const list = await sandbox.fetch('/v1/categories', { headers })
    expect(list.status).toBe(200)
    const state = await sandbox.fetch('/__sandbox/state', { headers })
    expect(state.status).toBe(200)
    states.push(await jsonOf(list), ((await jsonOf(state)) as { categories: unknown }).categories)
  }
  return states
}

interface HostileCase {
  readonly name: string
  readonly chunks: readonly (string | Uint8Array)[]
  /** The status of the answer, or 'closed' when the server must just close the connection. */
  readonly expected: number | 'closed'
  /** Keep the writing side open: the server must answer and close the connection by itself. */
  readonly keepOpen?: boolean
}

const CASES: HostileCase[] = [
  { name: '4 KiB of random bytes', chunks: [seededBytes(6, 4096)], expected: 400 },
  { name: 'random bytes after a valid request line', chunks: ['POST /v1/categories HTTP/1.1\r\n', seededBytes(7, 4096)], expected: 400 },
  { name: 'a request line without a version', chunks: ['GET /v1/categories\r\n\r\n'], expected: 401 },
  { name: 'a NUL byte in a header value', chunks: [head('GET', '/v1/categories', [authA, 'X-Nul: a\0b'])], expected: 400 },
  { name: 'a body cut short of its Content-Length', chunks: [head('POST', '/v1/categories', [authA, json, 'Content-Length: 100']), '{"name":"cut"}'], expected: 'closed' },
  {
    name: 'a chunked body cut inside a chunk',
    chunks: [head('POST', '/v1/categories', [authA, json, 'Transfer-Encoding: chunked']), 'e\r\n{"name":"cut"}\r\n20\r\n{"desc'],
    expected: 'closed',
  },
  {
    name: 'a body declared over the limit',
    chunks: [head('POST', '/v1/categories', [authA, json, `Content-Length: ${LIMIT * 2}`]), 'x'.repeat(64 * 1024)],
    expected: 413,
    keepOpen: true,
  },
  {
    name: 'a chunked body over the limit',
    chunks: [
      head('POST', '/v1/categories', [authA, json, 'Transfer-Encoding: chunked']),
      ...Array.from({ length: 20 }, () => `10000\r\n${'x'.repeat(0x10000)}\r\n`),
      '0\r\n\r\n',
    ],
    expected: 413,
  },
  {
    name: 'an admin body declared over the limit',
    chunks: [head('PUT', '/__sandbox/scenario', [authA, json, `Content-Length: ${LIMIT * 2}`]), 'x'.repeat(64 * 1024)],
    expected: 413,
    keepOpen: true,
  },
  { name: 'arrays nested 100,000 deep', chunks: post(deepArrays), expected: 400 },
  { name: 'a name nested 100,000 deep', chunks: post(`{"name":${deepArrays}}`), expected: 400 },
  {
    name: 'a scenario name nested 100,000 deep',
    chunks: [head('PUT', '/__sandbox/scenario', [authA, json, `Content-Length: ${deepArrays.length + 9}`]), `{"name":${deepArrays}}`],
    expected: 400,
  },
  { name: 'a 100 KB header', chunks: [head('GET', '/v1/categories', [authA, `X-Big: ${'a'.repeat(100_000)}`])], expected: 431 },
  {
    name: '1,000 duplicated headers',
    chunks: [head('GET', '/v1/categories', [authA, ...Array.from({ length: 1000 }, () => 'X-Dup: a'), 'Connection: close'])],
    expected: 200,
  },
  // Past Node's default of 1,000 headers the rest were dropped unread: the key after them too, answered 401
  // missing_api_key (attack36 F2). The size limit counts names and values (its 21 KB were 7.5 KB of them): past it,
  // 431, before as now (a guard).
  {
    name: '1,500 headers before the key',
    chunks: [head('GET', '/v1/categories', [...Array.from({ length: 1500 }, () => 'X-Dup: a'), authA, 'Connection: close'])],
    expected: 200,
  },
  { name: '2,100 empty headers (within the 16 KiB limit)', chunks: [head('GET', '/v1/categories', [authA, ...Array.from({ length: 2100 }, () => 'X-E:'), 'Connection: close'])], expected: 400 },
  {
    name: '2,500 short headers (20 KB of names and values, past the 16 KiB limit)',
    chunks: [head('GET', '/v1/categories', [authA, ...Array.from({ length: 2500 }, (_, i) => `X${i % 10}: aaaaaa`), 'Connection: close'])],
    expected: 431,
  },
  {
    name: 'two different Content-Length headers',
    chunks: [head('POST', '/v1/categories', [authA, json, 'Content-Length: 14', 'Content-Length: 2']), '{"name":"two"}'],
    expected: 400,
  },
  {
    name: 'Content-Length with Transfer-Encoding',
    chunks: [head('POST', '/v1/categories', [authA, json, 'Content-Length: 5', 'Transfer-Encoding: chunked']), '0\r\n\r\n'],
    expected: 400,
  },
  { name: 'a negative Content-Length', chunks: [head('POST', '/v1/categories', [authA, json, 'Content-Length: -1'])], expected: 400 },
  { name: 'invalid UTF-8 in the body', chunks: post(Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xc3, 0x28, 0x22, 0x7d])), expected: 400 },
  { name: 'overlong UTF-8 in the body', chunks: post(Buffer.concat([utf8('{"name":"'), Buffer.from([0xc0, 0xaf]), utf8('"}')])), expected: 400 },
  {
    name: 'invalid UTF-8 in the Authorization value',
    chunks: [Buffer.from(head('GET', '/v1/categories', [`${authA}\xff\xfe`, 'Connection: close']), 'latin1')],
    expected: 401,
  },
  { name: 'invalid UTF-8 in the path', chunks: [Buffer.from(head('GET', '/v1/categories\xff', [authA]), 'latin1')], expected: 400 },
  { name: 'a malformed percent escape in the path', chunks: [head('GET', '/v1/%ff%fe', [authA, 'Connection: close'])], expected: 404 },
  ...['a b', '[', 'a@b', 'x:99999', ''].map((host) => ({
    name: `Host: ${JSON.stringify(host)}`,
    chunks: [head('GET', '/v1/categories', [authA, 'Connection: close'], `Host: ${host}`)],
    expected: 200,
  })),
  { name: 'HTTP/1.0 without a Host', chunks: [`GET /v1/categories HTTP/1.0\r\n${authA}\r\n\r\n`], expected: 200 },
]

/** The JSON body after an answer's head. */
function bodyOf(text: string): unknown {
  const start = text.indexOf('\r\n\r\n')
  return JSON.parse(start === -1 ? '' : text.slice(start + 4))
}

describe('the sandbox server under hostile HTTP', () => {
  it.each([
    { name: 'a method with an @ in it', chunks: ['G@T /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'], status: 400, code: 'bad_request' },
    // Before: Node's own bare 400, no body and no log line (trial5 P8).
    { name: 'an HTTP/1.1 request without a Host header', chunks: [`GET /v1/categories HTTP/1.1\r\n${authA}\r\n\r\n`], status: 400, code: 'bad_request' },
    { name: 'a 100 KB header', chunks: [head('GET', '/v1/categories', [authA, `X-Big: ${'a'.repeat(100_000)}`])], status: 431, code: 'headers_too_large' },
    { name: 'Expect: something', chunks: [head('GET', '/v1/categories', [authA, 'Expect: 200-ok'])], status: 417, code: 'expectation_failed' },
  ])('answers $name with our Error body ($status $code), as every error is answered', async ({ chunks, status, code }) => {
    const sandbox = await twoTenants()
    const answer = await exchange(sandbox.origin, chunks)
    expect(answer.status).toBe(status)
    expect(answer.text).toMatch(/\r\nContent-Type: application\/json/i)
    expectErrorBody(bodyOf(answer.text), status, code)
  })

  it.each([
    { name: 'a request of 2,100 headers (400)', first: head('GET', '/v1/categories', [authA, ...Array.from({ length: 2100 }, () => 'X-E:')]), status: 400 },
    { name: 'an Expect it cannot meet (417)', first: head('GET', '/v1/categories', [authA, 'Expect: teapot']), status: 417 },
    { name: "the client's own Connection: close", first: head('GET', '/v1/categories', [authA, 'Connection: close']), status: 200 },
    // Node closes after an answer of no length (a list, written in pieces) to HTTP/1.0 keep-alive, saying so itself
    // (review39 R4: the create behind it ran, its answer dropped with the socket).
    { name: 'a list to HTTP/1.0 keep-alive', first: `GET /v1/categories HTTP/1.0\r\nHost: 127.0.0.1\r\n${authA}\r\nConnection: keep-alive\r\n\r\n`, status: 200 },
    // Node reads nothing after a request asking for an upgrade (attack42 F5: answered with keep-alive, the create behind
    // it got no answer until the keep-alive timeout, ~6 s, and the client was never told it was not run).
    { name: 'a request asking for an upgrade (Connection: Upgrade)', first: head('GET', '/v1/categories', [authA, 'Connection: Upgrade', 'Upgrade: websocket']), status: 200 },
  ])('runs nothing pipelined behind $name answered with Connection: close, a create or a reset (attack40 F7)', async ({ first, status }) => {
    const sandbox = await twoTenants()
    const before = await stateOf(sandbox)
    const reset = '{"scenario":"empty"}'
    const behind = [...post('{"name":"ghost"}'), head('POST', '/__sandbox/reset', [authA, json, `Content-Length: ${reset.length}`]), reset]
    const answer = await exchange(sandbox.origin, [[first, ...behind].join('')], { end: false, waitMs: 3000 })
    expect(answer.status).toBe(status)
    expect(answer.text).toMatch(/\r\nConnection: close\r\n/i)
    // One answer, then the close: the client was told of nothing else.
    expect(answer.text.match(/HTTP\/1\.[01] \d{3}/g)).toHaveLength(1)
    expect(answer.closed).toBe(true)
    // Before: the create behind it was stored (201 in the journal), or the reset emptied the tenant, the client told nothing.
    expect(await stateOf(sandbox)).toEqual(before)
  })

  it.each(CASES)('survives $name and keeps every tenant’s data', async ({ chunks, expected, keepOpen = false }) => {
    const sandbox = await twoTenants()
    const before = await stateOf(sandbox)
    const answer = await exchange(sandbox.origin, chunks, { end: !keepOpen })
    if (expected === 'closed' || keepOpen) {
      expect(answer.closed).toBe(true)
    }
    if (expected !== 'closed') {
      expect(answer.status, answer.text.slice(0, 200)).toBe(expected)
      expect(answer.text).toMatch(/\r\nX-Content-Type-Options: nosniff\r\n/i)
      expect(answer.text).toMatch(/\r\nX-Request-Id: [\w.:-]+\r\n/i)
      if (expected >= 400) expectErrorBody(bodyOf(answer.text), expected)
    }
    expect(await stateOf(sandbox)).toEqual(before)
  })

  it.each([
    ['bytes that are not HTTP after a whole create', (body: string) => [...post(body), 'NOT HTTP\r\n\r\n']],
    ['a body one byte longer than its Content-Length, on Connection: close', (body: string) => [head('POST', '/v1/categories', [authA, json, 'Connection: close', `Content-Length: ${body.length}`]), `${body}}`]],
  ])('answers a create first when %s, so its client never sees a stored create as failed (trial finding)', async (_, request) => {
    const { origin, fetch, logs } = await startSandbox({ apiKeys: [...KEYS] })
    const before = logs.length
    const body = '{"name":"Once"}'
    const answer = await exchange(origin, request(body), { end: false, waitMs: 2000 })
    expect(answer.text).toMatch(/^HTTP\/1\.1 201 /)
    expect(answer.text).toContain('"name":"Once"')
    const listed = (await jsonOf(await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEYS[0]}` } }))) as { name: string }[]
    expect(listed.filter((category) => category.name === 'Once')).toHaveLength(1)
    expect(logs.slice(before).map((entry) => entry.status)[0]).toBe(201)
  })

  it('answers every pipelined request ahead of bytes that are not HTTP, then the 400 (review finding: two answers ahead dropped the create’s)', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: [...KEYS] })
    const body = '{"name":"Pipelined"}'
    const answer = await exchange(
      origin,
      [
        head('GET', '/v1/categories', [authA, 'Prefer: delay=300']),
        head('GET', '/v1/categories', [authA]),
        ...post(body, [authA, json, 'Prefer: delay=100']),
        'NOT HTTP\r\n\r\n',
      ],
      { end: false, waitMs: 2500 },
    )
    expect([...answer.text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => match[1])).toEqual(['200', '200', '201', '400'])
    const listed = (await jsonOf(await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEYS[0]}` } }))) as { name: string }[]
    expect(listed.filter((category) => category.name === 'Pipelined')).toHaveLength(1)
  })

  it('holds nothing more for bytes that keep coming after a parse error while an answer is still made (review finding: a listener and a chunk per error)', async () => {
    const { origin, server } = await startSandbox({ apiKeys: [...KEYS] })
    let errors = 0
    server.prependListener('clientError', () => errors++)
    const socket = await openSocket(origin)
    const answer = collect(socket, 4000)
    socket.write(head('GET', '/v1/categories', [authA, 'Prefer: delay=800']) + 'NOT HTTP\r\n')
    for (let i = 0; i < 30; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10))
      if (!socket.destroyed) socket.write(`garbage ${i}\r\n`)
    }
    const { text } = await answer
    // The socket is read no further once refused: Node reports one error, not one per chunk.
    expect(errors).toBe(1)
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => match[1])).toEqual(['200', '400'])
  })

  it('lets go of every connection it refuses: past the hard cap (cap + 256) of malformed requests and a client that sends nothing, a partner is still served (attack9 C1)', async () => {
    const sandbox = await startSandbox({ apiKeys: [KEYS[0]], maxConnections: 4, headersTimeoutMs: 1000, requestTimeoutMs: 1000 })
    // @note 1 s, not 0.3: under a loaded npm test a garbage line took longer than 0.3 s to arrive (a 408 among the 400s).
    const open = () => new Promise<number>((resolve) => sandbox.server.getConnections((_error, count) => resolve(count)))
    // Each reads its 400 and closes, 20 at a time: 300 of them, past 4 + 256.
    for (let round = 0; round < 15; round++) {
      const answers = await Promise.all(Array.from({ length: 20 }, () => exchange(sandbox.origin, ['GARBAGE\r\n\r\n'])))
      expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 400))
    }
    const silent = await exchange(sandbox.origin, [], { end: false, waitMs: 3000 })
    expect(silent.status).toBe(408)
    await expect.poll(open, { timeout: 5000 }).toBe(0)
    const partner = await sandbox.fetch('/v1/categories', { headers: { Authorization: `Bearer ${KEYS[0]}` } })
    expect(partner.status).toBe(200)
  })

  it('answers two Authorization headers as at most one tenant, never with the other’s data', async () => {
    const sandbox = await twoTenants()
    const before = await stateOf(sandbox)
    const answer = await exchange(sandbox.origin, [
      head('GET', '/v1/categories', [authA, `Authorization: Bearer ${KEYS[1]}`, 'Connection: close']),
    ])
    expect([200, 401]).toContain(answer.status)
    expect(answer.text).not.toContain(`Only ${KEYS[1]}`)
    expect(await stateOf(sandbox)).toEqual(before)
  })

  it('keeps serving others while a client trickles its headers, then cuts that client off', async () => {
    const sandbox = await twoTenants({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const before = await stateOf(sandbox)
    const slow = await openSocket(sandbox.origin)
    const cutOff = collect(slow, 15_000)
    slow.write(`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\n${authA}\r\nX-Slow: `)
    const trickle = setInterval(() => (slow.destroyed ? clearInterval(trickle) : slow.write('a')), 100)
    try {
      for (let i = 0; i < 20; i++) {
        const response = await sandbox.fetch('/v1/categories', { headers: { authorization: `Bearer ${KEYS[1]}` } })
        expect(response.status).toBe(200)
        await response.arrayBuffer()
      }
      const answer = await cutOff
      expect(answer.closed).toBe(true)
      expect(answer.status).toBe(408)
      expect(answer.text).toMatch(/\r\nX-Content-Type-Options: nosniff\r\n/i)
      expectErrorBody(bodyOf(answer.text), 408, 'request_timeout')
    } finally {
      clearInterval(trickle)
    }
    expect(await stateOf(sandbox)).toEqual(before)
  })

  it('keeps serving others while a client trickles a create body, then cuts it off without storing it', async () => {
    const sandbox = await twoTenants({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const before = await stateOf(sandbox)
    const body = JSON.stringify({ name: 'trickled', description: 'x'.repeat(200) })
    const slow = await openSocket(sandbox.origin)
    const cutOff = collect(slow, 15_000)
    slow.write(head('POST', '/v1/categories', [authA, json, `Content-Length: ${body.length}`]))
    let sent = 0
    const trickle = setInterval(() => (slow.destroyed || sent >= body.length ? clearInterval(trickle) : slow.write(body[sent++]!)), 100)
    try {
      for (let i = 0; i < 20; i++) {
        const response = await sandbox.fetch('/v1/categories', { headers: { authorization: `Bearer ${KEYS[1]}` } })
        expect(response.status).toBe(200)
        await response.arrayBuffer()
      }
      const answer = await cutOff
      expect(answer.closed).toBe(true)
      expect(sent).toBeLessThan(body.length)
    } finally {
      clearInterval(trickle)
    }
    expect(await stateOf(sandbox)).toEqual(before)
  })
})

describe('reading a body', () => {
  it('says the body was cut off when its client left before it was asked for (review finding: it waited for good)', async () => {
    let left: IncomingMessage | undefined
    const server = createServer((req) => req.once('close', () => (left = req)))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const socket = await openSocket(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
      socket.write('POST /v1/categories HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"na')
      await new Promise((resolve) => setTimeout(resolve, 50))
      socket.destroy()
      await expect.poll(() => left).toBeDefined()
      const result = await Promise.race([readNodeBody(left!, 1024), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 500))])
      expect(result).toMatchObject({ ok: false, code: 'invalid_body', gone: true })
    } finally {
      server.close()
    }
  })
})
