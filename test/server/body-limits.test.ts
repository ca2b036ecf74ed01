/**
 * Timeouts enforced near the configured time, bodies over the limit (the Error body, never a
 * network error), answers of 500 that show no server detail, a server on a Unix socket. Split
 * from limits.test.ts so that the limits' files run side by side.
 */

import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect } from 'node:net'
import { describe, expect, it, onTestFinished } from 'vitest'
import { createSandboxApp } from '../../src/server.js'
import { DRAIN_IDLE_MS } from '../../src/node-bridge/node-request.js'
import { collect, openSocket } from '../support/raw-http.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { failOnUnhandledRejections } from '../support/unhandled-rejections.js'
import { size } from '../support/test-scale.js'

/** Fetch POSTs over the body limit, one after another: 10, 30 in the full run. */
const OVER_LIMIT_POSTS = size('PETSTORE_TEST_OVER_LIMIT_POSTS', 10, 30)
/** @note Any unhandled rejection while these tests run is a finding: a client could stop the process. */
failOnUnhandledRejections()

const create = (fetch: (path: string, init?: RequestInit) => Promise<Response>, key: string, body: unknown) =>
  fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify(body) })

describe('timeouts, enforced near the configured time', () => {
  it('cuts trickled headers off with 408 near the header timeout', async () => {
    const { origin, fetch } = await startSandbox({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const slow = await openSocket(origin)
    const started = performance.now()
    // Waited for at most 10 s: Node's own check, before the fix, came every 30 s.
    const cutOff = collect(slow, 10_000)
    slow.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ')
    const trickle = setInterval(() => (slow.destroyed ? clearInterval(trickle) : slow.write('a')), 50)
    const answer = await cutOff
    const elapsed = performance.now() - started
    clearInterval(trickle)
    // Cut off (within the 10 s waited), and not before the timeout: a loaded machine can only make it later.
    expect(answer.status).toBe(408)
    expect(elapsed).toBeGreaterThanOrEqual(900)
    expect((await fetch('/__sandbox/health')).status).toBe(200)
  })

  it('cuts a trickled body off near the request timeout without storing it', async () => {
    const { origin, fetch } = await startSandbox({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const body = JSON.stringify({ name: 'trickled', description: 'x'.repeat(500) })
    const slow = await openSocket(origin)
    const started = performance.now()
    const cutOff = collect(slow, 10_000)
    slow.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sandbox-dev-key\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)
    let sent = 0
    const trickle = setInterval(() => (slow.destroyed || sent >= body.length ? clearInterval(trickle) : slow.write(body[sent++]!)), 50)
    const answer = await cutOff
    const elapsed = performance.now() - started
    clearInterval(trickle)
    expect(answer.closed).toBe(true)
    expect(elapsed).toBeGreaterThanOrEqual(1800)
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth() }))) as { name: string }[]).map((c) => c.name)
    expect(names).not.toContain('trickled')
  })
})

describe('bodies over the limit', () => {
  /** A 5 MiB body: a string (sent with its Content-Length) or a stream of 64 KiB chunks (sent chunked). */
  const bodies = {
    declared: () => ({ body: 'x'.repeat(5 * 1024 * 1024) }),
    streamed: () => ({
      duplex: 'half',
      body: new ReadableStream<Uint8Array>({
        async start(controller) {
          for (let i = 0; i < 80; i++) {
            controller.enqueue(new Uint8Array(64 * 1024).fill(0x78))
            if (i % 8 === 0) await new Promise((resolve) => setTimeout(resolve, 2))
          }
          controller.close()
        },
      }),
    }),
  }

  it.each(['declared', 'streamed'] as const)(
    `answers every one of ${OVER_LIMIT_POSTS} fetch POSTs of 5 MiB (%s) with the 413 Error body, never a network error`,
    async (kind) => {
      const { origin } = await startSandbox()
      const outcomes: string[] = []
      for (let i = 0; i < OVER_LIMIT_POSTS; i++) {
        try {
          const init = { method: 'POST', headers: auth(undefined, true), ...bodies[kind]() } as RequestInit
          const response = await fetch(`${origin}/v1/categories`, init)
          outcomes.push(`${response.status} ${((await response.json()) as { code: string }).code}`)
        } catch (error) {
          outcomes.push(String((error as Error).cause ?? error))
        }
      }
      expect(outcomes).toEqual(Array.from({ length: OVER_LIMIT_POSTS }, () => '413 payload_too_large'))
    },
  )

  it('lets a client that asked for Connection: close send its whole body over the limit and read the 413 (trial finding: it got EPIPE)', async () => {
    const { origin, logs } = await startSandbox()
    const { errors, text, closed } = await sendOverLimitClosing(origin)
    expect(errors).toEqual([])
    expect(text).toMatch(/^HTTP\/1\.1 413 /)
    expect(text).toContain('"code":"payload_too_large"')
    expect(closed).toBe(true)
    // Logged with the status the client got, once it went out.
    await expect.poll(() => logs.map((entry) => entry.status)).toEqual([413])
  })

  it('keeps reading the rest of a body over the limit when the server itself stalled while its client kept sending (flaky in CI: EPIPE)', async () => {
    const { origin } = await startSandbox()
    const { errors, text, closed } = await sendOverLimitClosing(origin, (piece) => {
      if (piece !== 1) return
      // The whole process stalls (a long collection, a starved CPU) right after the second
      // piece went out: the server's idle timer is due before it has read a byte of it.
      const stalledUntil = performance.now() + DRAIN_IDLE_MS + 200
      while (performance.now() < stalledUntil);
    })
    expect(errors).toEqual([])
    expect(text).toMatch(/^HTTP\/1\.1 413 /)
    expect(closed).toBe(true)
  })

  it('keeps the connection usable after a 413 whose rest it read', async () => {
    const { origin } = await startSandbox()
    const socket = await openSocket(origin)
    const answer = collect(socket, 3000)
    const big = 'x'.repeat(2 * 1024 * 1024)
    socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sandbox-dev-key\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n`)
    socket.write(big)
    socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sandbox-dev-key\r\nConnection: close\r\n\r\n')
    const { text } = await answer
    expect(text).toMatch(/^HTTP\/1\.1 413 /)
    expect(text).toMatch(/HTTP\/1\.1 200 OK[\s\S]*"name":"Dogs"/)
  })
})

describe('answers of 500 never show a server detail', () => {
  const leaky = () => new Error("EROFS: read-only file system, open '/var/lib/petstore-sandbox/2f1c9a/log.jsonl'")

  it('answers a failing create with internal_error and no file path', async () => {
    const warnings: string[] = []
    const { fetch, sandbox } = await startSandbox({ warn: (message) => warnings.push(message) })
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(200)
    const tenant = (await sandbox.tenants.resolve('sandbox-dev-key'))!
    tenant.store.createCategory = () => Promise.reject(leaky())
    const response = await create(fetch, 'sandbox-dev-key', { name: 'x' })
    const body = (await jsonOf(response)) as { message: string }
    expectErrorBody(body, 500, 'internal_error')
    expect(body.message).not.toContain('/var/lib')
    expect(body.message).not.toContain('EROFS')
    expect(warnings.join('\n')).toContain('/var/lib/petstore-sandbox')
  })

  it('answers a failing admin route with internal_error and no file path', async () => {
    const { fetch, sandbox } = await startSandbox({ warn: () => undefined })
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(200)
    const tenant = (await sandbox.tenants.resolve('sandbox-dev-key'))!
    tenant.resetTo = () => Promise.reject(leaky())
    const response = await fetch('/__sandbox/reset', { method: 'POST', headers: auth() })
    const body = (await jsonOf(response)) as { message: string }
    expectErrorBody(body, 500, 'internal_error')
    expect(body.message).not.toContain('/var/lib')
  })
})

/**
 * Sends a create whose body is 1 MiB + 1 (over the limit) on a connection that closes after its
 * answer, the rest of the body in four pieces 150 ms apart (the 413 is answered after the first);
 * `afterPiece` runs as each piece goes out. Resolves with the client's socket errors and what it read.
 */
async function sendOverLimitClosing(origin: string, afterPiece: (piece: number) => void = () => undefined) {
  const socket = await openSocket(origin)
  const errors: string[] = []
  socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message))
  const answer = collect(socket, 10_000)
  const size = 1024 * 1024 + 1
  socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer sandbox-dev-key\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`)
  const length = Math.ceil(size / 4)
  for (let piece = 0; piece * length < size; piece++) {
    await new Promise((resolve) => setTimeout(resolve, 150))
    const written = new Promise<void>((resolve) =>
      socket.write('x'.repeat(Math.min(length, size - piece * length)), (error) => {
        if (error) errors.push((error as NodeJS.ErrnoException).code ?? error.message)
        resolve()
      }),
    )
    afterPiece(piece)
    await written
  }
  return { errors, ...(await answer) }
}

describe('a server on a Unix socket (attack16 U1)', () => {
  it('ends a connection beyond its key’s share without exiting: a Unix socket cannot be reset, so it is closed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-unix-'))
    const path = join(dir, 'sandbox.sock')
    const sandbox = await createSandboxApp({ anyKey: true, maxConnections: 2, demoDir: false })
    const server = sandbox.createServer()
    await new Promise<void>((resolve) => server.listen(path, resolve))
    onTestFinished(async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
      await sandbox.close()
      rmSync(dir, { recursive: true, force: true })
    })
    // Key A: three uploads under way (beyond its share of 2); then key B's list, past the cap.
    const slow = Array.from({ length: 3 }, () => {
      const socket = connect(path, () => socket.write('POST /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer A\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na'))
      socket.on('error', () => undefined)
      return socket
    })
    onTestFinished(() => slow.forEach((socket) => socket.destroy()))
    await new Promise((resolve) => setTimeout(resolve, 300))
    const listed = await new Promise<string>((resolve, reject) => {
      const socket = connect(path, () => socket.write('GET /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer B\r\nConnection: close\r\n\r\n'))
      let text = ''
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')))
      socket.on('close', () => resolve(text))
      socket.on('error', reject)
    })
    expect(listed).toMatch(/^HTTP\/1\.1 200 /)
  })
})
