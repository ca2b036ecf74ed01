/**
 * `npx tsx bench/redis-long-lists.ts [reading loops] [seconds] [redis port]`: attack7 K2 at its
 * sizes. A fresh redis-server (AOF, `appendfsync always`, on `redis port` or a free one) and two
 * replicas on it, `serve --redis-url --any-key`. The attacker's key, on a scenario of
 * 19,995 categories of 200 + 2,000 characters (a 44 MB list, within every limit), creates one, then `reading
 * loops` loops each read its whole list on the first replica, over and over. A partner on the
 * second replica (which the attacker never uses) lists its categories and creates one, every
 * 200 ms, on a kept-alive connection. A PING every 10 ms on a connection of its own measures
 * Redis's latency (as `redis-cli --latency` does), and Redis's slow log its longest commands. Printed for a baseline (no reader) and with
 * the readers: the partner's p50 / p90 / max and its errors, the PINGs' p99 / max, and the lists read.
 * A script, not a test: `test/redis/long-lists.test.ts` checks the pages' bound.
 *
 * Figures (2026-11-27, Node 20, redis-server 7.0.15, 2 cores shared with four other sessions, load
 * average 2.5-9: noisy), 6 loops, partner p50 / p90 / max, Redis PING p99 / max, longest command:
 * - baseline, no reader: 4-8 / 6-63 / 14-248 ms; 1-51 / 5-153 ms; 1.9 ms;
 * - before (one `LRANGE 0 -1` a list): 7-23 / 518-727 / 1,051-2,311 ms, one partner 503; 569-708 /
 *   1,131-2,276 ms; 842 ms;
 * - after (pages of 256 KiB): 7-17 / 18-86 / 57-403 ms (one run 1,119 ms, the machine's load); 37-105
 *   / 134-305 ms; 9.5 ms. 12 loops: 11 / 49 / 168 ms; 64 / 119 ms; 6.1 ms.
 * docs/decisions/0005-redis-replicas.md (amended, attack7 K2) has the table.
 */
import { execFileSync, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { connect, createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startCliChild, type CliChild } from './lib/cli-child.js'

const loops = Number(process.argv[2] ?? 6)
const seconds = Number(process.argv[3] ?? 15)
const dir = mkdtempSync(join(tmpdir(), 'petstore-long-lists-'))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  await new Promise((resolve) => server.close(resolve))
  return typeof address === 'object' && address !== null ? address.port : 0
}

const quantile = (values: number[], q: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted.length === 0 ? Number.NaN : Math.round(sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!)
}

/** PINGs Redis every 10 ms on a connection of its own until `until` resolves; the round trips in ms. */
async function pings(port: number, until: Promise<unknown>): Promise<number[]> {
  const socket = connect(port, '127.0.0.1')
  const times: number[] = []
  let sent = 0
  socket.on('data', () => times.push(performance.now() - sent))
  let done = false
  void until.then(() => (done = true))
  while (!done) {
    sent = performance.now()
    const answered = times.length + 1
    socket.write('PING\r\n')
    while (times.length < answered && !done) await sleep(1)
    await sleep(10)
  }
  socket.destroy()
  return times
}

const scenarioFile = join(dir, 'long-list.json')
writeFileSync(
  scenarioFile,
  JSON.stringify({
    name: 'long-list',
    version: '1.0.0',
    description: '19,995 categories of 200 + 2,000 characters.',
    seed: { categories: { generate: { count: 19995, name: `${'n'.repeat(190)}{n}`, description: `${'d'.repeat(1990)}{n}` } } },
  }),
)
const redisPort = Number(process.argv[4] ?? (await freePort()))
const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'yes', '--appendfsync', 'always'], { stdio: 'ignore' })
const redisCli = (...args: string[]) => execFileSync('redis-cli', ['-p', String(redisPort), ...args], { encoding: 'utf8' })
/** The slowest commands Redis ran since the last `SLOWLOG RESET` (it logs those over 1 ms): how long the longest took, and what it was. */
const slowest = () => {
  const entries = JSON.parse(redisCli('--json', 'SLOWLOG', 'GET', '1000')) as [number, number, number, string[]][]
  const top = entries.reduce<[number, number, number, string[]] | undefined>((most, entry) => (most === undefined || entry[2] > most[2] ? entry : most), undefined)
  return top === undefined ? 'no command over 1 ms' : `${entries.length} commands over 1 ms, the longest ${(top[2] / 1000).toFixed(1)} ms (${top[3].slice(0, 4).join(' ').slice(0, 60)})`
}
const servers: CliChild[] = []
try {
  await sleep(500)
  redisCli('CONFIG', 'SET', 'slowlog-log-slower-than', '1000')
  redisCli('CONFIG', 'SET', 'slowlog-max-len', '1000')
  const args = ['--quiet', '--any-key', '--redis-url', `redis://127.0.0.1:${redisPort}`]
  // The attacked replica starts tenants on the long list; its key's first create writes it to Redis.
  const attacked = await startCliChild([...args, '--scenario', scenarioFile])
  servers.push(attacked)
  const other = await startCliChild(args)
  servers.push(other)
  const headers = (key: string) => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })
  const created = await fetch(`http://127.0.0.1:${attacked.port}/v1/categories`, { method: 'POST', headers: headers('fat1'), body: '{"name":"written"}' })
  if (created.status !== 201) throw new Error(`the create was answered ${created.status}: ${await created.text()}`)
  process.stdout.write(`bench/redis-long-lists.ts, ${loops} reading loops, ${seconds} s a run, Node ${process.version}, ${new Date().toISOString().slice(0, 16)}Z, load average ${(await import('node:os')).loadavg()[0]!.toFixed(1)}\n`)

  const run = async (label: string, readers: number) => {
    let running = true
    const stopped = sleep(seconds * 1000).then(() => (running = false))
    const read: Record<string, number> = {}
    const reader = async () => {
      while (running) {
        const response = await fetch(`http://127.0.0.1:${attacked.port}/v1/categories`, { headers: headers('fat1') })
        const body = await response.arrayBuffer()
        const key = response.status === 200 ? `200 (${Math.round(body.byteLength / 1e6)} MB)` : String(response.status)
        read[key] = (read[key] ?? 0) + 1
      }
    }
    const times: number[] = []
    const errors: Record<string, number> = {}
    const partner = async () => {
      for (let i = 0; running; i++) {
        const started = performance.now()
        const response = i % 2 === 0 ? await fetch(`http://127.0.0.1:${other.port}/v1/categories`, { headers: headers('partner') }) : await fetch(`http://127.0.0.1:${other.port}/v1/categories`, { method: 'POST', headers: headers('partner'), body: JSON.stringify({ name: `p${i}` }) })
        await response.arrayBuffer()
        times.push(performance.now() - started)
        if (response.status >= 300) errors[response.status] = (errors[response.status] ?? 0) + 1
        await sleep(100)
      }
    }
    redisCli('SLOWLOG', 'RESET')
    const [latency] = await Promise.all([pings(redisPort, stopped), partner(), ...Array.from({ length: readers }, reader)])
    process.stdout.write(
      `${label}: partner p50 / p90 / max ${quantile(times, 0.5)} / ${quantile(times, 0.9)} / ${quantile(times, 1)} ms (${times.length} requests, errors ${JSON.stringify(errors)}); ` +
        `Redis PING p99 / max ${quantile(latency, 0.99)} / ${quantile(latency, 1)} ms; ${slowest()}; lists read ${JSON.stringify(read)}\n`,
    )
  }
  await run('baseline, no reader', 0)
  await run(`${loops} loops reading the 44 MB list on the other replica`, loops)
} finally {
  for (const server of servers) await server.kill()
  redis.kill('SIGKILL')
  await sleep(200)
  rmSync(dir, { recursive: true, force: true })
}
