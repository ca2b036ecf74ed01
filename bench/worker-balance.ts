/**
 * How `serve --workers 2 --redis-url` spreads connections over its workers, and what it serves:
 * `npx tsx bench/worker-balance.ts [path/to/cli.js ...]` (default: this checkout's dist/cli.js;
 * give another checkout's to compare, e.g. the one before cluster.SCHED_NONE). For each CLI, 3
 * rounds of 3 s: 10 clients, each a GET of /v1/categories per new connection (`Connection:
 * close`, the case where scheduling decides), then the same over 10 kept-alive connections.
 * Prints requests/s in all and per worker. A worker's share is read from the bytes it wrote
 * (/proc/<pid>/io: answers, Redis commands and its log, the same for every identical GET).
 *
 * @note Not in `npm run bench`: a figure for a decision (docs/decisions/0007), measured on a
 * 2-core machine shared by the load generator, Redis and the workers. Needs redis-server.
 */
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { request, Agent } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort } from './lib/exec-server.js'

const ROUNDS = 3
const SECONDS = 3
const CLIENTS = 10

const written = (pid: number) => Number(/wchar: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))![1])
const childrenOf = (pid: number) => execFileSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).split('\n').map(Number).filter((n) => n > 0)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

function get(port: number, agent: Agent | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = request({ port, host: '127.0.0.1', path: '/v1/categories', agent: agent ?? false, headers: { authorization: 'Bearer bench', ...(agent ? {} : { connection: 'close' }) } }, (res) => {
      res.resume()
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`status ${res.statusCode}`))))
    })
    req.on('error', reject)
    req.end()
  })
}

async function round(port: number, workers: number[], keepAlive: boolean) {
  const agent = keepAlive ? new Agent({ keepAlive: true, maxSockets: CLIENTS }) : undefined
  const before = workers.map(written)
  let requests = 0
  const end = Date.now() + SECONDS * 1000
  await Promise.all(Array.from({ length: CLIENTS }, async () => {
    while (Date.now() < end) {
      await get(port, agent)
      requests++
    }
  }))
  agent?.destroy()
  const deltas = workers.map((pid, i) => written(pid) - before[i]!)
  const total = deltas.reduce((a, b) => a + b, 0)
  return { perSecond: requests / SECONDS, perWorker: deltas.map((delta) => (requests * delta) / total / SECONDS) }
}

async function measure(cli: string, redisUrl: string) {
  const port = await freePort()
  const run = spawn(process.execPath, [cli, 'serve', '--port', String(port), '--workers', '2', '--redis-url', redisUrl, '--api-key', 'bench', '--quiet'], { stdio: ['ignore', 'pipe', 'inherit'] })
  await new Promise<void>((resolve) => run.stdout.on('data', (chunk: Buffer) => chunk.toString().includes('Ctrl+C stops it.') && resolve()))
  const workers = childrenOf(run.pid!)
  for (const keepAlive of [false, true]) {
    await round(port, workers, keepAlive) // warm-up
    for (let i = 1; i <= ROUNDS; i++) {
      const { perSecond, perWorker } = await round(port, workers, keepAlive)
      const shares = perWorker.map((value) => `${Math.round(value)} (${Math.round((100 * value) / perSecond)}%)`).join(' / ')
      console.log(`${cli}  ${keepAlive ? 'kept-alive     ' : 'new connection '} round ${i}: ${Math.round(perSecond)} req/s; per worker ${shares}`)
    }
  }
  run.kill('SIGTERM')
  await new Promise((resolve) => run.once('exit', resolve))
}

const clis = process.argv.slice(2)
const dir = mkdtempSync(join(tmpdir(), 'petstore-balance-'))
const redisPort = await freePort()
const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
await sleep(300)
try {
  for (const cli of clis.length > 0 ? clis : ['dist/cli.js']) await measure(cli, `redis://127.0.0.1:${redisPort}`)
} finally {
  redis.kill('SIGTERM')
  rmSync(dir, { recursive: true, force: true })
}
