/**
 * `npx tsx bench/replica-confirm.ts [seconds] [rounds] [connections]`: what waiting for a replica
 * costs (attack15 F1). A fresh redis-server master and one replica of it; two
 * `petstore-sandbox serve --redis-url` on the master, one as by default (a create is answered once
 * the replica has it: `WAIT 1` after the write, one per burst), one with
 * `--redis-allow-failover-loss` (answered once the master has it). Prints POST and GET
 * `/v1/categories` requests per second and p99 of each, in alternating rounds (3 of 3 s, 20
 * connections by default), and the ratio of their medians.
 * A script, not a test: `test/redis/replica-failover.test.ts` checks what the answers say.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { startCliChild } from './lib/cli-child.js'
import { freePort } from './lib/exec-server.js'
import { median } from './lib/figures.js'
import { load, type Method } from './lib/load.js'
import { READ_KEY, WRITE_KEY } from './servers/keys.js'

const run = promisify(execFile)
const seconds = Number(process.argv[2] ?? 3)
const rounds = Number(process.argv[3] ?? 3)
const connections = Number(process.argv[4] ?? 20)

async function redis(port: number, dir: string, extra: readonly string[] = []): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', ...extra], { stdio: 'ignore' })
  for (let attempt = 0; ; attempt++) {
    const answer = await run('redis-cli', ['-p', String(port), 'PING']).then((out) => out.stdout, () => '')
    if (answer.includes('PONG')) return child
    if (attempt > 100) throw new Error(`redis-server on ${port} did not start`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const dir = mkdtempSync(join(tmpdir(), 'bench-replica-confirm-'))
const masterPort = await freePort()
const replicaPort = await freePort()
// Each its own file: a replica writes the copy it syncs to `dir/<dbfilename>`, which the master's shares by default.
const children = [await redis(masterPort, dir, ['--dbfilename', 'master.rdb']), await redis(replicaPort, dir, ['--dbfilename', 'replica.rdb', '--replicaof', '127.0.0.1', String(masterPort)])]
try {
  while (!/slave0:.*state=online/.test((await run('redis-cli', ['-p', String(masterPort), 'INFO', 'replication'])).stdout)) await new Promise((resolve) => setTimeout(resolve, 100))
  const url = `redis://127.0.0.1:${masterPort}`
  const common = ['--quiet', '--redis-url', url, '--api-key', WRITE_KEY, '--api-key', READ_KEY, '--max-categories', '100000', '--name-max-length', '50', '--description-max-length', '100']
  const contenders = { confirmed: await startCliChild(common), 'allow-failover-loss': await startCliChild([...common, '--redis-allow-failover-loss']) }
  const figures: Record<string, Record<Method, { rps: number[]; p99: number[] }>> = {}
  for (let round = 0; round < rounds; round++) {
    for (const [name, server] of Object.entries(contenders)) {
      for (const method of ['POST', 'GET'] as const) {
        const sample = await load(`http://127.0.0.1:${server.port}`, method, seconds, connections)
        const entry = ((figures[name] ??= { POST: { rps: [], p99: [] }, GET: { rps: [], p99: [] } })[method])
        entry.rps.push(Math.round(sample.requestsPerSecond))
        entry.p99.push(sample.p99)
      }
    }
  }
  for (const [name, byMethod] of Object.entries(figures)) {
    for (const [method, { rps, p99 }] of Object.entries(byMethod)) console.log(`${name.padEnd(20)} ${method.padEnd(4)} ${median(rps)} req/s (rounds ${rps.join(', ')}), p99 ${median(p99)} ms`)
  }
  for (const method of ['POST', 'GET'] as const) console.log(`${method} confirmed / allow-failover-loss: ${(median(figures.confirmed![method].rps) / median(figures['allow-failover-loss']![method].rps)).toFixed(3)}x`)
  await Promise.all(Object.values(contenders).map((server) => server.kill()))
} finally {
  for (const child of children) child.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}
