/**
 * `npx tsx bench/pipeline-flood.ts [connections] [memory|sqlite|redis://host:port] [heap MB]`:
 * issue 20 attack 2 F2 at its sizes. A fresh `petstore-sandbox serve` (with `heap MB`, under
 * `--max-old-space-size`); `connections` clients (950 unless given) each send one 64 KiB write:
 * a list with `Prefer: delay=20000`, then 2,517 × `GET / HTTP/1.1` (attack 2's pipeflood.py),
 * and hold their connections for 25 s while a partner lists its categories every 500 ms.
 * Prints how many flooding connections the server closed and what each was answered before (the
 * slow list alone, saying `Connection: close`, since the cut gives the answer under way first),
 * what the partner was answered and its slowest answer, whether the server is alive, and its peak RSS.
 * @note The flooding clients read what they are sent: a socket whose peer closed after writing an
 * answer never emits `close` while that answer sits unread in it.
 * A script, not a test: `test/server/connection-order.test.ts` runs the same attack small.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startCliChild, type CliChild } from './lib/cli-child.js'

const connections = Number(process.argv[2] ?? 950)
const store = process.argv[3] ?? 'memory'
const heapMb = process.argv[4]
const dir = mkdtempSync(join(tmpdir(), 'petstore-pipeline-flood-'))
const storeArgs = store === 'memory' ? [] : store === 'sqlite' ? ['--data-dir', join(dir, 'data')] : ['--redis-url', store]
const HOLD_MS = 25_000

/** Peak resident memory of a process (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Math.round(Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) / 1024)
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const slow = 'GET /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer flood-key\r\nPrefer: delay=20000\r\n\r\n'
const tiny = 'GET / HTTP/1.1\r\nHost:x\r\n\r\n'
const chunk = slow + tiny.repeat(Math.floor((65_536 - slow.length) / tiny.length))

let server: CliChild | undefined
try {
  const nodeArgs = heapMb === undefined ? [] : [`--max-old-space-size=${heapMb}`]
  const running = await startCliChild(['--quiet', '--api-key', 'flood-key', '--api-key', 'partner-key', ...storeArgs], nodeArgs)
  server = running
  const port = running.port
  process.stdout.write(`bench/pipeline-flood.ts, ${connections} connections, ${store}, heap ${heapMb ?? 'default'} MB, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}\n`)
  const partner: { status: number; ms: number }[] = []
  let flooding = true
  const partnerLoop = (async () => {
    while (flooding) {
      const started = performance.now()
      const status = await fetch(`http://127.0.0.1:${port}/v1/categories`, { headers: { authorization: 'Bearer partner-key' }, signal: AbortSignal.timeout(120_000) })
        .then(async (response) => (await response.arrayBuffer(), response.status))
        .catch(() => 0)
      partner.push({ status, ms: performance.now() - started })
      await sleep(500)
    }
  })()
  let closed = 0
  /** What the flooding connections the server closed were answered: `200 close` is one 200 saying `Connection: close`. */
  const floodAnswers: Record<string, number> = {}
  const closedAfterMs: number[] = []
  const floodStarted = performance.now()
  const sockets: Socket[] = []
  for (let i = 0; i < connections; i++) {
    const socket = connect(port, '127.0.0.1')
    let received = ''
    socket.on('error', () => undefined)
    socket.setEncoding('latin1').on('data', (text: string) => (received += text))
    socket.once('close', () => {
      closed++
      closedAfterMs.push(performance.now() - floodStarted)
      const heads = [...received.matchAll(/HTTP\/1\.1 (\d{3})[^]*?\r\n\r\n/g)].map(([head, status]) => `${status}${/\r\nconnection: close\r\n/i.test(head) ? ' close' : ''}`)
      const shape = heads.join(', ') || 'nothing'
      floodAnswers[shape] = (floodAnswers[shape] ?? 0) + 1
    })
    socket.write(chunk)
    sockets.push(socket)
  }
  await sleep(HOLD_MS)
  flooding = false
  await partnerLoop
  // The slow list is answered 20 s in, then each connection closes: give stragglers a few seconds more.
  for (const deadline = performance.now() + 10_000; closed < connections && performance.now() < deadline; ) await sleep(100)
  for (const socket of sockets) socket.destroy()
  const counts: Record<string, number> = {}
  for (const { status } of partner) counts[status] = (counts[status] ?? 0) + 1
  const slowest = Math.round(Math.max(...partner.map(({ ms }) => ms)))
  process.stdout.write(
    `flooding connections closed by the server: ${closed} of ${connections} (answered before: ${JSON.stringify(floodAnswers)}; closed ${Math.round(Math.min(...closedAfterMs) / 100) / 10}-${Math.round(Math.max(...closedAfterMs) / 100) / 10} s after sending); partner answers: ${JSON.stringify(counts)}, slowest ${slowest} ms; server alive: ${running.alive()}; peak RSS ${!running.alive() ? '?' : peakRssMb(running.pid)} MB\n`,
  )
} finally {
  await server?.kill()
  rmSync(dir, { recursive: true, force: true })
}
