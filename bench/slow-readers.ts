/**
 * `npx tsx bench/slow-readers.ts [memory|sqlite|redis://host:port]`: issue 20 F01 at its sizes.
 * A fresh `petstore-sandbox serve --memory-budget 256MiB` whose tenant holds the longest list
 * the default limits allow (19,999 seeded categories of 200 + 2,000 characters and one created,
 * which puts the list in the store: 44 MB of JSON), then
 * 30 clients that ask for the list and never read, then one connection that pipelines 110 list
 * requests and never reads. Prints what the clients were answered and the server's peak RSS.
 * A script, not a test: `test/server/answers-in-flight.test.ts` runs the same attacks small.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startCliChild, type CliChild } from './lib/cli-child.js'

const store = process.argv[2] ?? 'memory'
const dir = mkdtempSync(join(tmpdir(), 'petstore-slow-readers-'))
const scenarioFile = join(dir, 'longest-list.json')
writeFileSync(
  scenarioFile,
  JSON.stringify({
    name: 'longest-list',
    version: '1.0.0',
    description: 'The longest list the default limits allow.',
    seed: { categories: { generate: { count: 19_999, name: `${'N'.repeat(190)}{n}`, description: `${'d'.repeat(1990)}{n}` } } },
  }),
)
const storeArgs = store === 'memory' ? [] : store === 'sqlite' ? ['--data-dir', join(dir, 'data')] : ['--redis-url', store]

/** Peak resident memory of a process (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Math.round(Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN) / 1024)
}

const LIST = 'GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer bench-key\r\n\r\n'
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The statuses of the `expected` answers `socket` was sent, read once it is let read (at most 120 s). */
async function statusesOf(socket: Socket, expected: number): Promise<string[]> {
  const statuses: string[] = []
  const marker = Buffer.from('HTTP/1.1 ')
  let carry = Buffer.alloc(0)
  await new Promise<void>((resolve) => {
    const timer = setTimeout(resolve, 120_000)
    socket.on('data', (chunk: Buffer) => {
      // @note A status line can straddle two chunks: the end of the last one is searched again.
      const text = Buffer.concat([carry, chunk])
      for (let at = text.indexOf(marker); at !== -1 && at + 12 <= text.length; at = text.indexOf(marker, at + 1)) {
        statuses.push(text.toString('latin1', at + 9, at + 12))
      }
      carry = text.subarray(Math.max(0, text.length - 11))
      if (statuses.length >= expected) {
        clearTimeout(timer)
        resolve()
      }
    })
    socket.once('close', () => {
      clearTimeout(timer)
      resolve()
    })
    socket.resume()
  })
  socket.destroy()
  return statuses
}

async function attack(name: string, port: number, run: () => Promise<string[]>, pid: number, alive: () => boolean): Promise<void> {
  const statuses = await run()
  const counts: Record<string, number> = {}
  for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
  process.stdout.write(`${store} ${name}: ${JSON.stringify(counts)}; server alive: ${alive()}; peak RSS ${alive() ? peakRssMb(pid) : '?'} MB\n`)
  void port
}

let server: CliChild | undefined
try {
  const running = await startCliChild(['--quiet', '--api-key', 'bench-key', '--memory-budget', '256MiB', '--scenario', scenarioFile, ...storeArgs])
  server = running
  const port = running.port
  const open = async () => {
    const socket = connect(port, '127.0.0.1')
    socket.pause()
    socket.on('error', () => undefined)
    await new Promise((resolve) => socket.once('connect', resolve))
    return socket
  }
  // One create, so that the tenant's list lives in the store (SQLite, Redis) and is read from it.
  const created = await fetch(`http://127.0.0.1:${port}/v1/categories`, {
    method: 'POST',
    headers: { authorization: 'Bearer bench-key', 'content-type': 'application/json' },
    body: '{"name":"written"}',
  })
  if (created.status !== 201) throw new Error(`the create was answered ${created.status}`)
  process.stdout.write(`bench/slow-readers.ts, ${store}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}\n`)
  await attack(
    '30 clients that do not read',
    port,
    async () => {
      const sockets: Socket[] = []
      for (let i = 0; i < 30; i++) {
        const socket = await open()
        socket.write(LIST)
        sockets.push(socket)
        await sleep(300)
      }
      await sleep(2000)
      return (await Promise.all(sockets.map((socket) => statusesOf(socket, 1)))).flat()
    },
    running.pid,
    () => running.alive(),
  )
  await attack(
    '110 pipelined lists, not read',
    port,
    async () => {
      const socket = await open()
      socket.write(LIST.repeat(110))
      await sleep(5000)
      return statusesOf(socket, 110)
    },
    running.pid,
    () => running.alive(),
  )
} finally {
  await server?.kill()
  rmSync(dir, { recursive: true, force: true })
}
