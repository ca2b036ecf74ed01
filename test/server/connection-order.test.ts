/**
 * One connection is one ordered conversation (issue 20): pipelined requests are handled in the
 * order they came, at most PIPELINE_DEPTH wait behind a slow one, and a client that half-closes
 * after its request still gets its answer. Raw sockets against a real server, on every store.
 */
import { describe, expect, it } from 'vitest'
import { PIPELINE_DEPTH } from '../../src/server/conversation.js'
import { collect, exchange, openSocket } from '../support/raw-http.js'
import { jsonOf, startSandbox, useStore } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'

const KEY = 'order-key'
const authz = `Authorization: Bearer ${KEY}`
const json = 'Content-Type: application/json'

/** A request's bytes; `Host` first, each header a `Name: value` line. */
function request(method: string, path: string, headers: readonly string[] = [], body = ''): string {
  const lines = ['Host: 127.0.0.1', authz, ...headers, ...(body === '' ? [] : [json, `Content-Length: ${Buffer.byteLength(body)}`])]
  return `${method} ${path} HTTP/1.1\r\n${lines.map((line) => `${line}\r\n`).join('')}\r\n${body}`
}

interface Parsed {
  readonly status: number
  readonly body: string
}

/** The responses in `text` (latin1, as collected), each read by its Content-Length. */
export function responsesOf(text: string): Parsed[] {
  const parsed: Parsed[] = []
  let at = 0
  while (at < text.length) {
    const end = text.indexOf('\r\n\r\n', at)
    if (end === -1) break
    const head = text.slice(at, end)
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1])
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
    parsed.push({ status, body: Buffer.from(text.slice(end + 4, end + 4 + length), 'latin1').toString('utf8') })
    at = end + 4 + length
  }
  return parsed
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
})
