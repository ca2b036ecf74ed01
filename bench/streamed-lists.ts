/**
 * `npx tsx bench/streamed-lists.ts [clients] [store]`: what clients that ask for a long list and
 * never read hold on the server's heap (attack8 B1, B2). A sandbox on `store` (`sqlite`, the
 * default, sends a list as its client takes it; `redis://host:port` or `memory` for comparison),
 * in this process, whose tenant holds a 20 MB list (10,000 categories of 2,000 characters); then
 * `clients` (default 40) sockets that each ask for it and read nothing. Prints the heap and
 * memory outside it (socket buffers) they hold together and each, after a full collection,
 * against the list's size and a piece's ({@link LIST_PIECE_UNITS}).
 * A script, not a test: `test/server/answers-in-flight.test.ts` asserts the bound small.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { createSandboxApp } from '../src/server.js'
import { LIST_PIECE_UNITS } from '../src/pipeline/categories.js'

const clients = Number(process.argv[2] ?? 40)
const store = process.argv[3] ?? 'sqlite'
const COUNT = 10_000
const dir = mkdtempSync(join(tmpdir(), 'petstore-streamed-lists-'))
setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

/** The heap in use and the memory outside it (Buffers, socket write queues), after a full collection, in bytes. */
function heldNow(): number {
  gc()
  gc()
  const usage = process.memoryUsage()
  return usage.heapUsed + usage.external + usage.arrayBuffers
}

/** Reads one list whole on a connection of its own, closed after: nothing of it stays (a pooled `fetch` connection keeps buffers). */
async function readWhole(port: number): Promise<number> {
  const socket = connect(port, '127.0.0.1')
  let bytes = 0
  await new Promise<void>((resolve) => {
    socket.on('data', (chunk: Buffer) => {
      bytes += chunk.length
      if (chunk.subarray(-5).toString('latin1') === '0\r\n\r\n' || chunk.subarray(-1).toString('latin1') === ']') resolve()
    })
    socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer bench-key\r\nConnection: close\r\n\r\n')
  })
  socket.destroy()
  return bytes
}

const mb = (bytes: number) => `${(bytes / 1e6).toFixed(1)} MB`
const kb = (bytes: number) => `${Math.round(bytes / 1024)} KiB`
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const storeOptions = store === 'sqlite' ? { dataDir: join(dir, 'data') } : store === 'memory' ? {} : { redisUrl: store, redisPrefix: `bench-streamed-${process.pid}:` }

const sandbox = await createSandboxApp({
  demoDir: false,
  log: () => undefined,
  apiKeys: ['bench-key'],
  scenario: {
    name: 'twenty-mb-list',
    version: '1.0.0',
    description: 'A 20 MB list.',
    seed: { categories: { generate: { count: COUNT, name: 'Category {n}', description: `${'d'.repeat(1990)}{n}` } } },
  },
  ...storeOptions,
})
const server = sandbox.createServer()
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
const port = (server.address() as AddressInfo).port
const origin = `http://127.0.0.1:${port}`
const headers = { authorization: 'Bearer bench-key', 'content-type': 'application/json' }
const sockets: Socket[] = []
try {
  // One create puts the tenant's list in the store (SQLite, Redis); one read warms every path.
  await (await fetch(`${origin}/v1/categories`, { method: 'POST', headers, body: '{"name":"written"}' })).arrayBuffer()
  await readWhole(port)
  const readStarted = performance.now()
  const listBytes = await readWhole(port)
  const readMs = performance.now() - readStarted
  await sleep(500)
  heldNow()
  const before = heldNow()
  for (let i = 0; i < clients; i++) {
    const socket = connect(port, '127.0.0.1')
    socket.pause()
    socket.on('error', () => undefined)
    await new Promise((resolve) => socket.once('connect', resolve))
    socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer bench-key\r\n\r\n')
    sockets.push(socket)
  }
  // Long enough for each answer to fill its sockets' buffers and stop.
  await sleep(2000 + 50 * clients)
  const held = heldNow() - before
  process.stdout.write(
    `bench/streamed-lists.ts, ${store}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}\n` +
      `${clients} clients that never read a ${mb(listBytes)} answer hold ${mb(held)} together, ${kb(held / clients)} each ` +
      `(a piece is about ${kb(LIST_PIECE_UNITS)} of JSON); one client reading it whole took ${Math.round(readMs)} ms\n`,
  )
} finally {
  for (const socket of sockets) socket.destroy()
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
  await sandbox.close()
  rmSync(dir, { recursive: true, force: true })
}
