/**
 * `npx tsx bench/partner-reads.ts [sqlite|memory|redis://host:port] [stalling keys] [heap MB]`:
 * issue 20 attack 3 G4 at its sizes. A fresh `petstore-sandbox serve --memory-budget 256MiB` (a data
 * directory for SQLite) whose tenants start on 2,000 categories made of `\x01` (200 + 2,000
 * characters: 26 MB of JSON once escaped to `\u0001`); each stalling key makes one create, so
 * that its list is read from the store per request. Then:
 * 1. the first stalling key sends 12 list requests on 12 sockets that never read;
 * 2. a `large-catalog` partner (another key) lists its categories 5 times;
 * 3. the stalling key sends its 12 requests again, and the partner lists 5 times more;
 * 4. with more than one stalling key, every other stalling key sends one such request; the
 *    partner lists 5 times at once, and 5 times once those answers took nothing for `STALL_MS`.
 * After each step: what was answered, the server's heap (a diagnostic report: used, garbage
 * included) and RSS (now, peak), or that it died. With `heap MB`, under `--max-old-space-size`. A script, not a test: `test/server/answers-in-flight.test.ts` runs the attack small.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { connect, type Socket } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startCliChild, type CliChild } from './lib/cli-child.js'
import { STALL_MS } from '../src/server/memory-budget.js'

const store = process.argv[2] ?? 'sqlite'
const stallingKeys = Number(process.argv[3] ?? 1)
const heapLimitMb = process.argv[4]
const dir = mkdtempSync(join(tmpdir(), 'petstore-partner-reads-'))
const reports = join(dir, 'reports')
mkdirSync(reports)
const scenarioFile = join(dir, 'control-list.json')
writeFileSync(
  scenarioFile,
  JSON.stringify({
    name: 'control-list',
    version: '1.0.0',
    description: '2,000 categories of control characters.',
    seed: { categories: { generate: { count: 2000, name: `${'\x01'.repeat(190)}{n}`, description: `${'\x01'.repeat(1990)}{n}` } } },
  }),
)
const storeArgs = store === 'memory' ? [] : store === 'sqlite' ? ['--data-dir', join(dir, 'data')] : ['--redis-url', store]
const stallers = Array.from({ length: stallingKeys }, (_, i) => `staller-${i}`)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Resident memory of a process now (VmRSS) and at its peak (VmHWM), in MB. */
function rssMb(pid: number): { now: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const mb = (field: string) => Math.round(Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? Number.NaN) / 1024)
  return { now: mb('VmRSS'), peak: mb('VmHWM') }
}

/** The server's used JS heap in MB, from a diagnostic report it writes on SIGUSR2. */
async function heapMb(pid: number): Promise<number> {
  const before = new Set(readdirSync(reports))
  process.kill(pid, 'SIGUSR2')
  for (let i = 0; i < 100; i++) {
    await sleep(100)
    const file = readdirSync(reports).find((name) => !before.has(name))
    if (file === undefined) continue
    try {
      const report = JSON.parse(readFileSync(join(reports, file), 'utf8')) as { javascriptHeap: { usedMemory: number } }
      return Math.round(report.javascriptHeap.usedMemory / 2 ** 20)
    } catch {
      // Still being written.
    }
  }
  return Number.NaN
}

let server: CliChild | undefined
try {
  const keys = [...stallers, 'partner'].flatMap((key) => ['--api-key', key])
  const running = await startCliChild(
    ['--quiet', ...keys, '--memory-budget', '256MiB', '--scenario', scenarioFile, ...storeArgs],
    ['--report-on-signal', '--report-signal=SIGUSR2', `--report-directory=${reports}`, ...(heapLimitMb === undefined ? [] : [`--max-old-space-size=${heapLimitMb}`])],
  )
  server = running
  const base = `http://127.0.0.1:${running.port}`
  const auth = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })
  for (const key of stallers) {
    const created = await fetch(`${base}/v1/categories`, { method: 'POST', headers: auth(key), body: '{"name":"written"}' })
    if (created.status !== 201) throw new Error(`the create was answered ${created.status}`)
  }
  const switched = await fetch(`${base}/__sandbox/scenario`, { method: 'PUT', headers: auth('partner'), body: '{"name":"large-catalog"}' })
  if (switched.status !== 200) throw new Error(`the switch was answered ${switched.status}`)
  process.stdout.write(`bench/partner-reads.ts, ${store}, ${stallingKeys} stalling key(s), heap limit ${heapLimitMb ?? 'default'}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}\n`)

  const held: Socket[] = []
  /** Sends one list request for `key` on a new socket that never reads; resolves to its status once the answer began (or '---' after 5 s). */
  const stall = (key: string) =>
    new Promise<string>((resolve) => {
      const socket = connect(running.port, '127.0.0.1')
      held.push(socket)
      socket.on('error', () => undefined)
      const timer = setTimeout(() => resolve('---'), 5000)
      // One read of the status line, then never again: the socket's buffers fill, the answer stalls.
      socket.once('data', (chunk: Buffer) => {
        clearTimeout(timer)
        socket.pause()
        resolve(chunk.toString('latin1', 9, 12))
      })
      socket.write(`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\n\r\n`)
    })
  const tally = (statuses: string[]) => {
    const counts: Record<string, number> = {}
    for (const status of statuses) counts[status] = (counts[status] ?? 0) + 1
    return JSON.stringify(counts)
  }
  const partnerLists = async () => {
    const statuses: string[] = []
    for (let i = 0; i < 5; i++) {
      const response = await fetch(`${base}/v1/categories`, { headers: auth('partner') })
      await response.arrayBuffer()
      statuses.push(String(response.status))
    }
    return statuses
  }
  const report = async (step: string, statuses: string[]) => {
    if (!running.alive()) {
      process.stdout.write(`${step}: ${tally(statuses)}; the server died\n`)
      process.exit(1)
    }
    const heap = await heapMb(running.pid)
    const rss = rssMb(running.pid)
    process.stdout.write(`${step}: ${tally(statuses)}; heap ${heap} MB, RSS ${rss.now} MB (peak ${rss.peak} MB)\n`)
  }

  const first = stallers[0]!
  const stalls: string[] = []
  for (let i = 0; i < 12; i++) stalls.push(await stall(first))
  await report(`${first}: 12 lists, not read`, stalls)
  await report('partner: 5 lists of large-catalog', await partnerLists())
  const again: string[] = []
  for (let i = 0; i < 12; i++) again.push(await stall(first))
  await report(`${first}: 12 lists again`, again)
  await report('partner: 5 lists again', await partnerLists())
  if (stallers.length > 1) {
    const others: string[] = []
    for (const key of stallers.slice(1)) others.push(await stall(key))
    await report(`${stallers.length - 1} other stalling keys: one list each, not read`, others)
    await report('partner: 5 lists while they stall', await partnerLists())
    // Answers that took nothing for STALL_MS are cut for a partner's long read (attack4 H7).
    await sleep(STALL_MS + 500)
    await report('partner: 5 lists once they stalled STALL_MS', await partnerLists())
  }
  for (const socket of held) socket.destroy()
  await sleep(1000)
  await report('every staller gone; partner: 5 lists', await partnerLists())
} finally {
  await server?.kill()
  rmSync(dir, { recursive: true, force: true })
}
