/**
 * `npx tsx bench/plan-flood.ts [keys] [connections]`: issue 20 attack3 G3 at its sizes. A fresh
 * redis-server with `maxmemory 14mb` and `noeviction`, one `petstore-sandbox serve --redis-url
 * --store-budget 4MiB --any-key`, then `keys` new keys (836 by default) each plan 100 answers
 * (`{"operation":"listOrders","status":500,"times":1000,"delayMs":27500}`) over `connections`
 * (32) at once. Prints Redis's memory as the flood goes, the plan book's count, then what a
 * partner's create and a new key's scenario switch are answered, and Redis's memory again once
 * the flood's lost-reply records (`redis-outcomes.ts`, kept 2 minutes and more) have gone.
 * A script, not a test: `test/redis/planned-answers.test.ts` runs the flood small.
 */
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { startCliChild } from './lib/cli-child.js'

const run = promisify(execFile)
const keys = Number(process.argv[2] ?? 836)
const connections = Number(process.argv[3] ?? 32)
const PLANS_PER_KEY = 100
const PLAN = JSON.stringify({ operation: 'listOrders', status: 500, times: 1000, delayMs: 27_500 })
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

const port = await new Promise<number>((resolve) => {
  const probe = createServer().listen(0, '127.0.0.1', () => {
    const address = probe.address()
    probe.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
  })
})
const dir = mkdtempSync(join(tmpdir(), 'petstore-plan-flood-'))
const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', '--maxmemory', '14mb', '--maxmemory-policy', 'noeviction'], { stdio: 'ignore' })
const cli = async (...args: string[]) => (await run('redis-cli', ['-p', String(port), ...args])).stdout.trim()
while (!(await cli('PING').catch(() => '')).includes('PONG')) await sleep(50)
/** How many keys Redis holds, by the last part of their name (`answers`, `ops`, `opt`, …). */
const keyKinds = async () => {
  const kinds: Record<string, number> = {}
  for (const key of (await run('redis-cli', ['-p', String(port), '--scan'], { maxBuffer: 1 << 28 })).stdout.split('\n').filter(Boolean)) {
    const kind = key.slice(key.lastIndexOf(':') + 1)
    kinds[kind] = (kinds[kind] ?? 0) + 1
  }
  return JSON.stringify(kinds)
}
const usedMb = async () => Math.round(Number(/used_memory:(\d+)/.exec(await cli('INFO', 'memory'))?.[1]) / 10_485.76) / 100

const server = await startCliChild(['--quiet', '--redis-url', `redis://127.0.0.1:${port}`, '--store-budget', '4MiB', '--any-key'])
const origin = `http://127.0.0.1:${server.port}`
const post = (path: string, key: string, body: string, method = 'POST') =>
  fetch(`${origin}${path}`, { method, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body }).then(async (response) => {
    await response.arrayBuffer()
    return response.status
  })

try {
  console.log(`partner's create before: ${await post('/v1/categories', 'partner', '{"name":"before"}')}; Redis ${await usedMb()} MB of 14`)
  const statuses = new Map<number, number>()
  let next = 0
  let peak = 0
  const began = Date.now()
  const sampler = setInterval(() => void usedMb().then((mb) => {
    peak = Math.max(peak, mb)
    console.log(`  ${((Date.now() - began) / 1000).toFixed(0)} s: ${next} keys begun, Redis ${mb} MB`)
  }), 5000)
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (next < keys) {
        const key = `flood-${next++}`
        for (let i = 0; i < PLANS_PER_KEY; i++) {
          const status = await post('/__sandbox/answers', key, PLAN)
          statuses.set(status, (statuses.get(status) ?? 0) + 1)
        }
      }
    }),
  )
  clearInterval(sampler)
  peak = Math.max(peak, await usedMb())
  console.log(`flood: ${keys * PLANS_PER_KEY} plans in ${((Date.now() - began) / 1000).toFixed(1)} s, answered ${JSON.stringify(Object.fromEntries(statuses))}`)
  console.log(`Redis after: ${await usedMb()} MB (peak sampled ${peak} MB); the book: ${await cli('GET', 'petstore-sandbox:planned')} plans of ${await cli('ZCARD', 'petstore-sandbox:plans')} tenants`)
  console.log(`partner's create: ${await post('/v1/categories', 'partner', '{"name":"after"}')}; a new key's switch: ${await post('/__sandbox/scenario', 'new-partner', '{"name":"empty"}', 'PUT')}`)
  console.log(`keys: ${await keyKinds()}`)
  // The records are kept 2 minutes past the longest a request may wait (30 s); Redis expires keys by sampling.
  await sleep(180_000)
  console.log(`3 minutes on (lost-reply records gone): Redis ${await usedMb()} MB; keys: ${await keyKinds()}`)
} finally {
  await server.kill()
  redis.kill('SIGKILL')
  rmSync(dir, { recursive: true, force: true })
}
