/**
 * One connection is one ordered conversation (issue 20): pipelined requests are handled in the
 * order they came, at most PIPELINE_DEPTH wait behind a slow one, and a client that half-closes
 * after its request still gets its answer; a connection with more than PIPELINE_LIMIT waiting is
 * closed, and a CONNECT is refused after the answers owed. Raw sockets against a real server, on
 * every store.
 */
import { execFile } from 'node:child_process'
import type { IncomingMessage } from 'node:http'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'
import { PIPELINE_DEPTH, PIPELINE_LIMIT } from '../../src/server/conversation.js'
import { collect, exchange, openSocket, responsesOf, type Parsed } from '../support/raw-http.js'
import { jsonOf, startSandbox, useStore } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'
import { REPLAYS, size } from '../support/test-scale.js'

const KEY = 'order-key'
const authz = `Authorization: Bearer ${KEY}`
const json = 'Content-Type: application/json'

/** A request's bytes; `Host` first, each header a `Name: value` line. */
function request(method: string, path: string, headers: readonly string[] = [], body = ''): string {
  const lines = ['Host: 127.0.0.1', authz, ...headers, ...(body === '' ? [] : [json, `Content-Length: ${Buffer.byteLength(body)}`])]
  return `${method} ${path} HTTP/1.1\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n${body}`
}

/** Sends `text` on one connection, kept open, and parses what comes back until `count` answers are in (at most `waitMs`). */
async function converse(origin: string, text: string, count: number, waitMs = 5000): Promise<Parsed[]> {
  const socket = await openSocket(origin)
  let received = ''
  socket.on('data', (chunk: Buffer) => {
    received += chunk.toString('latin1')
    if (responsesOf(received).length >= count) socket.destroy()
  })
  const answer = collect(socket, waitMs)
  socket.write(text)
  await answer
  return responsesOf(received)
}

/** The status of every answer in `text` (HEAD answers carry a Content-Length and no body). */
const statusesOf = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((match) => Number(match[1]))

const names = (body: string) => (JSON.parse(body) as { name: string }[]).map((category) => category.name)

describe.each(STORES)('one connection, one ordered conversation ($name store)', (kind) => {
  useStore(kind)

  it('lists a category created by the request before it on the same connection (issue 20 F07)', async () => {
    const { origin } = await startSandbox({ apiKeys: [KEY] })
    const [created, listed] = await converse(origin, request('POST', '/v1/categories', ['Prefer: delay=100'], '{"name":"First"}') + request('GET', '/v1/categories'), 2)
    expect(created?.status).toBe(201)
    expect(listed?.status).toBe(200)
    expect(names(listed!.body)).toContain('First')
  })

  it('applies a scenario switch before the create that follows it on the same connection (issue 20 F07)', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: [KEY] })
    const [switched, created, listed] = await converse(
      origin,
      request('PUT', '/__sandbox/scenario', [], '{"name":"empty"}') + request('POST', '/v1/categories', [], '{"name":"After switch"}') + request('GET', '/v1/categories'),
      3,
    )
    expect(switched?.status).toBe(200)
    expect(created?.status).toBe(201)
    // The empty scenario's first id, not the old scenario's next one.
    expect(JSON.parse(created!.body)).toEqual({ id: 1, name: 'After switch' })
    expect(names(listed!.body)).toEqual(['After switch'])
    const after = (await jsonOf(await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEY}` } }))) as { name: string }[]
    expect(after.map((category) => category.name)).toEqual(['After switch'])
  })

  it('answers pipelined creates in order with ids in order, however long each takes (issue 20 F07)', async () => {
    const { origin } = await startSandbox({ apiKeys: [KEY], scenario: 'empty' })
    const delays = [120, 0, 60, 0, 30]
    const answers = await converse(origin, delays.map((delay, i) => request('POST', '/v1/categories', [`Prefer: delay=${delay}`], JSON.stringify({ name: `C${i}` }))).join(''), delays.length)
    const created = answers.map((response) => JSON.parse(response.body) as { id: number; name: string })
    expect(created).toEqual(delays.map((_, i) => ({ id: i + 1, name: `C${i}` })))
  })

  it('reads a connection no further while PIPELINE_DEPTH requests wait behind a slow one, then answers them all in order (issue 20 F07)', async () => {
    const { origin, server } = await startSandbox({ apiKeys: [KEY] })
    let seen = 0
    server.prependListener('request', () => seen++)
    const socket = await openSocket(origin)
    // @note HEAD answers are small enough for Node's own backpressure (16 KiB of answers queued) never to set in.
    const sent = 2 * PIPELINE_DEPTH + 8
    let received = ''
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1')
      if (statusesOf(received).length >= 1 + sent) socket.destroy()
    })
    const answer = collect(socket, 15_000)
    socket.write(request('GET', '/v1/categories', ['Prefer: delay=3000']))
    // One request per write, a little apart, so that they arrive in reads of their own.
    for (let i = 0; i < sent; i++) {
      await new Promise((resolve) => setTimeout(resolve, 5))
      socket.write(request('HEAD', `/v1/categories?n=${i}`))
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    const whileSlow = seen
    await answer
    // The slow one and the waiting line, and what a few reads held together; never all of them.
    expect(whileSlow).toBeLessThan(1 + sent)
    expect(whileSlow).toBeGreaterThan(PIPELINE_DEPTH)
    const statuses = statusesOf(received)
    expect(statuses).toEqual(Array.from({ length: 1 + sent }, () => 200))
  })

  it('does not store a create still waiting its turn when its client resets the connection, and logs it as dropped (issue 20 F07)', async () => {
    const { origin, fetch, logs } = await startSandbox({ apiKeys: [KEY] })
    const socket = await openSocket(origin)
    socket.on('error', () => undefined)
    socket.write(request('GET', '/v1/categories', ['Prefer: delay=400']) + request('POST', '/v1/categories', ['X-Request-Id: never'], '{"name":"Never"}'))
    await new Promise((resolve) => setTimeout(resolve, 100))
    socket.resetAndDestroy()
    await expect.poll(() => logs.find((entry) => entry.requestId === 'never')?.status, { timeout: 3000 }).toBe(0)
    // The slow one ahead has had its turn: the create would have been handled by now.
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect(names(await (await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEY}` } })).text())).not.toContain('Never')
  })

  it('answers a client that half-closes after its create, and logs and journals what it got (issue 20 F04)', async () => {
    const { origin, fetch, logs } = await startSandbox({ apiKeys: [KEY] })
    const answer = await exchange(origin, [request('POST', '/v1/categories', ['Prefer: delay=50', 'X-Request-Id: half-closed'], '{"name":"Half closed"}')], {
      waitMs: 3000,
    })
    expect(answer.status).toBe(201)
    expect(responsesOf(answer.text)[0]?.body).toContain('"name":"Half closed"')
    // After its answer the server closes the connection: the client said it sends nothing more.
    expect(answer.closed).toBe(true)
    await expect.poll(() => logs.find((entry) => entry.requestId === 'half-closed')?.status).toBe(201)
    const journal = (await jsonOf(await fetch('/__sandbox/requests', { headers: { authorization: `Bearer ${KEY}` } }))) as {
      requestId: string
      response: { status: number }
    }[]
    expect(journal.find((entry) => entry.requestId === 'half-closed')?.response.status).toBe(201)
  })

  it('answers every pipelined request of a client that half-closes after sending them, in order (issue 20 F04)', async () => {
    const { origin } = await startSandbox({ apiKeys: [KEY] })
    const answer = await exchange(
      origin,
      [request('POST', '/v1/categories', ['Prefer: delay=50'], '{"name":"Piped"}') + request('GET', '/v1/categories')],
      { waitMs: 3000 },
    )
    const [created, listed] = responsesOf(answer.text)
    expect(created?.status).toBe(201)
    expect(names(listed!.body)).toContain('Piped')
    expect(answer.closed).toBe(true)
  })

  it('closes connections that pipeline thousands of requests in one write, runs none past the line, and answers another client (issue 20 attack 2 F2)', async () => {
    const { origin, server, fetch, logs } = await startSandbox({ apiKeys: [KEY], scenario: 'empty' })
    let open = 0
    server.prependListener('request', (req: IncomingMessage) => {
      open++
      req.once('close', () => open--)
    })
    // Answered first, one at a time: what the hostile clients get before the flood.
    const sockets = await Promise.all(Array.from({ length: size('PIPELINE_FLOOD_CONNECTIONS', 6, 30) }, () => openSocket(origin)))
    const received = sockets.map(() => '')
    sockets.forEach((socket, i) => socket.on('data', (chunk: Buffer) => (received[i] += chunk.toString('latin1'))))
    for (const [i, socket] of sockets.entries()) {
      socket.write(request('POST', '/v1/categories', [], JSON.stringify({ name: `Before ${i}` })))
      await expect.poll(() => responsesOf(received[i]!).length).toBe(1)
    }
    // Then one 64 KiB write per connection: a slow list, and tiny creates behind it (pipeflood.py).
    const slow = (i: number) => request('GET', '/v1/categories', ['Prefer: delay=300', `X-Request-Id: slow-${i}`])
    const tiny = 'POST /v1/categories HTTP/1.1\r\nHost:x\r\nAuthorization: Bearer order-key\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n{"name":"F"}'
    const flood = (i: number) => slow(i) + tiny.repeat(Math.floor((65_536 - slow(i).length) / tiny.length))
    expect(flood(0).length / tiny.length).toBeGreaterThan(4 * PIPELINE_LIMIT)
    const answers = sockets.map((socket) => collect(socket, 20_000))
    sockets.forEach((socket, i) => socket.write(flood(i)))
    const partner = await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEY}` } })
    expect(partner.status).toBe(200)
    for (const answer of await Promise.all(answers)) expect(answer.closed).toBe(true)
    // What the server holds: no request of the floods is left open (before: every one of them, until answered).
    await expect.poll(() => open).toBeLessThanOrEqual(sockets.length * (PIPELINE_LIMIT + 1))
    // Each hostile client got its answers in order, the slow list under way at the cut last (attack 3 G2), then nothing.
    received.forEach((text, i) => {
      const answers = responsesOf(text)
      expect(answers.map((answer) => answer.status)).toEqual([201, 200])
      expect(JSON.parse(answers[0]!.body)).toEqual({ id: i + 1, name: `Before ${i}` })
    })
    // The slow lists have run their course; no create behind them ran.
    await expect.poll(() => sockets.every((_, i) => logs.some((entry) => entry.requestId === `slow-${i}`)), { timeout: 10_000 }).toBe(true)
    const listed = names(await (await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEY}` } })).text())
    expect(listed).toEqual(sockets.map((_, i) => `Before ${i}`))
  }, 60_000)

  it.each([
    ['in the same write', false],
    ['in a later write while the create is under way', true],
])('answers a create followed by more than PIPELINE_LIMIT pipelined requests %s with its 201, then closes, running none of them (issue 20 attack 3 G2)', async (_, later) => {
    const { origin, fetch, logs } = await startSandbox({ apiKeys: [KEY], scenario: 'empty' })
    const create = request('POST', '/v1/categories', ['Prefer: delay=300', 'X-Request-Id: create'], '{"name":"Answered"}')
    const lists = Array.from({ length: PIPELINE_LIMIT + 36 }, (_, i) => request('GET', '/v1/store/orders', [`X-Request-Id: list-${i}`])).join('')
    const socket = await openSocket(origin)
    socket.on('error', () => undefined)
    const answer = collect(socket, 5000)
    if (later) {
      socket.write(create)
      await new Promise((resolve) => setTimeout(resolve, 50))
      socket.write(lists)
    } else {
      socket.write(create + lists)
    }
    const { text, closed } = await answer
    expect(closed).toBe(true)
    const answers = responsesOf(text)
    expect(answers.map((response) => response.status)).toEqual([201])
    expect(JSON.parse(answers[0]!.body)).toEqual({ id: 1, name: 'Answered' })
    expect(text.split('\r\n\r\n', 1)[0]).toMatch(/\r\nConnection: close\r\n/i)
    expect(names(await (await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEY}` } })).text())).toEqual(['Answered'])
    // None of the lists ran: each is logged as dropped, or not at all (the rest of the read).
    await expect.poll(() => logs.find((entry) => entry.requestId === 'create')?.status).toBe(201)
    expect(logs.filter((entry) => entry.requestId.startsWith('list-')).map((entry) => entry.status)).toEqual(
      logs.filter((entry) => entry.requestId.startsWith('list-')).map(() => 0),
    )
    const journal = (await jsonOf(await fetch('/__sandbox/requests', { headers: { authorization: `Bearer ${KEY}` } }))) as { method: string; path: string }[]
    expect(journal.filter((entry) => entry.path.startsWith('/v1/store/orders'))).toEqual([])
  })

  it('answers the requests before a CONNECT on the same connection in order, then refuses it with 400 and closes (issue 20 attack 2 F4)', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: [KEY] })
    const answer = await exchange(
      origin,
      [
        request('POST', '/v1/categories', ['Prefer: delay=100'], '{"name":"Before connect"}') +
          request('GET', '/v1/categories') +
          'CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n',
      ],
      { end: false, waitMs: 3000 },
    )
    const [created, listed, refused] = responsesOf(answer.text)
    expect(created?.status).toBe(201)
    expect(names(listed!.body)).toContain('Before connect')
    expect(refused?.status).toBe(400)
    expect(JSON.parse(refused!.body)).toMatchObject({ code: 'bad_request', message: expect.stringContaining('CONNECT') as unknown })
    expect(answer.closed).toBe(true)
    expect(names(await (await fetch('/v1/categories', { headers: { authorization: `Bearer ${KEY}` } })).text())).toContain('Before connect')
  })

  it('refuses a CONNECT alone with 400 and closes (issue 20 attack 2 F4)', async () => {
    const { origin } = await startSandbox({ apiKeys: [KEY] })
    const answer = await exchange(origin, ['CONNECT 127.0.0.1:80 HTTP/1.1\r\nHost: 127.0.0.1:80\r\n\r\n'], { end: false, waitMs: 3000 })
    expect(responsesOf(answer.text).map((response) => response.status)).toEqual([400])
    expect(answer.closed).toBe(true)
  })

  it('answers a request asking to upgrade the connection as any other, after the ones before it (issue 20 attack 2 F4)', async () => {
    const { origin } = await startSandbox({ apiKeys: [KEY] })
    const answer = await exchange(
      origin,
      [request('POST', '/v1/categories', ['Prefer: delay=100'], '{"name":"Before upgrade"}') + request('GET', '/v1/categories', ['Connection: Upgrade', 'Upgrade: websocket'])],
      { waitMs: 3000 },
    )
    const [created, listed] = responsesOf(answer.text)
    expect(created?.status).toBe(201)
    expect(listed?.status).toBe(200)
    expect(names(listed!.body)).toContain('Before upgrade')
  })
})

describe('what a flood of pipelined requests leaves held (issue 20 attack 2 F2)', () => {
  // @note Node keeps about 2 KB for every request it parsed until its answer is out, and parses a
  // whole read (2,500 tiny requests) before any pause: before, each such connection held 5 MB
  // for as long as its first answer took, and 80 of them took a 256 MB heap
  // (`npx tsx bench/pipeline-flood.ts 80 memory 256` for the figures at the attack's sizes).
  it.runIf(REPLAYS)('holds no more per connection than a waiting line at its limit, while the slow answer ahead is still being made', async () => {
    const connections = 20
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--import', 'tsx', 'test/support/pipeline-flood-probe.ts', String(connections)], {
      cwd: fileURLToPath(new URL('../../', import.meta.url)),
    })
    const { measured, sent, requests } = JSON.parse(stdout) as { measured: number; sent: number; requests: number }
    expect(sent).toBeGreaterThan(4 * PIPELINE_LIMIT)
    // The slow one and its waiting line, then the one past it: the rest of each read never became a request.
    expect(requests).toBeLessThanOrEqual(connections * (PIPELINE_LIMIT + 2))
    // Node keeps the requests it parsed until the connection closes, after the answer under way
    // (attack 3 G2): the line at its limit and the one past it, about 2.4 KB each with the
    // sandbox's stamped answer (before attack 2's fix: 5 MB a connection).
    expect(measured / connections).toBeLessThan((PIPELINE_LIMIT + 2) * 3072)
  }, 30_000)
})
