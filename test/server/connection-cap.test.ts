/**
 * The connection cap, and its share between keys (attack7 K3): one key's connections, delayed
 * requests or slow downloads never take a partner's place; the door holds within a low open-file
 * limit. Split from limits.test.ts so that the limits' files run side by side.
 */

import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { collect, exchange, openSocket } from '../support/raw-http.js'
import { CONNECTION_RESERVE } from '../../src/server/http-server.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { failOnUnhandledRejections } from '../support/unhandled-rejections.js'
import { CLI_BINARY } from '../support/sandbox-cli.js'
import { freePort } from '../support/redis-server.js'
import { REPLAYS } from '../support/test-scale.js'

/** @note Any unhandled rejection while these tests run is a finding: a client could stop the process. */
failOnUnhandledRejections()

const create = (fetch: (path: string, init?: RequestInit) => Promise<Response>, key: string, body: unknown) =>
  fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify(body) })

/** Sends one request on `socket` and resolves its status once its whole answer (by Content-Length) came; 0 when the socket ends first, -1 after 5 s. */
function ask(socket: Socket, head: string): Promise<number> {
  return new Promise<number>((resolve) => {
    setTimeout(() => resolve(-1), 5000).unref()
    let text = ''
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      const length = /content-length: (\d+)/i.exec(text)
      if (end !== -1 && length !== null && text.length >= end + 4 + Number(length[1])) {
        socket.off('data', onData)
        resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0))
      }
    }
    socket.on('data', onData)
    socket.once('close', () => resolve(0))
    socket.write(head)
  })
}

describe('the connection cap', () => {
  it('answers 503 over_capacity past the cap while health checks still get 200, then serves again', async () => {
    const { fetch, origin, server } = await startSandbox({ apiKeys: ['k', 'partner'], maxConnections: 10, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    // The server's open connections, gone once it has seen them close (after the cap's own count went down).
    const open = new Set<Socket>()
    server.on('connection', (socket: Socket) => {
      open.add(socket)
      socket.once('close', () => open.delete(socket))
    })
    // Requests that reached the server, counted before the cap judges them.
    let arrived = 0
    server.prependListener('request', () => arrived++)
    expect((await create(fetch, 'partner', { name: 'Partner data' })).status).toBe(201)
    server.closeIdleConnections()
    // @note Waited for, not slept on: on a loaded machine, the partner's keep-alive connection
    // closed later than 50 ms, or the tenth held request was read after the health check's
    // connection came in (200 ms), and a held request met the cap instead (503).
    await expect.poll(() => open.size, { timeout: 5000 }).toBe(0)
    arrived = 0
    const held = await Promise.all(Array.from({ length: 10 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 10_000))
    for (const socket of held) {
      // @note 4 s: with 1.5 s, under a loaded run (a CI's package checks beside it) the held requests were answered and
      // their connections closed before the refused one below came, which then got 200.
      socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nPrefer: delay=4000\r\nConnection: close\r\n\r\n')
    }
    await expect.poll(() => arrived, { timeout: 5000 }).toBe(10)
    const health = await globalThis.fetch(`${origin}/__sandbox/health`)
    expect(health.status).toBe(200)
    // The key holding every connection is refused another (attack7 K3: a partner now gets one, below).
    const refused = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('k') })
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe('1')
    expectErrorBody(await jsonOf(refused), 503, 'over_capacity')
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual(Array.from({ length: 10 }, () => 200))
    const list = (await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]
    expect(list.map((category) => category.name)).toContain('Partner data')
  })
})

/** Categories with the longest descriptions allowed: about 16 MB listed, more than loopback's buffers take from a client that does not read. */
const BIG_LIST = {
  name: 'big-list',
  version: '1.0.0',
  description: 'Categories with the longest descriptions allowed: about 16 MB listed.',
  seed: { categories: { generate: { count: 8000, name: 'Category {n}', description: `${'d'.repeat(1995)}{n}` } } },
}

/**
 * Starts the CLI under `prlimit --nofile=<files>` (the open-file limit), with the key `partner`,
 * killed when the test ends; resolves once it is running, with its port and what it said on stderr.
 */
async function serveWithOpenFiles(files: number): Promise<{ port: number; stderr: string }> {
  const port = await freePort()
  const child = spawn('/usr/bin/prlimit', [`--nofile=${files}:${files}`, process.execPath, CLI_BINARY, 'serve', '--port', String(port), '--api-key', 'partner', '--quiet'], { cwd: fileURLToPath(new URL('../../', import.meta.url)), stdio: ['ignore', 'pipe', 'pipe'] })
  onTestFinished(() => {
    child.kill('SIGKILL')
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  await vi.waitFor(() => expect(stdout).toContain('is running'), { timeout: 30_000, interval: 100 })
  return { port, stderr }
}

/** The partner's keep-alive connection to `origin`, its list (`list`, the request) answered 200 on it once. */
async function partnerKeepAlive(origin: string): Promise<{ kept: Socket; list: string }> {
  const list = 'GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\n\r\n'
  const kept = await openSocket(origin)
  kept.on('error', () => undefined)
  expect(await ask(kept, list)).toBe(200)
  return { kept, list }
}

/** The health probe and a partner's new connection are answered 200 at `origin`, and so is its keep-alive connection `kept`. */
async function expectPartnerIn(origin: string, kept: Socket, list: string): Promise<void> {
  const health = await exchange(origin, ['GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { end: false })
  expect(health.status).toBe(200)
  const fresh = await exchange(origin, [list.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')], { end: false })
  expect(fresh.status).toBe(200)
  expect(await ask(kept, list)).toBe(200)
}

describe('the connection cap, shared between keys (attack7 K3)', () => {
  /** A sandbox with a cap of 20, and a count of the requests that reached it. */
  const capped = async () => {
    const running = await startSandbox({ apiKeys: ['k', 'partner'], maxConnections: 20, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const arrived = { count: 0 }
    running.server.prependListener('request', () => arrived.count++)
    return { ...running, arrived }
  }
  const delayedCreate = (name: string) => {
    const body = JSON.stringify({ name })
    return `POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nPrefer: delay=2500\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`
  }
  const statuses = (answers: { status: number | undefined }[]) => answers.map((answer) => answer.status).sort()

  it('answers a partner 200 while one key holds every connection with delayed creates; the key gets 503 past its share, and the create cut for the partner is not stored', async () => {
    const { origin, fetch, arrived } = await capped()
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 8000))
    held.forEach((socket, i) => socket.write(delayedCreate(`held ${i}`)))
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(20)
    const partner = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    const own = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('k') })
    expect(own.status).toBe(503)
    expect(own.headers.get('retry-after')).toBe('1')
    expectErrorBody(await jsonOf(own), 503, 'over_capacity')
    const got = await Promise.all(answers)
    expect(statuses(got)).toEqual([...Array.from({ length: 19 }, () => 201), 503])
    const cut = got.find((answer) => answer.status === 503)!
    expect(cut.text).toContain('over_capacity')
    expect(cut.text.toLowerCase()).toContain('retry-after: 1')
    expect(cut.closed).toBe(true)
    // Nothing answered 503 was stored: the list holds exactly the 19 creates answered 201.
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth('k') }))) as { name: string }[]).map((category) => category.name)
    const created = got.flatMap((answer, i) => (answer.status === 201 ? [`held ${i}`] : []))
    expect(names.filter((name) => name.startsWith('held ')).sort()).toEqual(created.sort())
  })

  it.runIf(REPLAYS)('runs nothing pipelined behind a delayed request cut for a partner (503, Connection: close): the create behind it is not stored (attack40 F7)', async () => {
    const { origin, fetch, arrived } = await capped()
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 8000))
    const body = (i: number) => JSON.stringify({ name: `behind ${i}` })
    held.forEach((socket, i) =>
      socket.write(
        'GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nPrefer: delay=2500\r\n\r\n' +
          `POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: ${body(i).length}\r\n\r\n${body(i)}`,
      ),
    )
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBeGreaterThanOrEqual(20)
    expect((await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('partner') })).status).toBe(200)
    const got = await Promise.all(answers)
    const cut = got.flatMap((answer, i) => (answer.status === 503 ? [i] : []))
    expect(cut).toHaveLength(1)
    expect(got[cut[0]!]!.text.match(/HTTP\/1\.1 \d{3}/g)).toHaveLength(1)
    // Before: the create pipelined behind the cut request was stored, its client told only of the 503.
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth('k') }))) as { name: string }[]).map((category) => category.name)
    expect(names).not.toContain(`behind ${cut[0]}`)
  })

  it('answers a partner 200 while one key fires delayed requests and half-closes at once; the half-closed clients not cut still get their answers (F04)', async () => {
    const { origin, arrived } = await capped()
    const fired = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = fired.map((socket) => collect(socket, 8000))
    for (const socket of fired) {
      socket.end('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nPrefer: delay=2500\r\n\r\n')
    }
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(20)
    const own = await fetch(`${origin}/v1/categories`, { headers: auth('k') })
    expect(own.status).toBe(503)
    expect(own.headers.get('retry-after')).toBe('1')
    const partner = await fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    // One cut for the partner's connection (503, nothing run), the 19 others answered in full.
    expect(statuses(await Promise.all(answers))).toEqual([...Array.from({ length: 19 }, () => 200), 503])
  })

  it('answers a partner 200 while one key keeps every connection open and idle, closing one of them', async () => {
    const { origin, arrived } = await capped()
    const idle = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const closed = idle.map((socket) => new Promise<void>((resolve) => socket.once('close', () => resolve())))
    await Promise.all(
      idle.map((socket) => {
        socket.on('error', () => undefined)
        const answered = new Promise((resolve) => socket.once('data', resolve))
        socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n\r\n')
        return answered
      }),
    )
    expect(arrived.count).toBe(20)
    const partner = await fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    await Promise.race(closed)
    for (const socket of idle) socket.destroy()
  })

  it('cuts a key’s planned answers’ delays for another key past the cap, saying the plan was used; the other key’s requests are answered (attack9 C2)', async () => {
    const { origin, arrived } = await capped()
    const plan = await globalThis.fetch(`${origin}/__sandbox/answers`, { method: 'POST', headers: { ...auth('k', true), Connection: 'close' }, body: JSON.stringify({ operation: 'listCategories', status: 200, delayMs: 1500, times: 100 }) })
    expect(plan.status).toBe(201)
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 5000))
    for (const socket of held) socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nConnection: close\r\n\r\n')
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(21)
    // The partner's requests past the cap: each ends one of the key's planned delays (before, none: Node's hard cap was the only bound).
    const partner = await Promise.all(Array.from({ length: 5 }, () => globalThis.fetch(`${origin}/v1/categories`, { headers: { ...auth('partner'), Connection: 'close' } })))
    expect(partner.map((response) => response.status)).toEqual([200, 200, 200, 200, 200])
    const got = await Promise.all(answers)
    // Each partner request past the cap ended one (how many were past it depends on when the ended ones closed).
    const cuts = got.filter((answer) => answer.status === 503)
    expect(cuts.length).toBeGreaterThanOrEqual(1)
    expect(cuts.length + got.filter((answer) => answer.status === 200).length).toBe(20)
    for (const cut of cuts) expect(cut.text).toContain('its planned answer was used')
  })

  it('resets a key’s connections still sending their bodies for another key past the cap, storing nothing of them (attack9 C2, slow bodies)', async () => {
    const { origin, fetch, arrived } = await capped()
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 1500))
    for (const socket of held) {
      socket.on('error', () => undefined)
      socket.write('POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"na')
    }
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(20)
    const partner = await Promise.all(Array.from({ length: 5 }, () => globalThis.fetch(`${origin}/v1/categories`, { headers: { ...auth('partner'), Connection: 'close' } })))
    expect(partner.map((response) => response.status)).toEqual([200, 200, 200, 200, 200])
    const got = await Promise.all(answers)
    // Reset for the partner, with no answer (nothing of them ran; before, none); the rest still waiting for their bodies.
    expect(got.filter((answer) => answer.closed && answer.status === undefined).length).toBeGreaterThanOrEqual(1)
    expect(got.every((answer) => answer.status === undefined)).toBe(true)
    const seed = (await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as unknown[]
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth('k') }))).toEqual(seed)
  })

  it('resets a key’s connections whose long answers their clients do not take, for another key past the cap (attack9 C4)', async () => {
    const { origin, server } = await startSandbox({ apiKeys: ['k', 'partner'], scenario: BIG_LIST, maxConnections: 3, requestTimeoutMs: 60_000, headersTimeoutMs: 2000 })
    // The server's side of each connection: stuck once Node's buffer for its answer is full.
    const serverSide: Socket[] = []
    server.on('connection', (socket: Socket) => serverSide.push(socket))
    const held = await Promise.all(Array.from({ length: 3 }, () => openSocket(origin)))
    for (const socket of held) {
      socket.on('error', () => undefined)
      socket.pause()
      socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n\r\n')
    }
    // Each answer is under way and stuck: its client reads nothing.
    const open = () => new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)))
    await expect.poll(open, { timeout: 5000 }).toBe(3)
    // @note Until the answers fill Node's buffers (a connection is reset only once its client is seen not to take its
    // answer): a fixed 300 ms, then 1 s, was too short under loaded runs (load 12 on 2 cores; a full run beside two
    // attackers, stop 45), the partner then served past the cap and no connection reset.
    await expect.poll(() => serverSide.filter((socket) => socket.writableNeedDrain).length, { timeout: 30_000 }).toBe(3)
    const partner = await globalThis.fetch(`${origin}/__sandbox/state`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    // One of the key's is reset for it (before, none was ended until the request timeout, here 60 s): 2 of the key's and
    // the partner's stay. Under loaded runs the close took past 2 s (load 6.8 on 2 cores), past 5 s (load 12), past 10 s
    // beside a reviewer's runs (stop 39) and past 15 s in a fresh-clone CI beside an attacker's Redis loads (stop 40):
    // given 30 s, half the request timeout.
    await expect.poll(open, { timeout: 30_000 }).toBe(3)
    for (const socket of held) socket.destroy()
  })

  it.runIf(REPLAYS)('ends another key’s delayed request before a partner’s slow download when there are more keys than the cap', async () => {
    const { origin, server } = await startSandbox({ apiKeys: ['partner', 'k1', 'k2', 'k3'], scenario: BIG_LIST, maxConnections: 3, requestTimeoutMs: 20_000, headersTimeoutMs: 2000 })
    const open = () => new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)))
    // The keys' tenants made first (seeding 8,000 categories takes a while): their requests below go straight to their delays.
    for (const key of ['k1', 'k2', 'k3']) {
      const made = await globalThis.fetch(`${origin}/v1/categories`, { method: 'POST', headers: { ...auth(key, true), Connection: 'close' }, body: JSON.stringify({ name: 'first' }) })
      expect(made.status).toBe(201)
    }
    await expect.poll(open, { timeout: 5000 }).toBe(0)
    // The partner's download, not read for now (a slow reader), is the oldest key's connection.
    const download = await openSocket(origin)
    download.pause()
    const downloaded = collect(download, 15_000)
    download.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nConnection: close\r\n\r\n')
    await expect.poll(open, { timeout: 5000 }).toBe(1)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const delayed = await Promise.all(['k1', 'k2'].map(() => openSocket(origin)))
    const answers = delayed.map((socket) => collect(socket, 5000))
    const body = JSON.stringify({ name: 'delayed' })
    delayed.forEach((socket, i) =>
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k${i + 1}\r\nContent-Type: application/json\r\nPrefer: delay=1500\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
    )
    await expect.poll(open, { timeout: 5000 }).toBe(3)
    const created = await globalThis.fetch(`${origin}/v1/categories`, { method: 'POST', headers: { ...auth('k3', true), Connection: 'close' }, body: JSON.stringify({ name: 'k3' }) })
    expect(created.status).toBe(201)
    download.resume()
    const got = await downloaded
    expect(got.status).toBe(200)
    expect(got.text.length).toBeGreaterThan(16_000_000)
    expect(statuses(await Promise.all(answers))).toContain(503)
  })

  it('never resets a partner’s only upload for a crowd of more keys than the cap, each holding one slow body (attack10 C1)', async () => {
    const keys = Array.from({ length: 4 }, (_, i) => `c${i}`)
    const { origin, fetch } = await startSandbox({ apiKeys: ['partner', ...keys], maxConnections: 3, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const body = JSON.stringify({ name: 'uploaded slowly' })
    const upload = await openSocket(origin)
    const uploaded = collect(upload, 5000)
    upload.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`)
    const crowd = await Promise.all(keys.map(() => openSocket(origin)))
    for (const [i, socket] of crowd.entries()) {
      socket.on('error', () => undefined)
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${keys[i]!}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    upload.write(body.slice(5))
    const answer = await uploaded
    // Before: the partner's upload, the oldest key's, was reset for the crowd.
    expect(answer.status).toBe(201)
    for (const socket of crowd) socket.destroy()
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)
    expect(names).toContain('uploaded slowly')
  })

  it('counts tokens the sandbox does not accept as one key: a crowd of invented tokens never resets a partner’s uploads (attack11 K1)', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: ['partner'], maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const uploads = await Promise.all([0, 1].map(() => openSocket(origin)))
    const answers = uploads.map((socket) => collect(socket, 5000))
    const bodies = [0, 1].map((i) => JSON.stringify({ name: `uploaded ${i}` }))
    uploads.forEach((socket, i) =>
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${bodies[i]!.length}\r\n\r\n${bodies[i]!.slice(0, 5)}`),
    )
    const crowd = await Promise.all(Array.from({ length: 10 }, () => openSocket(origin)))
    for (const [i, socket] of crowd.entries()) {
      socket.on('error', () => undefined)
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer invented-${i}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`)
      await new Promise((resolve) => setTimeout(resolve, 30))
    }
    uploads.forEach((socket, i) => socket.write(bodies[i]!.slice(5)))
    // Before: each invented token was a key, more keys than the cap, and the partner's second upload was beyond its share of 1.
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual([201, 201])
    for (const socket of crowd) socket.destroy()
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)
    expect(names).toEqual(expect.arrayContaining(['uploaded 0', 'uploaded 1']))
  })

  it('lets a partner and the health probe in while cap + reserve connections send nothing, ending the oldest silent one for each (attack11 K3, C5)', async () => {
    // @note Headers within 8 s: with 3 s, on a loaded run the second oldest was answered 408 before the health check came for it.
    const { origin } = await startSandbox({ apiKeys: ['partner'], maxConnections: 4, requestTimeoutMs: 10_000, headersTimeoutMs: 8000 })
    const silent: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE; i++) silent.push(await openSocket(origin))
    const closed = silent.map((socket) => collect(socket, 12_000))
    // Silent for a second: a connection younger than that may be a partner's whose request is on its way.
    await new Promise((resolve) => setTimeout(resolve, 1100))
    // Before: Node closed every new connection past cap + reserve before reading it.
    const partner = await exchange(origin, ['GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nConnection: close\r\n\r\n'], { end: false })
    expect(partner.status).toBe(200)
    const health = await exchange(origin, ['GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { end: false })
    expect(health.status).toBe(200)
    for (const socket of silent) socket.destroy()
    // The two ended were the oldest, each closed with nothing sent to it.
    const ended = (await Promise.all(closed.slice(0, 2))).map((answer) => ({ closed: answer.closed, text: answer.text }))
    expect(ended).toEqual([
      { closed: true, text: '' },
      { closed: true, text: '' },
    ])
  })

  it('answers a browser partner’s preflights past the cap while uploads fill it, and gives its refusals the CORS headers (attack12 K4)', async () => {
    const origin = 'https://app.example.com'
    const { origin: server } = await startSandbox({ apiKeys: ['partner'], corsOrigins: [origin], maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 3000 })
    const crowd: Socket[] = []
    for (let i = 0; i < 10; i++) {
      const socket = await openSocket(server)
      socket.on('error', () => undefined)
      // The partner's own uploads under way (a keyless body is dropped as it comes, its connection soon idle).
      socket.write('POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{')
      crowd.push(socket)
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    // Before: 503 over_capacity, with no Access-Control-Allow-Origin: the app's fetch failed as a CORS error.
    const preflight = await exchange(server, [`OPTIONS /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: ${origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,content-type\r\nConnection: close\r\n\r\n`], { end: false })
    expect(preflight.status).toBe(204)
    expect(preflight.text.toLowerCase()).toContain(`access-control-allow-origin: ${origin}`)
    // A request of the key past its share, none of its connections idle, is still refused, readably.
    const refused = await exchange(server, [`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nOrigin: ${origin}\r\nConnection: close\r\n\r\n`], { end: false })
    expect(refused.status).toBe(503)
    expect(refused.text.toLowerCase()).toContain(`access-control-allow-origin: ${origin}`)
    for (const socket of crowd) socket.destroy()
  })

  it('ends the oldest of connections that sent nothing, however young, before a partner’s idle keep-alive connection or the newcomer (attack14 D1)', async () => {
    const { origin } = await startSandbox({ apiKeys: ['partner'], maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 3000 })
    const { kept, list } = await partnerKeepAlive(origin)
    // Silent connections up to the hard limit, all younger than a second (a flood reopening them within it).
    const silent: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE - 1; i++) {
      const socket = await openSocket(origin)
      socket.on('error', () => undefined)
      silent.push(socket)
    }
    // Before: the partner's idle keep-alive connection was closed for the newcomers (its next request reset).
    await expectPartnerIn(origin, kept, list)
    kept.destroy()
    for (const socket of silent) socket.destroy()
  })

  it('lets a partner’s new connection and the health probe in, and keeps its keep-alive connection, while a crowd of invented tokens (--any-key) each send one request and idle (attack16 K1)', async () => {
    const { origin } = await startSandbox({ anyKey: true, maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 3000 })
    const { kept, list } = await partnerKeepAlive(origin)
    // Up to the hard limit: each its own token, one answered request, then idle.
    const crowd: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE - 1; i++) {
      const socket = await openSocket(origin)
      socket.on('error', () => undefined)
      crowd.push(socket)
      await ask(socket, `GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer invented-${i}\r\n\r\n`)
    }
    // The partner goes on using its keep-alive connection meanwhile.
    expect(await ask(kept, list)).toBe(200)
    // Before: the newcomer, silent for the instant before its request was read, was the one ended.
    // And the partner's keep-alive connection, the oldest, was not ended for them.
    await expectPartnerIn(origin, kept, list)
    kept.destroy()
    for (const socket of crowd) socket.destroy()
  })

  it.runIf(REPLAYS && existsSync('/usr/bin/prlimit'))('keeps its door within a low open-file limit (ulimit -n 200), saying so at start, so that silent connections never keep health out (attack14 D2)', async () => {
    const { port, stderr } = await serveWithOpenFiles(200)
    expect(stderr).toContain('the process may open 200 files (ulimit -n)')
    const origin = `http://127.0.0.1:${port}`
    const silent: Socket[] = []
    for (let i = 0; i < 300; i++) {
      const socket = connect(port, '127.0.0.1')
      socket.on('error', () => undefined)
      silent.push(socket)
    }
    await new Promise((resolve) => setTimeout(resolve, 1500))
    // Before: accept() failed (EMFILE) from about 190 connections, long before the door at 1,256: every new connection closed.
    const health = await exchange(origin, ['GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { end: false })
    expect(health.status).toBe(200)
    for (const socket of silent) socket.destroy()
  })

  it.runIf(existsSync('/usr/bin/prlimit'))('serves more than one connection under ulimit -n 64, keeping for other files what is open at start and a margin, not a fixed 64 (attack16 L1)', async () => {
    const { port, stderr } = await serveWithOpenFiles(64)
    // Before: "it serves 1 connections (2 open at most)".
    const served = Number(/it serves (\d+) connections/.exec(stderr)?.[1])
    expect(served).toBeGreaterThanOrEqual(10)
    // As many connections as it serves, each answered, none refused.
    const origin = `http://127.0.0.1:${port}`
    const sockets = await Promise.all(Array.from({ length: served }, () => openSocket(origin)))
    const answers = await Promise.all(sockets.map((socket) => {
      const answer = collect(socket, 5000)
      socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nConnection: close\r\n\r\n')
      return answer
    }))
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200))
  })

  it('lets a partner in while cap + reserve keys (--any-key) each send a body slowly, resetting the body arriving longest (attack11 K3)', async () => {
    const { origin, fetch } = await startSandbox({ anyKey: true, maxConnections: 4, requestTimeoutMs: 8000, headersTimeoutMs: 3000 })
    const slow: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE; i++) {
      const socket = await openSocket(origin)
      socket.on('error', () => undefined)
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer slow-${i}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`)
      slow.push(socket)
    }
    const first = collect(slow[0]!, 8000)
    await new Promise((resolve) => setTimeout(resolve, 200))
    const body = JSON.stringify({ name: 'in at last' })
    const partner = await exchange(origin, [`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`], { end: false })
    expect(partner.status).toBe(201)
    // The body arriving longest was reset: nothing of it ran, nothing answered.
    expect(await first).toMatchObject({ closed: true, text: '' })
    for (const socket of slow) socket.destroy()
    expect(((await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)).toContain('in at last')
  })

  it('cuts a delay of another key for a new key when there are more keys than the cap, each holding its share of 1 (attack9 C3)', async () => {
    const keys = Array.from({ length: 6 }, (_, i) => `c${i}`)
    const { origin } = await startSandbox({ apiKeys: [...keys, 'partner'], maxConnections: 5, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const held = await Promise.all(keys.map(() => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 5000))
    held.forEach((socket, i) => socket.write(`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${keys[i]!}\r\nPrefer: delay=1500\r\nConnection: close\r\n\r\n`))
    const partner = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    const got = await Promise.all(answers)
    // Before: every key was within its share of 1, so nothing was cut past the cap.
    expect(got.filter((answer) => answer.status === 503).length).toBeGreaterThanOrEqual(1)
    expect(got.every((answer) => answer.status === 200 || answer.status === 503)).toBe(true)
  })

  it.each([
    { monitors: 0, what: 'stop 41’s CI flood' },
    { monitors: 1, what: 'attack51 F3: another client asks health after it, on its own connection' },
  ])('keeps the health probe’s keep-alive connection while keys past the cap need room: its next check is answered ($what)', async ({ monitors }) => {
    const { origin, server } = await startSandbox({ apiKeys: ['a', 'b', 'c'], maxConnections: 2, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    let arrived = 0
    server.prependListener('request', () => arrived++)
    const probe = await openSocket(origin)
    probe.on('error', () => undefined)
    const check = 'GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n'
    expect(await ask(probe, check)).toBe(200)
    // Before (one sheltered): the monitor's check took the shelter from the probe.
    const others = await Promise.all(Array.from({ length: monitors }, () => openSocket(origin)))
    for (const other of others) {
      other.on('error', () => undefined)
      expect(await ask(other, check)).toBe(200)
    }
    arrived -= monitors
    // Two keys wait out delays past the cap; a third key's request, within its share, needs room.
    const held = await Promise.all(['a', 'b'].map(() => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 5000))
    held.forEach((socket, i) => socket.write(`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${['a', 'b'][i]!}\r\nPrefer: delay=1500\r\nConnection: close\r\n\r\n`))
    await expect.poll(() => arrived, { timeout: 5000 }).toBe(3)
    const third = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('c') })
    expect(third.status).toBe(200)
    // Before: the probe's idle connection, its key's only one, was the first closed for the third key: its next check failed.
    expect(await ask(probe, check)).toBe(200)
    // Delayed requests were cut for the newcomers instead (503 over_capacity), as for any key past its share.
    expect((await Promise.all(answers)).map((answer) => answer.status)).toContain(503)
    probe.destroy()
    for (const other of others) other.destroy()
  })

  it('lets a new key in at the tenant cap while the other keys wait out delays: a delayed create is cut (503 over_capacity), not waited for', async () => {
    const { origin, fetch, sandbox } = await startSandbox({ anyKey: true, maxTenants: 3 })
    const fired = await Promise.all(
      ['a', 'b', 'c'].map(async (key) => {
        const socket = await openSocket(origin)
        const answer = collect(socket, 30_000)
        const body = JSON.stringify({ name: `delayed ${key}` })
        socket.end(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nPrefer: delay=20000\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
        return { answer }
      }),
    )
    // The three tenants are in use, each with its create waiting out its delay.
    await expect.poll(() => [...sandbox.tenants.live()].filter(([, tenant]) => tenant.busy).length, { timeout: 5000 }).toBe(3)
    // Before: the new key waited 10 s for a tenant to leave, then 503 tenant_capacity.
    const partner = await fetch('/v1/categories', { headers: auth('partner') })
    expect(partner.status).toBe(200)
    const first = await Promise.race(fired.map(({ answer }) => answer))
    expect(first.status).toBe(503)
    expect(first.text).toContain('over_capacity')
  })
})
