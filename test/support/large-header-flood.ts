/**
 * `npx tsx test/support/large-header-flood.ts [connections] [heap MB]`: issue 20 attack 3 G6 at its
 * sizes. A fresh `petstore-sandbox serve` under `--max-old-space-size` (256 unless given);
 * `connections` clients (900 unless given) each send a list with `Prefer: delay=20000`, then 64
 * lists each carrying a 15 KB header, and hold their connections while the server is watched.
 * Prints one JSON line `{ alive, health, closed }`: whether the server still runs, the status its
 * health check answered after the flood (0: none), and how many flooding connections it closed.
 * Its own processes: `test/server/large-header-flood.test.ts` runs it in the full run.
 */
import { connect, type Socket } from 'node:net'
import { startCliChild } from '../../bench/lib/cli-child.js'

const connections = Number(process.argv[2] ?? 900)
const heapMb = Number(process.argv[3] ?? 256)
const HOLD_MS = 8000
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const slow = 'GET /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flood-key\r\nPrefer: delay=20000\r\n\r\n'
const large = `GET /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flood-key\r\nX-Pad: ${'a'.repeat(15_000)}\r\n\r\n`
// One buffer written to every connection: the client holds it once.
const flood = Buffer.from(slow + large.repeat(64), 'latin1')

const server = await startCliChild(['--quiet', '--api-key', 'flood-key'], [`--max-old-space-size=${heapMb}`])
try {
  let closed = 0
  const sockets: Socket[] = []
  for (let i = 0; i < connections; i++) {
    const socket = connect(server.port, '127.0.0.1')
    socket.on('error', () => undefined)
    socket.once('close', () => closed++)
    socket.write(flood)
    sockets.push(socket)
  }
  await sleep(HOLD_MS)
  const health = await fetch(`http://127.0.0.1:${server.port}/__sandbox/health`, { signal: AbortSignal.timeout(10_000) })
    .then(async (response) => (await response.arrayBuffer(), response.status))
    .catch(() => 0)
  for (const socket of sockets) socket.destroy()
  process.stdout.write(`${JSON.stringify({ alive: server.alive(), health, closed })}\n`)
} finally {
  await server.kill()
}
