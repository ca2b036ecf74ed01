/**
 * On SQLite the server sends a list as its client takes it, a page read from the store at a time
 * (attack8 B1, B2): the body is the same JSON text as the whole list's, chunked past one page; it
 * shows the tenant's state when the list started, whatever is written while it is sent; and no
 * whole list is held, so nothing is cut or refused for another key's long read: a partner
 * reading slowly gets its whole list while other keys ask for theirs again and again.
 */
import type { Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import type { ScenarioInput } from '../../src/scenario/scenario-loader.js'
import { openSocket } from '../support/raw-http.js'
import { startSandbox, useStore } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'
import { CONTROL_LIST, heldNow } from '../support/long-lists.js'
import { FULL_TESTS, REPLAYS } from '../support/test-scale.js'

const SQLITE = STORES.find((kind) => kind.name === 'sqlite')!
const KEY = 'reader-key'
const COUNT = 8000
/** About 16 MB of JSON: more than loopback's socket buffers take from a client that does not read. */
const BIG: ScenarioInput = {
  name: 'big-list',
  version: '1.0.0',
  description: 'Categories with the longest descriptions allowed.',
  seed: { categories: { generate: { count: COUNT, name: 'Category {n} "é"', description: `${'d'.repeat(1990)}\\{n}` } } },
}
/** About 1.2 MB of JSON: many pieces, sent at once to a client that reads. */
const MID: ScenarioInput = {
  name: 'mid-list',
  version: '1.0.0',
  description: 'A list of many pieces.',
  seed: { categories: { generate: { count: 600, name: 'Category {n} "é"', description: `${'d'.repeat(1990)}\\{n}` } } },
}


/** One create for each key, so that its list is read from the database (a key that never wrote is listed from the seed in memory). */
async function storeLists(fetch: (path: string, init?: RequestInit) => Promise<Response>, keys: readonly string[]): Promise<void> {
  for (const key of keys) {
    // Closed after: no connection left idle in fetch's pool while a test waits on its stallers (one
    // reused as the server closes it is reset under the next request). The partner's list below was
    // still reset twice in full runs under load (read ECONNRESET): not found yet, see its message.
    const created = await fetch('/v1/categories', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' }, body: '{"name":"Stored"}' })
    expect(created.status).toBe(201)
  }
}

const listRequest = (key: string, id: string) => `GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nX-Request-Id: ${id}\r\n\r\n`

/** The head and the body (chunked, or by its Content-Length) of one answer, once `socket` has given all of it; no body when it closed before. */
function chunkedAnswer(socket: Socket, read: (socket: Socket) => Buffer | null = (s) => s.read() as Buffer | null): Promise<{ head: string; body: string | undefined }> {
  return new Promise((resolve) => {
    let bytes = Buffer.alloc(0)
    const parse = (): { head: string; body: string | undefined } | undefined => {
      const end = bytes.indexOf('\r\n\r\n')
      if (end === -1) return undefined
      const head = bytes.subarray(0, end).toString('latin1')
      // A whole answer (as before lists were sent in pieces) is read by its Content-Length.
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)?.[1]
      if (length !== undefined) return bytes.length < end + 4 + Number(length) ? undefined : { head, body: bytes.subarray(end + 4, end + 4 + Number(length)).toString('utf8') }
      const pieces: Buffer[] = []
      let at = end + 4
      for (;;) {
        const line = bytes.indexOf('\r\n', at)
        if (line === -1) return undefined
        const size = Number.parseInt(bytes.subarray(at, line).toString('latin1'), 16)
        if (bytes.length < line + 2 + size + 2) return undefined
        if (size === 0) return { head, body: Buffer.concat(pieces).toString('utf8') }
        pieces.push(bytes.subarray(line + 2, line + 2 + size))
        at = line + 2 + size + 2
      }
    }
    const take = () => {
      for (let chunk = read(socket); chunk !== null; chunk = read(socket)) bytes = Buffer.concat([bytes, chunk])
      const answer = parse()
      if (answer !== undefined) {
        socket.off('readable', take)
        resolve(answer)
      }
    }
    socket.on('readable', take)
    socket.once('close', () => resolve({ head: bytes.subarray(0, Math.max(0, bytes.indexOf('\r\n\r\n'))).toString('latin1'), body: undefined }))
    take()
  })
}

describe('lists sent as their clients take them (sqlite store)', () => {
  useStore(SQLITE)

  it('sends a long list chunked, the same JSON text as the whole list, and journals its start and whole length', async () => {
    const { fetch } = await startSandbox({ apiKeys: [KEY], scenario: MID })
    const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }
    for (const name of ['Tab\there', 'Quote " and \\ backslash', 'Control \u0001 and \u{1F600}']) {
      expect((await fetch('/v1/categories', { method: 'POST', headers, body: JSON.stringify({ name, description: `${name} too` }) })).status).toBe(201)
    }
    const state = (await (await fetch('/__sandbox/state', { headers })).json()) as { categories: unknown[] }
    const response = await fetch('/v1/categories', { headers: { ...headers, 'x-request-id': 'long-list' } })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('application/json')
    expect(response.headers.get('transfer-encoding')).toBe('chunked')
    expect(response.headers.get('content-length')).toBeNull()
    const text = await response.text()
    expect(state.categories).toHaveLength(600 + 3)
    expect(text).toBe(JSON.stringify(state.categories))
    const journal = (await (await fetch('/__sandbox/requests', { headers })).json()) as { requestId?: string; response: { status: number; truncated?: { size: number } } }[]
    const entry = journal.find((candidate) => candidate.requestId === 'long-list')
    expect(entry?.response.status).toBe(200)
    expect(entry?.response.truncated).toEqual({ size: text.length })
  })

  it('sends a long list to an HTTP/1.0 client (no chunked encoding) as its body, ending the connection after it', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: [KEY], scenario: MID })
    const expected = await (await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEY}` } })).text()
    const socket = await openSocket(origin)
    const chunks: Buffer[] = []
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    await new Promise((resolve) => {
      socket.once('close', resolve)
      socket.write(`GET /v1/categories HTTP/1.0\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${KEY}\r\n\r\n`)
    })
    const text = Buffer.concat(chunks)
    const end = text.indexOf('\r\n\r\n')
    expect(text.subarray(0, end).toString('latin1')).toMatch(/^HTTP\/1\.1 200 /)
    expect(text.subarray(end + 4).toString('utf8')).toBe(expected)
  })

  it.runIf(REPLAYS)('holds a few pieces, not the list, for each client that asks for a long list and reads nothing', async () => {
    const { origin, logs, fetch } = await startSandbox({ apiKeys: [KEY], scenario: BIG })
    const headers = { authorization: `Bearer ${KEY}` }
    await storeLists(fetch, [KEY])
    const listBytes = (await (await fetch('/v1/categories', { headers })).arrayBuffer()).byteLength
    logs.length = 0
    const before = heldNow()
    const sockets: Socket[] = []
    for (let i = 0; i < 8; i++) {
      const socket = await openSocket(origin)
      socket.pause()
      sockets.push(socket)
      socket.write(listRequest(KEY, `unread-${i}`))
    }
    await expect.poll(() => sockets.every((socket) => socket.readableLength > 0), { timeout: 10_000 }).toBe(true)
    await new Promise((resolve) => setTimeout(resolve, 500))
    const grown = heldNow() - before
    for (const socket of sockets) socket.destroy()
    // Before: each answer was the whole list (16 MB), held until written out.
    expect(listBytes).toBeGreaterThan(15_000_000)
    expect(grown).toBeLessThan(8 * 1024 * 1024)
  })

  it('answers HEAD of a long list with the headers of its GET (sent in pieces: no Content-Length), and no body, without making the list (attack80 F1, F2)', async () => {
    const { fetch, logs } = await startSandbox({ apiKeys: [KEY], scenario: MID })
    const headers = { authorization: `Bearer ${KEY}` }
    const get = await fetch('/v1/categories', { headers })
    const body = await get.arrayBuffer()
    expect(body.byteLength).toBeGreaterThan(100_000)
    expect(get.headers.get('content-length')).toBeNull()
    const head = await fetch('/v1/categories', { method: 'HEAD', headers })
    expect(head.status).toBe(200)
    expect(head.headers.get('content-type')).toBe(get.headers.get('content-type'))
    expect(head.headers.get('content-length')).toBeNull()
    expect((await head.arrayBuffer()).byteLength).toBe(0)
    // Before: made whole for its Content-Length (a 7.8 MB list held the event loop up to 1 s, for each HEAD).
    expect(logs.at(-1)).toMatchObject({ method: 'HEAD', status: 200 })
  })

  it('sends the admin state of a long tenant as its client takes it, in pieces, the same state as its list (attack80 F2)', async () => {
    const { fetch } = await startSandbox({ apiKeys: [KEY], scenario: MID })
    const headers = { authorization: `Bearer ${KEY}` }
    const list = (await (await fetch('/v1/categories', { headers })).json()) as unknown[]
    const state = await fetch('/__sandbox/state', { headers })
    expect(state.status).toBe(200)
    // Before: made whole (a 7.8 MB state held the event loop up to 1 s), sent with its Content-Length.
    expect(state.headers.get('content-length')).toBeNull()
    expect(state.headers.get('content-type')).toBe('application/json; charset=utf-8')
    const body = (await state.json()) as Record<string, unknown>
    expect(Object.keys(body)).toEqual(['tenant', 'scenario', 'categories', 'pets', 'orders', 'journalSize'])
    expect(body['categories']).toEqual(list)
    expect(body['scenario']).toMatchObject({ name: MID.name })
    const head = await fetch('/__sandbox/state', { method: 'HEAD', headers })
    expect(head.status).toBe(200)
    expect((await head.arrayBuffer()).byteLength).toBe(0)
  })

  it('answers HEAD of a list of one piece with the Content-Length of its GET', async () => {
    const { fetch } = await startSandbox({ apiKeys: [KEY] })
    const headers = { authorization: `Bearer ${KEY}` }
    const body = await (await fetch('/v1/categories', { headers })).arrayBuffer()
    const head = await fetch('/v1/categories', { method: 'HEAD', headers })
    expect(head.status).toBe(200)
    expect(Number(head.headers.get('content-length'))).toBe(body.byteLength)
  })

  // In the full run only (each sends a 16 MB list).
  it.runIf(REPLAYS).each([
    { what: 'a create, a reset to another scenario and a create there', scenario: { scenario: 'empty' } },
    { what: 'a create, a reset to the same scenario and a create', scenario: undefined },
  ])('sends the state the list started on, though $what are made while it is sent', async ({ scenario }) => {
    const { origin, fetch } = await startSandbox({ apiKeys: [KEY], scenario: BIG })
    const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }
    expect((await fetch('/v1/categories', { method: 'POST', headers, body: '{"name":"Before the list"}' })).status).toBe(201)
    const before = (await (await fetch('/__sandbox/state', { headers })).json()) as { categories: unknown[] }
    const socket = await openSocket(origin)
    socket.pause()
    socket.write(listRequest(KEY, 'mid-write'))
    // Its start is out: the socket's buffers hold some megabytes of it, the rest is not read yet.
    await expect.poll(() => socket.readableLength, { timeout: 10_000 }).toBeGreaterThan(0)
    expect((await fetch('/v1/categories', { method: 'POST', headers, body: '{"name":"During the list"}' })).status).toBe(201)
    const reset = await fetch('/__sandbox/reset', { method: 'POST', headers, ...(scenario === undefined ? {} : { body: JSON.stringify(scenario) }) })
    expect(reset.status).toBe(200)
    expect((await fetch('/v1/categories', { method: 'POST', headers, body: '{"name":"After the reset"}' })).status).toBe(201)
    const answer = await chunkedAnswer(socket)
    socket.destroy()
    expect(answer.head).toMatch(/^HTTP\/1\.1 200 /)
    expect(answer.body).toBe(JSON.stringify(before.categories))
    // The next list shows the state now.
    const after = (await (await fetch('/v1/categories', { headers })).json()) as { name: string }[]
    expect(after.at(-1)?.name).toBe('After the reset')
    expect(after.some((category) => category.name === 'During the list' || category.name === 'Before the list')).toBe(false)
  })

  it.runIf(FULL_TESTS)('disconnects a client that takes nothing of a long list for the request timeout', async () => {
    const { origin } = await startSandbox({ apiKeys: [KEY], scenario: BIG, headersTimeoutMs: 1000, requestTimeoutMs: 1000 })
    const socket = await openSocket(origin)
    socket.pause()
    socket.on('error', () => undefined)
    socket.write(listRequest(KEY, 'stalled'))
    await expect.poll(() => socket.readableLength, { timeout: 10_000 }).toBeGreaterThan(0)
    // Nothing taken for the request timeout: the server ends the connection. Read after, the list stops short.
    await new Promise((resolve) => setTimeout(resolve, 3000))
    const answer = await chunkedAnswer(socket)
    expect(answer.head).toMatch(/^HTTP\/1\.1 200 /)
    expect(answer.body).toBeUndefined()
  })

  it.runIf(FULL_TESTS)('breaks off a list whose state is two resets old, rather than send another state’s rows', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: [KEY], scenario: BIG })
    const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }
    // A create puts the tenant's list in the database (a tenant that never wrote is listed from its seed in memory).
    expect((await fetch('/v1/categories', { method: 'POST', headers, body: '{"name":"Stored"}' })).status).toBe(201)
    const socket = await openSocket(origin)
    socket.pause()
    socket.on('error', () => undefined)
    socket.write(listRequest(KEY, 'two-resets-old'))
    await expect.poll(() => socket.readableLength, { timeout: 10_000 }).toBeGreaterThan(0)
    expect((await fetch('/__sandbox/reset', { method: 'POST', headers, body: '{"scenario":"empty"}' })).status).toBe(200)
    expect((await fetch('/__sandbox/reset', { method: 'POST', headers, body: '{"initial":true}' })).status).toBe(200)
    const answer = await chunkedAnswer(socket)
    socket.destroy()
    expect(answer.head).toMatch(/^HTTP\/1\.1 200 /)
    expect(answer.body).toBeUndefined()
  })

  it.runIf(REPLAYS)('answers a partner’s long list while six other keys’ long lists are out unread (attack8 B2)', async () => {
    const keys = Array.from({ length: 6 }, (_, i) => `staller-${i}`)
    const partner = 'partner-key'
    // Six 26 MB lists unread, against a budget of less than three: before, the partner's long list got 503 over_capacity.
    const { origin, logs, fetch } = await startSandbox({ apiKeys: [...keys, partner], scenario: CONTROL_LIST, memoryBudgetBytes: 64 * 1024 * 1024 })
    await storeLists(fetch, [...keys, partner])
    logs.length = 0
    const sockets: Socket[] = []
    for (const [i, key] of keys.entries()) {
      const socket = await openSocket(origin)
      socket.pause()
      socket.on('error', () => undefined)
      sockets.push(socket)
      socket.write(listRequest(key, `stalled-${i}`))
    }
    await expect.poll(() => logs.length, { timeout: 20_000 }).toBe(keys.length)
    for (let i = 0; i < 3; i++) {
      const listed = await fetch('/v1/categories', { headers: { authorization: `Bearer ${partner}` } }).catch((error: unknown) => {
        throw new Error(`the partner's list ${i + 1} of 3 failed (${i === 0 ? 'a new connection' : 'the connection of the list before'}); the log: ${JSON.stringify(logs.map((entry) => entry.status))}`, { cause: error })
      })
      expect(listed.status).toBe(200)
      expect(((await listed.json()) as unknown[]).length).toBe(1001)
    }
    for (const socket of sockets) socket.destroy()
    expect(logs.slice(0, keys.length).map((entry) => entry.status)).toEqual(keys.map(() => 200))
  })

  it.runIf(FULL_TESTS)(
    'gives a partner reading slowly its whole list while six other keys drop unread lists and ask again every 1.7 s (attack8 B1)',
    async () => {
      const renewing = Array.from({ length: 6 }, (_, i) => `renewer-${i}`)
      const partner = 'partner-key'
      const { origin, logs, fetch } = await startSandbox({ apiKeys: [...renewing, partner], scenario: CONTROL_LIST, memoryBudgetBytes: 64 * 1024 * 1024 })
      await storeLists(fetch, [...renewing, partner])
      const expected = JSON.stringify(((await (await fetch('/__sandbox/state', { headers: { authorization: `Bearer ${partner}` } })).json()) as { categories: unknown[] }).categories)
      const slow = await openSocket(origin)
      slow.pause()
      slow.write(listRequest(partner, 'slow-partner'))
      // 16 KB every 300 ms for 8 s (53 KB/s, the finding's slowest reader: the kernel's buffers take
      // megabytes at once, then the server sees nothing for seconds, as a staller's), then faster, to end soon.
      let budget = 0
      const started = Date.now()
      const reader = setInterval(() => void (budget += Date.now() - started < 8000 ? 16 * 1024 : 1024 * 1024), 300)
      const download = chunkedAnswer(slow, (socket) => {
        if (budget <= 0) return null
        const chunk = (socket.read(Math.min(budget, socket.readableLength)) ?? null) as Buffer | null
        if (chunk !== null) budget -= chunk.length
        return chunk
      })
      const pump = setInterval(() => slow.emit('readable'), 100)
      let renewals = 0
      let open: Socket[] = []
      const renew = async () => {
        for (const socket of open) socket.destroy()
        open = []
        for (const key of renewing) {
          const socket = await openSocket(origin).catch(() => undefined)
          if (socket === undefined) continue
          socket.pause()
          socket.on('error', () => undefined)
          open.push(socket)
          socket.write(listRequest(key, `renewed-${renewals}`))
        }
        renewals++
      }
      await renew()
      const renewer = setInterval(() => void renew(), 1700)
      const answer = await download
      clearInterval(renewer)
      clearInterval(reader)
      clearInterval(pump)
      for (const socket of [...open, slow]) socket.destroy()
      expect(answer.head).toMatch(/^HTTP\/1\.1 200 /)
      expect(answer.body).toBe(expected)
      expect(renewals).toBeGreaterThan(4)
      // Every renewed list was answered too (none refused for another's).
      const renewed = logs.filter((entry) => entry.requestId.startsWith('renewed-'))
      expect(renewed.length).toBeGreaterThan(4 * renewing.length)
      expect(new Set(renewed.map((entry) => entry.status))).toEqual(new Set([200]))
    },
    120_000,
  )
})
