/**
 * `npx tsx bench/outcome-flood.ts [keys] [connections] [mix|clear|reset|plan] [maxmemory] [workers]`:
 * issue 20 attack4 H5 at a chosen size. A fresh redis-server (`noeviction`, no `maxmemory` unless
 * given, e.g. `14mb` as the attack had it: without, Redis's growth is the figure), one
 * `petstore-sandbox serve --redis-url --store-budget 4MiB --any-key` (`--workers` when given, 2 in
 * the attack), then `keys` new keys (20,000
 * by default) over `connections` (32) at once, each sending one recorded write: by default in
 * turn a journal clear (`DELETE /__sandbox/requests`), a reset (`POST /__sandbox/reset`, three
 * recorded writes: state, journal, plans), a plan (`POST /__sandbox/answers`); or only one of them. Prints Redis's `used_memory` before and after, the keys it holds by kind,
 * and how many write outcomes are on record (`redis-outcomes.ts`: kept at least 2 minutes, so
 * all of the flood's are still there when it ends, as far as their cap allows). Meanwhile a
 * partner creates a category every 100 ms, during the flood and 10 s after it: what it is answered
 * (the attack saw 503 for most of them, and for 150 s after).
 * A script, not a test: `test/redis/write-outcomes.test.ts` runs the flood small.
 */
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { startCliChild } from './lib/cli-child.js'

const run = promisify(execFile)
const keys = Number(process.argv[2] ?? 20_000)
const connections = Number(process.argv[3] ?? 32)
/** `mix` (by default: a clear, a reset, a plan in turn), or only `clear`, `reset` or `plan`. */
const kind = process.argv[4] ?? 'mix'
/** Redis's `maxmemory` (`0`: none, by default). */
const maxmemory = process.argv[5] ?? '0'
/** `--workers` of the server (1 by default). */
const workers = Number(process.argv[6] ?? 1)
const PLAN = JSON.stringify({ operation: 'listOrders', status: 500 })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const port = await new Promise<number>((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const address = probe.address()
    probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
  })
})
const dir = mkdtempSync(join(tmpdir(), 'petstore-outcome-flood-'))
const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--maxmemory', maxmemory, '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' })
const cli = async (...args: string[]) => (await run('redis-cli', ['-p', String(port), ...args], { maxBuffer: 1 << 28 })).stdout.trim()
while (!(await cli('PING').catch(() => '')).includes('PONG')) await sleep(50)
/** How many keys Redis holds, by the last part of their name (`ops`, `opt`, `jmeta`, …). */
const keyKinds = async () => {
  const kinds: Record<string, number> = {}
  for (const key of (await cli('--scan')).split('\n').filter(Boolean)) {
    const kind = key.slice(key.lastIndexOf(':') + 1)
    kinds[kind] = (kinds[kind] ?? 0) + 1
  }
  return JSON.stringify(kinds)
}
/** How many write outcomes are on record (every `opt` sorted set's entries, the tenants' and the shared one's), and what all `ops` and `opt` keys take of Redis (MB). */
const outcomesOnRecord = async () => {
  const [entries, bytes] = (await cli('EVAL', `local n, bytes = 0, 0
for _, key in ipairs(redis.call('KEYS', '*opt')) do n = n + redis.call('ZCARD', key) end
for _, pattern in ipairs({'*ops', '*opt'}) do
  for _, key in ipairs(redis.call('KEYS', pattern)) do bytes = bytes + redis.call('MEMORY', 'USAGE', key, 'SAMPLES', 0) end
end
return {n, bytes}`, '0')).split('\n').map(Number)
  return `${entries} in ${(bytes! / 1_048_576).toFixed(2)} MB`
}
const usedMb = async () => Math.round(Number(/used_memory:(\d+)/.exec(await cli('INFO', 'memory'))?.[1]) / 10_485.76) / 100

const server = await startCliChild(['--quiet', '--redis-url', `redis://127.0.0.1:${port}`, '--store-budget', '4MiB', '--any-key', ...(workers > 1 ? ['--workers', String(workers)] : [])])
const origin = `http://127.0.0.1:${server.port}`
const send = (method: string, path: string, key: string, body?: string) =>
  fetch(`${origin}${path}`, { method, headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body }).then(async (response) => {
    await response.arrayBuffer()
    return response.status
  })
const KINDS = {
  clear: (key: string) => send('DELETE', '/__sandbox/requests', key),
  reset: (key: string) => send('POST', '/__sandbox/reset', key),
  plan: (key: string) => send('POST', '/__sandbox/answers', key, PLAN),
}
const WRITES = kind === 'mix' ? Object.values(KINDS) : [KINDS[kind as keyof typeof KINDS]]

/** The partner's creates, one every 100 ms until `until()`: their statuses. */
const partnerCreates = async (until: () => boolean) => {
  const statuses: Record<number, number> = {}
  while (!until()) {
    const status = await send('POST', '/v1/categories', 'partner', '{"name":"during"}')
    statuses[status] = (statuses[status] ?? 0) + 1
    await sleep(100)
  }
  return JSON.stringify(statuses)
}

try {
  console.log(`partner's create before: ${await send('POST', '/v1/categories', 'partner', '{"name":"before"}')}; Redis ${await usedMb()} MB`)
  const before = await usedMb()
  const statuses = new Map<number, number>()
  let next = 0
  const began = Date.now()
  let flooding = true
  let peak = 0
  const partner = partnerCreates(() => !flooding)
  const watch = (async () => {
    while (flooding) {
      peak = Math.max(peak, await usedMb())
      await sleep(250)
    }
  })()
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < keys) {
        const n = next++
        const status = await WRITES[n % WRITES.length]!(`throw-away-${n}`)
        statuses.set(status, (statuses.get(status) ?? 0) + 1)
      }
    }),
  )
  const took = ((Date.now() - began) / 1000).toFixed(1)
  flooding = false
  const during = await partner
  await watch
  const after = await usedMb()
  console.log(`flood: ${keys} keys, one recorded write each (${kind}), in ${took} s, answered ${JSON.stringify(Object.fromEntries(statuses))}; the partner's creates meanwhile: ${during}`)
  console.log(`Redis used_memory: ${before} MB before, ${after} MB after (+${(after - before).toFixed(2)} MB), at most ${peak} MB${maxmemory === '0' ? '' : ` (maxmemory ${maxmemory})`}; write outcomes on record: ${await outcomesOnRecord()}`)
  console.log(`keys: ${await keyKinds()}`)
  const afterEnd = Date.now() + 10_000
  console.log(`partner's creates in the 10 s after: ${await partnerCreates(() => Date.now() > afterEnd)}`)
} finally {
  await server.kill()
  redis.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}
