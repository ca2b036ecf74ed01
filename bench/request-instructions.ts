/**
 * Instructions per request of the server process, as `npm start` runs it (the built CLI, its
 * request log written to a file), counted by valgrind's callgrind: a figure that a loaded machine
 * does not move, unlike requests per second. Not part of `npm run bench` (it needs valgrind and
 * takes a few minutes); docs/decisions/0006-fast-request-path.md has its figures.
 *
 *   npx tsx bench/request-instructions.ts [GET|POST] [warm-up requests] [measured requests]
 *
 * Instrumentation is switched on after the warm-up (so the JIT has settled), the measured
 * requests are sent on 10 keep-alive connections, and the total of every thread is divided by
 * their number.
 */
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, openSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { Agent, request } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BENCH_KEYS, READ_KEY, WRITE_KEY } from './servers/keys.js'

const [method = 'GET', warmUp = '30000', measured = '4000'] = process.argv.slice(2)
if (method !== 'GET' && method !== 'POST') throw new Error(`method must be GET or POST, got ${method}`)
const root = fileURLToPath(new URL('../', import.meta.url))
execFileSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] })
const dir = mkdtempSync(join(tmpdir(), 'petstore-callgrind-'))
const log = join(dir, 'sandbox.log')
const server = spawn(
  'valgrind',
  [
    '--tool=callgrind', '--instr-atstart=no', `--callgrind-out-file=${join(dir, 'callgrind.out')}`,
    process.execPath, 'dist/cli.js', 'serve', '--port', '0', '--api-key', BENCH_KEYS.join(','),
    '--max-categories', '500000', '--name-max-length', '20', '--description-max-length', '20',
  ],
  { cwd: root, stdio: ['ignore', openSync(log, 'w'), openSync(join(dir, 'valgrind.err'), 'w')] },
)
try {
  let port: string | undefined
  while (port === undefined) {
    if (server.exitCode !== null) throw new Error(`the server exited: ${readFileSync(join(dir, 'valgrind.err'), 'utf8')}`)
    await new Promise((resolve) => setTimeout(resolve, 200))
    port = /API\s+http:\/\/127\.0\.0\.1:(\d+)/.exec(readFileSync(log, 'utf8'))?.[1]
  }
  const origin = `http://127.0.0.1:${port}`
  await send(origin, Number(warmUp))
  execFileSync('callgrind_control', ['-i', 'on', String(server.pid)], { stdio: 'ignore' })
  await send(origin, Number(measured))
  execFileSync('callgrind_control', ['-d', String(server.pid)], { stdio: 'ignore' })
  execFileSync('callgrind_control', ['-i', 'off', String(server.pid)], { stdio: 'ignore' })
  // The dump of the measured requests only (`callgrind.out.1`), not the final one written at exit.
  const dumps = readdirSync(dir).filter((name) => /^callgrind\.out\.\d+$/.test(name)).map((name) => join(dir, name))
  const totals = dumps.map((file) => /^(?:summary|totals):\s+(\d+)/m.exec(readFileSync(file, 'utf8'))?.[1] ?? '0')
  const instructions = totals.reduce((sum, total) => sum + Number(total), 0)
  console.log(`${method} /v1/categories: ${Math.round(instructions / Number(measured)).toLocaleString('en-US')} instructions per request (${measured} requests after ${warmUp})`)
} finally {
  server.kill('SIGINT')
  await new Promise((resolve) => server.once('exit', resolve))
  rmSync(dir, { recursive: true, force: true })
}

/** Sends `count` requests on 10 keep-alive connections; throws on an answer that is not 2xx. */
async function send(origin: string, count: number): Promise<void> {
  const agent = new Agent({ keepAlive: true, maxSockets: 10 })
  const body = JSON.stringify({ name: 'Ferrets', description: 'Curious and quick' })
  const headers: Record<string, string> =
    method === 'GET' ? { authorization: `Bearer ${READ_KEY}` } : { authorization: `Bearer ${WRITE_KEY}`, 'content-type': 'application/json' }
  let sent = 0
  const one = (): Promise<void> =>
    sent++ >= count
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          const req = request(`${origin}/v1/categories`, { method, agent, headers }, (res) => {
            if ((res.statusCode ?? 0) >= 300) reject(new Error(`${method} answered ${res.statusCode}`))
            res.resume().once('end', resolve)
          })
          req.once('error', reject)
          req.end(method === 'POST' ? body : undefined)
        }).then(one)
  await Promise.all(Array.from({ length: 10 }, one))
  agent.destroy()
}
