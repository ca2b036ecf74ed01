/**
 * Issue 20 on Redis: an answer states the write's true outcome (F03), shared state trusts Redis's
 * clock (F11), and a Redis that may evict tenant keys is refused unless the operator accepts it
 * (F02). Each against a real redis-server.
 */
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { createSandboxApp, tenantId } from '../../src/server.js'
import { monotonicNow } from '../../src/core/clock.js'
import { redisDelayLimit, withRedisDeadline, type RedisEpoch } from '../../src/storage/redis-connection.js'
import { connectRedis, redisScript } from '../../src/storage/redis-connection.js'
import { operationId, OUTCOME_RECORD_TOTAL, replayOutcome, settleOutcome } from '../../src/storage/redis-outcomes.js'
import { openRedisStorage, type RedisStorage } from '../../src/storage/redis-storage.js'
import { StorageUnavailableError, WriteOutcomeUnknownError } from '../../src/storage/storage.js'
import { startFlakyProxy } from '../support/flaky-proxy.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { CLOCK_OFFSET_FILE_VARIABLE, CLOCK_OFFSET_VARIABLE, clockShim } from '../support/clock-shim.js'
import { evictForAMoment, freePort, REQUIRE_REDIS, startRedis, startRedisCluster, type RedisServer } from '../support/redis-server.js'
import { runCli, runCliToEnd } from '../support/sandbox-cli.js'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
const DAY_MS = 86_400_000

const create = (sandbox: RunningSandbox, name: string, key = 'partner') =>
  sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name }), signal: AbortSignal.timeout(15_000) })

async function names(sandbox: RunningSandbox, key = 'partner'): Promise<string[]> {
  for (let attempt = 0; ; attempt++) {
    const response = await sandbox.fetch('/v1/categories', { headers: auth(key) })
    if (response.status === 200 || attempt > 50) return ((await jsonOf(response)) as { name: string }[]).map((category) => category.name)
    await response.body?.cancel()
    await sleep(100)
  }
}

/** Sets an evicting `policy` on `redis`, and resolves once `sandbox` refuses a create (within about a second: it reads the policy each second). */
async function evictingRefused(sandbox: RunningSandbox, redis: { cli(...args: string[]): Promise<string> }, policy: string): Promise<void> {
  await redis.cli('CONFIG', 'SET', 'maxmemory-policy', policy)
  let status = 0
  for (let attempt = 0; attempt < 40 && status !== 503; attempt++) {
    const response = await create(sandbox, `while evicting ${attempt}`)
    status = response.status
    await response.body?.cancel()
    if (status !== 503) await sleep(100)
  }
  expect(status).toBe(503)
}

/**
 * What the journals hold, read from Redis in one script: `!journals` in the usage hash, the sum of
 * the journal weights (sorted set), the sum of the weights of the entries the journals' lists
 * really hold, and the bytes of those entries as Redis stores them.
 */
async function journalHoldings(redis: { cli(...args: string[]): Promise<string> }): Promise<{ counted: number; weights: number; lists: number; stored: number }> {
  const audit = `local counted = tonumber(redis.call('HGET', 'petstore-sandbox:usage', '!journals') or '0')
local weights, lists, stored = 0, 0, 0
local flat = redis.call('ZRANGE', 'petstore-sandbox:jweights', 0, -1, 'WITHSCORES')
for i = 2, #flat, 2 do weights = weights + tonumber(flat[i]) end
for _, key in ipairs(redis.call('KEYS', 'petstore-sandbox:{*}:jsizes')) do
  for _, size in ipairs(redis.call('LRANGE', key, 0, -1)) do lists = lists + tonumber(size) end
end
for _, key in ipairs(redis.call('KEYS', 'petstore-sandbox:{*}:journal')) do
  for _, entry in ipairs(redis.call('LRANGE', key, 0, -1)) do stored = stored + string.len(entry) end
end
return {counted, weights, lists, stored}`
  const [counted, weights, lists, stored] = (await redis.cli('EVAL', audit, '0')).trim().split('\n').map(Number)
  return { counted: counted!, weights: weights!, lists: lists!, stored: stored! }
}

/**
 * Makes every tenant but `key` idle for `ms` more: its last write and use (meta), and its scores
 * in the registry, the floors and the journals' last entries, all by Redis's time, moved back.
 */
const IDLE_ALL_BUT = `local shift = tonumber(ARGV[2])
for _, set in ipairs({'petstore-sandbox:floors', 'petstore-sandbox:jused', 'petstore-sandbox:tenants'}) do
  local flat = redis.call('ZRANGE', set, 0, -1, 'WITHSCORES')
  for i = 1, #flat, 2 do
    if flat[i] ~= ARGV[1] then redis.call('ZADD', set, string.format('%d', tonumber(flat[i + 1]) - shift), flat[i]) end
  end
end
for _, key in ipairs(redis.call('KEYS', 'petstore-sandbox:{*}:meta')) do
  if key ~= 'petstore-sandbox:{' .. ARGV[1] .. '}:meta' then
    for _, field in ipairs({'updated', 'used'}) do
      local stamp = redis.call('HGET', key, field)
      if stamp then redis.call('HSET', key, field, string.format('%d', tonumber(stamp) - shift)) end
    end
  end
end
return 1`

async function idleAllBut(redis: { cli(...args: string[]): Promise<string> }, key: string, ms: number): Promise<void> {
  await redis.cli('EVAL', IDLE_ALL_BUT, '0', tenantId(key), String(ms))
}

/** Sends a 60 KB text/plain POST (refused, journaled with its body) under `key`. */
async function junkPost(sandbox: RunningSandbox, key: string): Promise<void> {
  const response = await sandbox.fetch('/v1/categories', { method: 'POST', headers: { ...auth(key), 'content-type': 'text/plain' }, body: 'x'.repeat(60_000) })
  expect(response.status).toBeGreaterThanOrEqual(400)
  await response.body?.cancel()
}

async function statusesJournaled(sandbox: RunningSandbox, key: string): Promise<number[]> {
  const response = await sandbox.fetch('/__sandbox/requests?method=POST', { headers: auth(key) })
  expect(response.status).toBe(200)
  return ((await jsonOf(response)) as { response: { status: number } }[]).map((entry) => entry.response.status)
}

describe.runIf(REQUIRE_REDIS)('a create Redis applied but did not confirm in time', () => {
  it('is answered 201 with its id when Redis hangs (SIGSTOP) past the command timeout and thaws within the request timeout, stored once (issue 20 F03)', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 10_000, headersTimeoutMs: 5_000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    onTestFinished(() => redis.signal('SIGCONT'))
    // Redis freezes as the create reaches it (the request's reads before it were answered).
    proxy.onCommand('during the pause', () => redis.signal('SIGSTOP'))
    const answer = create(sandbox, 'during the pause')
    // Past the command timeout (2 s), within the request's deadline (9.5 s).
    await sleep(3000)
    redis.signal('SIGCONT')
    const response = await answer
    expect(response.status).toBe(201)
    expect(await jsonOf(response)).toEqual({ id: 2, name: 'during the pause' })
    expect(await names(sandbox)).toEqual(['before', 'during the pause'])
  })

  it('is answered 201 when the connection drops after Redis applied it (kill -9 before the reply), stored once (issue 20 F03)', async () => {
    const redis = await startRedis({ aof: true })
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 10_000, headersTimeoutMs: 5_000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    proxy.cut('applied-then-cut', 'after')
    const response = await create(sandbox, 'applied-then-cut')
    expect(response.status).toBe(201)
    expect(await jsonOf(response)).toEqual({ id: 2, name: 'applied-then-cut' })
    expect(await names(sandbox)).toEqual(['before', 'applied-then-cut'])
  })

  it('is answered 201 when an appendfsync-always Redis applied it and was killed -9 before its reply left, once it restarts within the request timeout (issue 20 F03)', async () => {
    const redis = await startRedis({ aof: true })
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 10_000, headersTimeoutMs: 5_000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    let restarted: Promise<void> | undefined
    // The reply is on its way (the write is in the AOF, fsynced): Redis dies, and comes back.
    proxy.cut('applied-then-killed', 'after', () => {
      restarted = redis.stop('SIGKILL').then(() => redis.start())
    })
    const response = await create(sandbox, 'applied-then-killed')
    await restarted
    expect(response.status).toBe(201)
    expect(await jsonOf(response)).toEqual({ id: 2, name: 'applied-then-killed' })
    expect(await names(sandbox)).toEqual(['before', 'applied-then-killed'])
  })

  it('is answered 503 storage_unavailable only when Redis never got it, and is not stored (issue 20 F03)', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 10_000, headersTimeoutMs: 5_000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    proxy.cut('never-sent', 'before')
    const response = await create(sandbox, 'never-sent')
    expect(response.status).toBe(503)
    expect(response.headers.get('retry-after')).toBe('5')
    expectErrorBody(await jsonOf(response), 503, 'storage_unavailable')
    expect(await names(sandbox)).toEqual(['before'])
    // The retry the 503 invites stores it once.
    expect((await create(sandbox, 'never-sent')).status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'never-sent'])
  })

  it('is answered 503 write_outcome_unknown, saying so, when Redis stays silent past the request’s time (issue 20 F03)', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 4000, headersTimeoutMs: 2000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    onTestFinished(() => redis.signal('SIGCONT'))
    proxy.onCommand('during a long pause', () => redis.signal('SIGSTOP'))
    const response = await create(sandbox, 'during a long pause')
    redis.signal('SIGCONT')
    expect(response.status).toBe(503)
    expect(response.headers.get('retry-after')).toBe('5')
    const body = await jsonOf(response)
    expectErrorBody(body, 503, 'write_outcome_unknown')
    expect((body as { message: string }).message).toContain('may or may not have been applied')
  })
})

/** Clears the journals of `count` throw-away keys, 64 at a time: `count` recorded writes of other tenants, as a replica runs them. */
async function clearJournals(storage: RedisStorage, count: number): Promise<void> {
  let next = 0
  await Promise.all(Array.from({ length: 64 }, async () => {
    while (next < count) await storage.journal(tenantId(`throw-away-${next++}`), undefined).clear()
  }))
}

const NO_SEED = { scenario: 'default', categories: [], nextCategoryId: 1 } as const

/**
 * A backup of `redis` (started with DEBUG allowed) taken after a first create, three creates after it (the beat counted
 * and confirmed past the backup's), then `blind()` (the sandbox's reads each second refused), the backup put back in
 * place (no restart, no failure the sandbox could see), and `fix()`: the answers (status and body) to the creates sent
 * two at a time for 2.5 s after, every one of which should be refused (storage lost from the first).
 */
async function restoredWhileBlind(sandbox: RunningSandbox, redis: RedisServer, blind: () => Promise<void>, fix: () => Promise<void>): Promise<string[]> {
  expect((await create(sandbox, 'in the backup')).status).toBe(201)
  await redis.cli('SAVE')
  copyFileSync(join(redis.dir, 'dump.rdb'), join(redis.dir, 'backup.rdb'))
  for (let i = 0; i < 3; i++) expect((await create(sandbox, `after the backup ${i}`)).status).toBe(201)
  await sleep(2500)
  await blind()
  copyFileSync(join(redis.dir, 'backup.rdb'), join(redis.dir, 'dump.rdb'))
  await redis.cli('DEBUG', 'RELOAD', 'NOSAVE')
  await fix()
  const answered: string[] = []
  for (const until = Date.now() + 2500; Date.now() < until; ) {
    const responses = await Promise.all([create(sandbox, 'after the fix'), create(sandbox, 'after the fix too')])
    for (const response of responses) answered.push(`${response.status} ${await response.text()}`)
    await sleep(20)
  }
  return answered
}

/** A Redis whose user `sb` may run everything, a sandbox on it as that user (its log lines kept), and the partner's first create ('before') answered 201. */
async function asUser(): Promise<{ redis: RedisServer; sandbox: RunningSandbox; lines: string[] }> {
  const redis = await startRedis()
  await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
  const lines: string[] = []
  const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'], warn: (line) => lines.push(line) })
  expect((await create(sandbox, 'before')).status).toBe(201)
  return { redis, sandbox, lines }
}

/** Runs a first worker's storage at `url` (a create, then closed), as `serve --workers` does: the epoch it told, for a worker started in its place. */
async function firstWorker(url: string): Promise<RedisEpoch> {
  let epoch: RedisEpoch | undefined
  const first = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', allowFailoverLoss: true, onEpoch: (told) => (epoch = told) })
  await first.create(tenantId('partner'), { name: 'before' }, Number.POSITIVE_INFINITY)
  await vi.waitFor(() => expect(epoch).toBeDefined(), { timeout: 5000, interval: 100 })
  await first.close()
  return epoch!
}

/** A switchover of `master` to `other`: `other` replicates it, caught up, is promoted, and `master` is demoted to a replica that takes writes. */
async function switchOver(master: RedisServer, other: RedisServer): Promise<void> {
  await master.cli('CONFIG', 'SET', 'repl-diskless-sync-delay', '0')
  await other.cli('REPLICAOF', '127.0.0.1', String(master.port))
  await vi.waitFor(async () => expect(await other.cli('INFO', 'replication')).toMatch(/master_link_status:up/), { timeout: 10_000, interval: 100 })
  await other.cli('REPLICAOF', 'NO', 'ONE')
  await master.cli('CONFIG', 'SET', 'replica-read-only', 'no')
  await master.cli('REPLICAOF', '127.0.0.1', String(other.port))
}

/**
 * A redis-server under the clock shim, its offset read from a file (`step(ms)` moves its clock),
 * the storage on it, and `flood(from, count)`: `count` journal clears of throw-away keys, 32 at a
 * time, each a recorded write of the shared outcome record.
 */
async function steppedRedis() {
  const offset = join(mkdtempSync(join(tmpdir(), 'petstore-clock-')), 'offset')
  writeFileSync(offset, '0')
  const redis = await startRedis({ env: { LD_PRELOAD: clockShim()!, [CLOCK_OFFSET_FILE_VARIABLE]: offset } })
  const storage = await openRedisStorage({ url: redis.url, seed: NO_SEED })
  onTestFinished(() => storage.close())
  const flood = async (from: number, count: number) => {
    let next = from
    await Promise.all(Array.from({ length: 32 }, async () => {
      while (next < from + count) await storage.journal(tenantId(`throw-away-${next++}`), undefined).clear()
    }))
  }
  return { redis, storage, flood, step: (ms: number) => writeFileSync(offset, String(ms)) }
}

describe.runIf(REQUIRE_REDIS)('a recorded write that reaches Redis late, from a connection the replica gave up (attack7 K1)', () => {
  it('never applies a create answered 503 storage_unavailable that reaches Redis after other keys’ writes pushed its void out of the shared record', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    // @note 20 s: at 10 s the settle ran out of the request's time once in a loaded fresh-clone CI (stop 44) and
    // answered write_outcome_unknown (true, but not what this test is about), as its sibling below did at 12 s.
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 20_000, headersTimeoutMs: 5_000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    // The network path of the replica's connection stalls as the create goes out on it: the
    // replica gives up on it, asks on a new one, and Redis, which never saw the create, voids it.
    proxy.hold('ghost')
    const response = await create(sandbox, 'ghost')
    expect(response.status).toBe(503)
    expectErrorBody(await jsonOf(response), 503, 'storage_unavailable')
    // Other keys' writes, more than the record keeps: the void is trimmed.
    const others = await openRedisStorage({ url: redis.url, seed: NO_SEED })
    onTestFinished(() => others.close())
    await clearJournals(others, OUTCOME_RECORD_TOTAL + 100)
    expect(Number(await redis.cli('ZCARD', 'petstore-sandbox:opt'))).toBe(OUTCOME_RECORD_TOTAL)
    // The stalled bytes arrive (the kernel retransmits them): the create reaches Redis.
    await proxy.deliver()
    expect(await names(sandbox)).toEqual(['before'])
    // The retry the 503 invited is stored once.
    expect((await create(sandbox, 'ghost')).status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'ghost'])
  })

  it('never applies a create answered 503 storage_unavailable that reaches Redis once the record’s time has passed and its void is gone', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    // The record's time, shortened (two minutes in service); the settle still comes well within it.
    // @note 20 s, the request 17 s: at 12 s and 9.5 s the settle ran out of time once in a loaded CI (stop 39), and
    // answered unknown (true, but not what this test is about).
    const keepMs = 20_000
    const storage = await openRedisStorage({ url: proxy.url, seed: NO_SEED, outcomeRecordMs: keepMs })
    onTestFinished(() => storage.close())
    const partner = tenantId('partner')
    const listed = async () => (await storage.readList(partner, (json) => (JSON.parse(json) as { name: string }).name))![1]
    await storage.create(partner, { name: 'before' }, Number.POSITIVE_INFINITY)
    proxy.hold('late')
    const sent = monotonicNow()
    // As a request does: its Redis work within 17 s.
    const failure = await withRedisDeadline(monotonicNow() + 17_000, () => storage.create(partner, { name: 'late' }, Number.POSITIVE_INFINITY)).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(StorageUnavailableError)
    expect(failure).not.toBeInstanceOf(WriteOutcomeUnknownError)
    await sleep(sent + keepMs + 200 - monotonicNow())
    // What Redis does by itself once the record has been idle that long (PEXPIRE): its void is gone.
    await redis.cli('DEL', 'petstore-sandbox:ops', 'petstore-sandbox:opt')
    await proxy.deliver()
    expect(await listed()).toEqual(['before'])
  })

  it('answers a create that never reached Redis "not applied" when its send time was estimated before the record began (stop 48 CI)', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    // The replica's first reading of Redis's clock comes 400 ms after Redis read it (a busy event loop): its estimates
    // of when writes are sent run 400 ms early, as far as they may (they are at or before the true time).
    proxy.onCommand('$4\r\nTIME\r\n', () =>
      setImmediate(() => {
        const until = monotonicNow() + 400
        while (monotonicNow() < until);
      }),
    )
    const storage = await openRedisStorage({ url: proxy.url, seed: NO_SEED })
    onTestFinished(() => storage.close())
    const partner = tenantId('partner')
    // The record of outcomes begins with this create (Redis's time), and the next is sent at once: by its estimate,
    // before the record began.
    await storage.create(partner, { name: 'before' }, Number.POSITIVE_INFINITY)
    proxy.hold('never arrives')
    // @note 20 s, as its siblings': the settle has time in a loaded run (10 s: unknown once beside two other suites).
    const failure = await withRedisDeadline(monotonicNow() + 20_000, () => storage.create(partner, { name: 'never arrives' }, Number.POSITIVE_INFINITY)).catch((error: unknown) => error)
    expect(failure).toBeInstanceOf(StorageUnavailableError)
    expect(failure, String(failure)).not.toBeInstanceOf(WriteOutcomeUnknownError)
    await proxy.deliver()
    expect((await storage.readList(partner, (json) => (JSON.parse(json) as { name: string }).name))![1]).toEqual(['before'])
  })

  it('applies every prompt write of a partner while other keys’ writes go through the whole record many times over', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'] })
    const others = await openRedisStorage({ url: redis.url, seed: NO_SEED })
    onTestFinished(() => others.close())
    let flooding = true
    const flood = clearJournals(others, 3 * OUTCOME_RECORD_TOTAL).finally(() => {
      flooding = false
    })
    const statuses: number[] = []
    const resets: number[] = []
    while (flooding) {
      const response = await create(sandbox, `during ${statuses.length}`)
      statuses.push(response.status)
      await response.body?.cancel()
      const cleared = await sandbox.fetch('/__sandbox/requests', { method: 'DELETE', headers: auth('partner') })
      resets.push(cleared.status)
      await cleared.body?.cancel()
    }
    await flood
    // Trimmed by the cap all along (the partner's own entries among them).
    expect(Number(await redis.cli('ZCARD', 'petstore-sandbox:opt'))).toBe(OUTCOME_RECORD_TOTAL)
    expect(statuses.length).toBeGreaterThan(5)
    expect(statuses).toEqual(statuses.map(() => 201))
    expect(resets).toEqual(resets.map(() => 204))
    expect(await names(sandbox)).toEqual(statuses.map((_, i) => `during ${i}`))
  })
})

describe.runIf(REQUIRE_REDIS)('a recorded write whose answer said its outcome (attack7 K1 and K4)', () => {
  it('never applies a reset answered 503 write_outcome_unknown that reaches Redis after the partner listed and created: the creates stay', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 4000, headersTimeoutMs: 2000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    // The replica's connection stalls as the reset (to the default scenario's seed) goes out on it,
    // and stays stalled past the request's time: Redis cannot tell in time.
    proxy.hold('Loyal companions')
    const reset = await sandbox.fetch('/__sandbox/reset', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ scenario: 'default' }) })
    expect(reset.status).toBe(503)
    expectErrorBody(await jsonOf(reset), 503, 'write_outcome_unknown')
    // What the answer says to do: list before retrying. The reset is not applied; the partner goes on.
    expect(await names(sandbox)).toEqual(['before'])
    for (const name of ['after 1', 'after 2']) expect((await create(sandbox, name)).status).toBe(201)
    // The stalled bytes arrive: the reset reaches Redis after its answer.
    await proxy.deliver()
    expect(await names(sandbox)).toEqual(['before', 'after 1', 'after 2'])
    const next = await create(sandbox, 'after 3')
    expect(await jsonOf(next)).toEqual({ id: 4, name: 'after 3' })
  })

  it('never lets a request’s journal entry whose reply was lost land after a journal clear answered later (attack9 R2)', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, apiKeys: ['partner'], requestTimeoutMs: 4000, headersTimeoutMs: 2000 })
    // A first request: Redis knows the journal's script (a held first use would be refused NOSCRIPT).
    await (await sandbox.fetch('/v1/categories', { headers: auth('partner') })).body?.cancel()
    // The replica's connection stalls as the request's journal entry goes out on it: answered all the same once its write gives up.
    proxy.hold('marker-zq78')
    const request = await sandbox.fetch('/v1/categories?marker-zq78=1', { headers: auth('partner') })
    expect(request.status).toBe(200)
    await request.body?.cancel()
    // The replica renews its stalled connection: a clear meanwhile is answered 503 (not applied), and is sent again.
    await vi.waitFor(async () => expect((await sandbox.fetch('/__sandbox/requests', { method: 'DELETE', headers: auth('partner') })).status).toBe(204), { timeout: 15_000, interval: 200 })
    // The stalled bytes arrive after the clear's answer: the entry of a request answered before it must not show.
    await proxy.deliver()
    const journal = (await jsonOf(await sandbox.fetch('/__sandbox/requests?method=GET', { headers: auth('partner') }))) as { url: string }[]
    expect(journal.filter((entry) => entry.url.includes('marker-zq78'))).toEqual([])
  })

  it('answers an admin’s tenant delete whose reply was lost as what Redis did: 204, the tenant gone', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner', 'other'], adminToken: 'root', requestTimeoutMs: 10_000, headersTimeoutMs: 5_000 })
    expect((await create(sandbox, 'keep me')).status).toBe(201)
    expect((await create(sandbox, 'other', 'other')).status).toBe(201)
    // Redis knows the delete's script from then on (a first use sends it again, which would hide the cut).
    expect((await sandbox.fetch(`/__sandbox/tenants/${tenantId('other')}`, { method: 'DELETE', headers: auth('root') })).status).toBe(204)
    const id = tenantId('partner')
    // Redis runs the delete (its arguments: `any`, then the tenant's id), and its reply is lost.
    proxy.cut(`any\r\n$${id.length}\r\n${id}\r\n`, 'after')
    const deleted = await sandbox.fetch(`/__sandbox/tenants/${id}`, { method: 'DELETE', headers: auth('root') })
    expect(deleted.status).toBe(204)
    expect(await names(sandbox)).toEqual([])
  })

  it('gives a request whose planned answer’s take lost its reply the answer it took, and the plan is used up once', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 10_000, headersTimeoutMs: 5_000 })
    const plan = await sandbox.fetch('/__sandbox/answers', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ operation: 'listOrders', status: 500, times: 2 }) })
    expect(plan.status).toBe(201)
    // The first take loads its script in Redis (a first use sends it again, which would hide the cut).
    expect((await sandbox.fetch('/v1/store/orders', { headers: auth('partner') })).status).toBe(500)
    const id = tenantId('partner')
    // Redis runs the take (its arguments: the operation, then the tenant's id), and its reply is lost.
    proxy.cut(`listOrders\r\n$${id.length}\r\n${id}\r\n`, 'after')
    const taken = await sandbox.fetch('/v1/store/orders', { headers: auth('partner') })
    expect(taken.status).toBe(500)
    expect(((await jsonOf(taken)) as { message: string }).message).toContain('(planned answer)')
    const pending = await sandbox.fetch('/__sandbox/answers', { headers: auth('partner') })
    expect(await jsonOf(pending)).toEqual([])
    expect((await sandbox.fetch('/v1/store/orders', { headers: auth('partner') })).status).toBe(200)
  })
})

describe.runIf(REQUIRE_REDIS)('the write outcomes Redis keeps on record (attack4 H5)', () => {
  it('trims by their age the entries on record once another program deleted the record’s order alone (attack72 F2)', async () => {
    const redis = await startRedis()
    const keepMs = 3000
    const storage = await openRedisStorage({ url: redis.url, seed: NO_SEED, outcomeRecordMs: keepMs })
    onTestFinished(() => storage.close())
    const partner = tenantId('partner')
    for (let i = 0; i < 60; i++) await storage.create(partner, { name: `old ${i}` }, Number.POSITIVE_INFINITY)
    const entries = async () => (await redis.cli('HKEYS', 'petstore-sandbox:ops')).split('\n').filter((field) => field !== '' && !field.startsWith('!')).length
    expect(await entries()).toBe(60)
    await redis.cli('DEL', 'petstore-sandbox:opt')
    await sleep(keepMs + 500)
    for (let i = 0; i < 10; i++) await storage.create(partner, { name: `new ${i}` }, Number.POSITIVE_INFINITY)
    // Before: 70, the 60 older than the record keeps never trimmed (nor by the cap), for as long as writes went on.
    expect(await entries()).toBeLessThanOrEqual(10)
    expect(Number(await redis.cli('ZCARD', 'petstore-sandbox:opt'))).toBe(await entries())
  })

  it('keeps those of a flood of throw-away keys’ journal clears, resets and plans in one record shared by all tenants, not two keys per tenant', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, anyKey: true })
    const keys = Array.from({ length: 150 }, (_, i) => `throw-away-${i}`)
    for (let i = 0; i < keys.length; i += 10) {
      await Promise.all(keys.slice(i, i + 10).map(async (key) => {
        expect((await sandbox.fetch('/__sandbox/requests', { method: 'DELETE', headers: auth(key) })).status).toBe(204)
        expect((await sandbox.fetch('/__sandbox/reset', { method: 'POST', headers: auth(key) })).status).toBe(200)
        expect((await sandbox.fetch('/__sandbox/answers', { method: 'POST', headers: auth(key, true), body: '{"operation":"listOrders","status":500}' })).status).toBe(201)
      }))
    }
    const outcomeKeys = (await redis.cli('--scan', '--pattern', '*op[st]')).trim().split('\n').filter(Boolean).sort()
    expect(outcomeKeys).toEqual(['petstore-sandbox:ops', 'petstore-sandbox:opt'])
    // Each key: a clear, a reset (state, journal, plans) and a plan.
    expect(Number(await redis.cli('ZCARD', 'petstore-sandbox:opt'))).toBe(keys.length * 5)
    // The partner's writes are recorded there too, and a lost reply still settled (the F03 tests above).
    expect((await create(sandbox, 'after the flood')).status).toBe(201)
  })

  it('settles every write of one outage that never reached Redis as not applied, when the first settle begins the record (review53 R5)', async () => {
    const redis = await startRedis()
    const storage = await openRedisStorage({ url: redis.url, seed: { scenario: 'default', categories: [], nextCategoryId: 1 } })
    onTestFinished(() => storage.close())
    const sent = await storage.link.redisNow()
    await sleep(50)
    for (const tenant of ['a', 'b', 'c']) {
      const settled = settleOutcome(storage.link, storage.keys(tenant), operationId(sent), new StorageUnavailableError('no reply'), 'a write never sent')
      // Before: the first "not applied", the others unknown ("the record … deleted by another program").
      await expect(settled, tenant).rejects.toSatisfy((error) => error instanceof StorageUnavailableError && !(error instanceof WriteOutcomeUnknownError))
    }
  })

  it('holds at most OUTCOME_RECORD_TOTAL of them, the oldest trimmed first, and then settles a missing write sent before the trimmed ones as unknown, never as not applied', async () => {
    const redis = await startRedis()
    const storage = await openRedisStorage({ url: redis.url, seed: { scenario: 'default', categories: [], nextCategoryId: 1 } })
    onTestFinished(() => storage.close())
    const unsent = (id: string, sent: number) => settleOutcome(storage.link, storage.keys(id), operationId(sent), new StorageUnavailableError('no reply'), 'a write never sent')
    const before = await storage.link.redisNow()
    // Nothing trimmed yet: a write Redis never ran is declared not applied (a retry is safe).
    await expect(unsent('partner', before)).rejects.toSatisfy((error) => error instanceof StorageUnavailableError && !(error instanceof WriteOutcomeUnknownError))
    // One more journal clear than the record keeps, each by a key of its own (the same script a replica runs, without HTTP).
    const writes = OUTCOME_RECORD_TOTAL + 200
    let next = 0
    await Promise.all(Array.from({ length: 64 }, async () => {
      while (next < writes) await storage.journal(tenantId(`throw-away-${next++}`), undefined).clear()
    }))
    expect(Number(await redis.cli('ZCARD', 'petstore-sandbox:opt'))).toBe(OUTCOME_RECORD_TOTAL)
    // The entries, `!trimmed` (the newest send time of one that went before its time), `!seq` (the entries' order),
    // `!born` (when the record began) and `!bornBy` (the replica whose settle began it: the first above).
    expect(Number(await redis.cli('HLEN', 'petstore-sandbox:ops'))).toBe(OUTCOME_RECORD_TOTAL + 4)
    expect((await redis.cli('--scan', '--pattern', '*op[st]')).trim().split('\n').sort()).toEqual(['petstore-sandbox:ops', 'petstore-sandbox:opt'])
    // The oldest on record is settled as applied; a write sent before the flood and missing now may
    // have been trimmed: unknown (should it still arrive, it is refused: attack7 K1). One sent
    // since the newest entry trimmed would be on record: not applied.
    const oldest = (await redis.cli('ZRANGE', 'petstore-sandbox:opt', '0', '0')).trim()
    expect(await settleOutcome(storage.link, storage.keys('any'), oldest, new StorageUnavailableError('no reply'), 'a clear')).toBe('1')
    await expect(unsent('partner', before)).rejects.toBeInstanceOf(WriteOutcomeUnknownError)
    await expect(unsent('partner', await storage.link.redisNow())).rejects.toSatisfy((error) => error instanceof StorageUnavailableError && !(error instanceof WriteOutcomeUnknownError))
  })
})

describe.runIf(REQUIRE_REDIS)('time on Redis', () => {
  it.runIf(clockShim() !== undefined)('answers every tenant’s creates 201 on a Redis Cluster one of whose masters runs 35 s ahead of the others (attack9 R5)', async () => {
    const skewed: Record<string, string> = { LD_PRELOAD: clockShim()!, [CLOCK_OFFSET_VARIABLE]: '35000' }
    const cluster = await startRedisCluster({ envOf: (node) => (node === 2 ? skewed : {}) })
    const storage = await openRedisStorage({ url: cluster.url, seed: NO_SEED })
    onTestFinished(() => storage.close())
    const ahead = cluster.nodes[2]!.port
    const tenants = Array.from({ length: 12 }, (_, i) => `t${i}`)
    const onAhead: string[] = []
    for (const tenant of tenants) if ((await cluster.masterOf(storage.keys(tenant).meta)) === ahead) onAhead.push(tenant)
    // Before: the tenants on the master ahead got 503 storage_unavailable on every create (late by the slowest master's clock).
    expect(onAhead.length).toBeGreaterThan(0)
    for (const tenant of tenants) expect(await storage.create(tenant, { name: 'created' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'created' })
  })

  it.runIf(clockShim() !== undefined).each([
    ['ahead', '35000', 'attack13 T4'],
    ['behind', '-35000', 'attack13 T3'],
  ])('answers a tenant’s creates 201 right after its slot moves to a master 35 s %s, and tells the operator the masters’ clocks differ (offset %s, %s)', async (_where, offset) => {
    const skewed: Record<string, string> = { LD_PRELOAD: clockShim()!, [CLOCK_OFFSET_VARIABLE]: offset }
    const cluster = await startRedisCluster({ envOf: (node) => (node === 2 ? skewed : {}) })
    const warnings: string[] = []
    const storage = await openRedisStorage({ url: cluster.url, seed: NO_SEED, warn: (line) => warnings.push(line) })
    onTestFinished(() => storage.close())
    const ahead = cluster.nodes[2]!.port
    let tenant = ''
    for (let i = 0; tenant === ''; i++) if ((await cluster.masterOf(storage.keys(`t${i}`).meta)) !== ahead) tenant = `t${i}`
    expect(await storage.create(tenant, { name: 'before the move' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'before the move' })
    // Another tenant on the master ahead: its clock is read too.
    let other = ''
    for (let i = 0; other === ''; i++) if ((await cluster.masterOf(storage.keys(`o${i}`).meta)) === ahead) other = `o${i}`
    expect(await storage.create(other, { name: 'on the master ahead' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'on the master ahead' })
    expect(warnings.filter((line) => line.startsWith('clocks apart'))).toHaveLength(1)
    await cluster.moveSlot(storage.keys(tenant).meta, ahead)
    // Before: every create for 5 s refused as late (503), its times estimated from the master it left.
    const outcomes: string[] = []
    for (let i = 0; i < 20; i++) outcomes.push(await storage.create(tenant, { name: `after ${i}` }, Number.POSITIVE_INFINITY).then(() => 'created', (error: unknown) => (error as Error).message))
    expect(outcomes).toEqual(Array(20).fill('created'))
  })

  it.runIf(clockShim() !== undefined)('refuses a write sent before Redis’s clock stepped back and delivered after it, yet takes the creates sent after the step at once (attack9 R4)', async () => {
    const { storage, step } = await steppedRedis()
    expect(await storage.create(tenantId('partner'), { name: 'before the step' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'before the step' })
    const sent = await storage.link.redisNow()
    const held = operationId(sent, sent + 30_000)
    step(-60_000)
    // A recorded write's first lines, as every write script has them: this one arrives after the step.
    const late = redisScript(`${replayOutcome('KEYS[1]', 1, 2)}\nreturn 'applied'`)
    const keys = storage.keys(tenantId('partner'))
    // Before: applied (its deadline 30 s after its send time, 90 s ahead of Redis's clock now), after its answer.
    await expect(storage.link.script(late, [keys.outcomes], [held, keys.outcomeMs])).rejects.toMatchObject({ message: 'LATE' })
    // A create timed by the reading kept from before the step is refused late, timed anew and sent again: 201.
    expect(await storage.create(tenantId('partner'), { name: 'after the step' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'after the step' })
  })

  it.runIf(clockShim() !== undefined)('keeps refusing a write declared not applied when Redis’s clock jumps forward past the record’s time and back (attack15 U1)', async () => {
    const { storage, flood, step } = await steppedRedis()
    const keys = storage.keys(tenantId('partner'))
    const sent = await storage.link.redisNow()
    const held = operationId(sent, sent + 30_000)
    await expect(settleOutcome(storage.link, keys, held, new StorageUnavailableError('no reply'), 'a create')).rejects.toSatisfy((error) => error instanceof StorageUnavailableError && !(error instanceof WriteOutcomeUnknownError))
    // A wrong jump forward, past the two minutes the record keeps an entry: the next write drops the void as old.
    step(200_000)
    await storage.link.readClockAgain(keys.outcomes)
    await flood(0, 20)
    step(0)
    const late = redisScript(`${replayOutcome('KEYS[1]', 1, 2)}\nreturn 'applied'`)
    // Before: applied, its void dropped unmarked, neither its age nor its deadline late by the clock put back.
    await expect(storage.link.script(late, [keys.outcomes], [held, keys.outcomeMs])).rejects.toMatchObject({ message: 'LATE' })
  })

  it.runIf(clockShim() !== undefined)('answers a create 201 right after Redis’s clock jumps a minute forward, timing it anew (attack15 N1)', async () => {
    const { storage, step } = await steppedRedis()
    expect(await storage.create(tenantId('partner'), { name: 'before the jump' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'before the jump' })
    step(60_000)
    // Before: refused late (503) for a second or two, its deadline estimated by the reading kept from before the jump.
    expect(await storage.create(tenantId('partner'), { name: 'after the jump' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'after the jump' })
  })

  it('refuses a tenant’s writes while its slot is half moved (TRYAGAIN) without saying its master fails, and serves them once moved (attack15 L1)', async () => {
    const cluster = await startRedisCluster()
    const warnings: string[] = []
    const storage = await openRedisStorage({ url: cluster.url, seed: NO_SEED, warn: (line) => warnings.push(line) })
    onTestFinished(() => storage.close())
    const tenant = 'moving'
    expect(await storage.create(tenant, { name: 'before' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'before' })
    const meta = storage.keys(tenant).meta
    const from = await cluster.masterOf(meta)
    const source = cluster.nodes.find((node) => node.port === from)!
    const target = cluster.nodes.find((node) => node.port !== from)!
    const slot = (await source.cli('CLUSTER', 'KEYSLOT', meta)).trim()
    const [sourceId, targetId] = await Promise.all([source, target].map(async (node) => (await node.cli('CLUSTER', 'MYID')).trim()))
    await target.cli('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId!)
    await source.cli('CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId!)
    // One of the tenant's keys moved, the others not: its scripts get TRYAGAIN.
    await source.cli('MIGRATE', '127.0.0.1', String(target.port), '', '0', '5000', 'KEYS', meta)
    const statuses = await Promise.all(Array.from({ length: 10 }, (_, i) => storage.create(tenant, { name: `during ${i}` }, Number.POSITIVE_INFINITY).then(() => 'created', (error: unknown) => (error as Error).message)))
    expect(statuses.every((status) => status.includes('TRYAGAIN')), statuses.join('\n')).toBe(true)
    // Before: each TRYAGAIN said the master failed, and the next answer that it recovered.
    expect(warnings.filter((line) => line.startsWith('storage failing'))).toEqual([])
    await cluster.moveSlot(meta, target.port)
    expect(await storage.create(tenant, { name: 'after' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'after' })
  })

  it.runIf(clockShim() !== undefined)('takes writes again within seconds when Redis’s clock steps back 10 minutes just after a flood filled the shared outcome record (attack9 R1)', async () => {
    const { redis, storage, flood, step } = await steppedRedis()
    // Other keys' journal clears past what the record keeps: it trims by its cap, and marks the newest trimmed.
    await flood(0, OUTCOME_RECORD_TOTAL + 200)
    expect(await redis.cli('HGET', 'petstore-sandbox:ops', '!trimmed')).not.toBe('\n')
    step(-600_000)
    // The replica keeps its last reading of Redis's clock 5 s: past it, its estimates follow the step.
    await new Promise((resolve) => setTimeout(resolve, 6000))
    await storage.link.redisNow()
    // Before: every write refused as late (its send time below the mark) until the record expired, two minutes on.
    await vi.waitFor(async () => expect(await storage.create(tenantId('partner'), { name: 'after the step' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'after the step' }), { timeout: 15_000, interval: 500 })
  })

  it.runIf(clockShim() !== undefined)('refuses no write sent after Redis’s clock stepped back 10 minutes while the entries recorded before the step are trimmed, however many run at once (attack13 T1)', async () => {
    const { storage, flood, step } = await steppedRedis()
    await flood(0, OUTCOME_RECORD_TOTAL + 200)
    step(-600_000)
    await new Promise((resolve) => setTimeout(resolve, 6000))
    await storage.link.redisNow()
    // The first write after the step may find the mark and rebase it (attack9 R1); then none is refused.
    await vi.waitFor(async () => expect(await storage.create(tenantId('partner'), { name: 'first' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'first' }), { timeout: 15_000, interval: 500 })
    // Every write now trims an entry recorded before the step (sent "later" than now, by the clock as it was).
    const outcomes: string[] = []
    await Promise.all([
      flood(100_000, 4000),
      ...Array.from({ length: 4 }, async (_, loop) => {
        for (let i = 0; i < 60; i++) {
          outcomes.push(await storage.create(tenantId('partner'), { name: `${loop}-${i}` }, Number.POSITIVE_INFINITY).then(() => 'created', (error: unknown) => (error as Error).message))
        }
      }),
    ])
    // Before: most of them refused as late (503 storage_unavailable), for as long as the step.
    expect(outcomes.filter((outcome) => outcome !== 'created')).toEqual([])
  })

  it.runIf(clockShim() !== undefined)('settles a write applied before Redis’s clock stepped back, its entry trimmed since, as unknown, never as not applied; and keeps the void of one sent before the step while it may still arrive (attack13 T7, T6)', async () => {
    const { redis, storage, flood, step } = await steppedRedis()
    await flood(0, OUTCOME_RECORD_TOTAL)
    // A write Redis applied (a clear), then trimmed from the record by the writes after it.
    const applied = (await redis.cli('ZRANGE', 'petstore-sandbox:opt', '0', '0')).trim()
    await flood(OUTCOME_RECORD_TOTAL, 200)
    expect((await redis.cli('HGET', 'petstore-sandbox:ops', applied)).trim()).toBe('')
    const beforeStep = await storage.link.redisNow()
    step(-60_000)
    const settle = (op: string) => settleOutcome(storage.link, storage.keys('any'), op, new StorageUnavailableError('no reply'), 'a write')
    // Before: the mark, later than Redis's now, was moved to now: "not late", so declared not applied (503 storage_unavailable, a retry duplicating it).
    await expect(settle(applied)).rejects.toBeInstanceOf(WriteOutcomeUnknownError)
    // A write sent just before the step, never run: declared not applied, and its void stays on record while it may arrive (its deadline, by Redis's clock now).
    const unsent = operationId(beforeStep, beforeStep + 30_000)
    await expect(settle(unsent)).rejects.toSatisfy((error) => error instanceof StorageUnavailableError && !(error instanceof WriteOutcomeUnknownError))
    await flood(100_000, 300)
    // Before: the void, scored below every entry recorded before the step, was trimmed by its own record.
    expect((await redis.cli('HGET', 'petstore-sandbox:ops', unsent)).trim()).toBe('void')
  })

  it('a replica whose clock runs 40 days ahead, past the 30-day TTL, sweeps no tenant of the shared Redis (issue 20 F11)', async () => {
    const redis = await startRedis()
    const options = { redisUrl: redis.url, scenario: 'empty', anyKey: true, tenantTtlDays: 30 } as const
    const honest = await startSandbox(options)
    for (const key of ['partner-a', 'partner-b']) expect((await create(honest, `kept for ${key}`, key)).status).toBe(201)

    const realNow = Date.now
    Date.now = () => realNow() + 40 * DAY_MS
    onTestFinished(() => {
      Date.now = realNow
    })
    const ahead = await startSandbox(options)
    // The start's sweep runs unawaited; this one is awaited, as the hourly sweep is.
    expect(await ahead.sandbox.tenants.expireIdle(30 * DAY_MS)).toBe(0)
    expect((await create(ahead, 'written from ahead', 'partner-c')).status).toBe(201)
    Date.now = realNow

    for (const key of ['partner-a', 'partner-b']) expect(await names(honest, key)).toEqual([`kept for ${key}`])
    // What the replica ahead wrote carries Redis's time: an honest sweep does not keep it forever.
    const stamp = Number((await redis.cli('HGET', `petstore-sandbox:{${tenantId('partner-c')}}:meta`, 'updated')).trim())
    expect(Math.abs(stamp - Date.now())).toBeLessThan(DAY_MS)
    expect(await honest.sandbox.tenants.expireIdle(30 * DAY_MS)).toBe(0)
  })

  it('refuses at once a Prefer: delay that would leave Redis no time, and answers 201 after the longest it allows, all within the request timeout (attack finding: 503 storage_unavailable from a healthy Redis)', async () => {
    const redis = await startRedis()
    const requestTimeoutMs = 2_000
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs, headersTimeoutMs: 1_000 })
    const post = (delay: number) =>
      sandbox.fetch('/v1/categories', { method: 'POST', headers: { ...auth('partner', true), prefer: `delay=${delay}` }, body: JSON.stringify({ name: `after ${delay} ms` }), signal: AbortSignal.timeout(15_000) })
    const limit = redisDelayLimit(requestTimeoutMs)
    const tooLong = await post(1_990)
    const body = (await jsonOf(tooLong)) as { message: string }
    expectErrorBody(body, 400, 'invalid_prefer')
    expect(body.message).toContain(`from 0 to ${limit}`)
    const started = Date.now()
    const created = await post(limit)
    expect(created.status, JSON.stringify(await created.clone().json())).toBe(201)
    expect(Date.now() - started).toBeLessThan(requestTimeoutMs + 1_000)
    expect(await names(sandbox)).toEqual([`after ${limit} ms`])
  })
})

describe.runIf(REQUIRE_REDIS)('a Redis that may evict tenant keys', () => {
  it.each(['volatile-lru', 'allkeys-lru', 'allkeys-random', 'volatile-ttl'])('is refused at start when its maxmemory-policy is %s, with the reason and the flag that accepts it (issue 20 F02)', async (policy) => {
    const redis = await startRedis()
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', policy)
    await expect(createSandboxApp({ redisUrl: redis.url, demoDir: false })).rejects.toThrow(`its maxmemory-policy is ${policy}`)
    const refused = await runCliToEnd(['serve', '--port', '0', '--redis-url', redis.url])
    expect(refused.code).toBe(1)
    expect(refused.stderr.trim().split('\n')).toHaveLength(1)
    expect(refused.stderr).toContain(`maxmemory-policy is ${policy}`)
    expect(refused.stderr).toContain('--redis-allow-eviction')
    const accepted = await createSandboxApp({ redisUrl: redis.url, demoDir: false, redisAllowEviction: true })
    await accepted.close()
  })

  it('reads the policy from INFO where CONFIG is disabled, as on managed Redis (issue 20 F02)', async () => {
    const redis = await startRedis()
    await redis.stop()
    await redis.start({ extraArgs: ['--maxmemory-policy', 'volatile-lru', '--rename-command', 'CONFIG', ''] })
    await expect(createSandboxApp({ redisUrl: redis.url, demoDir: false })).rejects.toThrow('its maxmemory-policy is volatile-lru')
  })

  it.each([
    ['--redis-allow-eviction', ['--redis-allow-eviction'], {}],
    ['PETSTORE_SANDBOX_REDIS_ALLOW_EVICTION=1', [], { PETSTORE_SANDBOX_REDIS_ALLOW_EVICTION: '1' }],
  ])('serves a Redis that may evict with %s', async (_name, flag, env) => {
    const redis = await startRedis()
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru')
    const port = await freePort()
    const run = runCli(['serve', '--port', String(port), '--api-key', 'partner', '--scenario', 'empty', '--quiet', '--redis-url', redis.url, ...flag], env)
    await run.waitFor('is running')
    expect((await fetch(`http://127.0.0.1:${port}/v1/categories`, { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name: 'x' }) })).status).toBe(201)
  })

  it('answers 503 and says degraded once Redis comes back with an evicting policy (issue 20 F02)', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 5000, headersTimeoutMs: 2000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    // Kept across the restart (a restart that loses the keys is refused for good: attack23 R1).
    await redis.cli('SAVE')
    await redis.stop()
    await redis.start({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] })
    let health: { status?: string; storage?: { ok?: boolean } } = {}
    for (let attempt = 0; attempt < 50 && health.status !== 'degraded'; attempt++) {
      await sandbox.fetch('/v1/categories', { headers: auth('partner') }).then((response) => response.body?.cancel())
      health = (await jsonOf(await sandbox.fetch('/__sandbox/health'))) as typeof health
      if (health.status !== 'degraded') await sleep(100)
    }
    expect(health).toMatchObject({ status: 'degraded', storage: { ok: false } })
    const refused = await create(sandbox, 'while evicting')
    expect(refused.status).toBe(503)
    expectErrorBody(await jsonOf(refused), 503, 'storage_unavailable')
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    for (let attempt = 0; attempt < 50 && health.status !== 'ok'; attempt++) {
      health = (await jsonOf(await sandbox.fetch('/__sandbox/health'))) as typeof health
      if (health.status !== 'ok') await sleep(100)
    }
    expect((await create(sandbox, 'after')).status).toBe(201)
  })

  it('refuses writes within about a second of an evicting policy set on a running Redis that never failed, and serves again once it is fixed (re-attack finding: never noticed, creates kept getting 201)', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 5000, headersTimeoutMs: 2000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-lru')
    const statuses: number[] = []
    for (let attempt = 0; attempt < 40 && statuses.at(-1) !== 503; attempt++) {
      const response = await create(sandbox, `while evicting ${attempt}`)
      statuses.push(response.status)
      if (response.status === 503) expectErrorBody(await jsonOf(response), 503, 'storage_unavailable')
      else await response.body?.cancel()
      await sleep(100)
    }
    // Within about a second (10 creates 100 ms apart), then refused.
    expect(statuses.at(-1), statuses.join(' ')).toBe(503)
    expect(statuses.length, statuses.join(' ')).toBeLessThanOrEqual(20)
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    let after = 503
    for (let attempt = 0; attempt < 40 && after !== 201; attempt++) {
      const response = await create(sandbox, 'after the fix')
      after = response.status
      await response.body?.cancel()
      if (after !== 201) await sleep(100)
    }
    expect(after).toBe(201)
  })

  it('says storage refused again when a Redis met after a failure still evicts, rather than leave recovered as the last word (new-user trial)', async () => {
    const redis = await startRedis()
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 5000, headersTimeoutMs: 2000, warn: (line) => lines.push(line) })
    expect((await create(sandbox, 'before')).status).toBe(201)
    const restartEvicting = async () => {
      // Restarted with what it held (a restart that lost the sandbox's keys is refused for good: storage lost).
      await redis.cli('SAVE')
      await redis.stop()
      await redis.start({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] })
      const seen = lines.length
      for (let attempt = 0; attempt < 100 && !lines.slice(seen).some((line) => line.startsWith('storage refused')); attempt++) {
        await sandbox.fetch('/v1/categories', { headers: auth('partner') }).then((response) => response.body?.cancel())
        await sleep(100)
      }
      return lines.slice(seen)
    }
    // The operator's last word on Redis, each time it comes back evicting, says it is refused.
    const saysRefused = (lines: string[]) => {
      const last = lines.filter((line) => /^storage (refused|recovered|accepted)/.test(line)).at(-1) ?? ''
      return last.startsWith('storage refused') || last.includes('still refused')
    }
    const first = await restartEvicting()
    expect(saysRefused(first), first.join('\n')).toBe(true)
    // Refused already; Redis fails again and comes back evicting still.
    const again = await restartEvicting()
    expect(again.some((line) => line.startsWith('storage recovered')), again.join('\n')).toBe(true)
    expect(saysRefused(again), again.join('\n')).toBe(true)
    const refused = await create(sandbox, 'while evicting')
    expect(refused.status).toBe(503)
  })

  it('serves no command from a Redis that came back evicting before its policy is read: the first after the reconnection waits for the read (issue 20 redis2: eviction refusal re-checked by requests)', async () => {
    const redis = await startRedis()
    const link = await connectRedis({ url: redis.url, warn: () => undefined })
    onTestFinished(() => link.close())
    await redis.stop()
    await redis.start({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] })
    // The first command answered after the restart…
    for (let attempt = 0; ; attempt++) {
      try {
        await link.call(undefined, ['PING'])
        break
      } catch (error) {
        if (attempt > 100) throw error
        await sleep(50)
      }
    }
    // …and the script right behind it: refused, never run on the evicting Redis.
    await expect(link.script(redisScript("return redis.call('SET', KEYS[1], '1')"), ['written-while-evicting'], [])).rejects.toThrow('maxmemory-policy is allkeys-lru')
    expect((await redis.cli('EXISTS', 'written-while-evicting')).trim()).toBe('0')
  })

  it('recovers from an evicting policy on API requests alone, within about a second of the fix, without a health probe (issue 20 redis2: eviction refusal re-checked by requests)', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 5000, headersTimeoutMs: 2000 })
    expect((await create(sandbox, 'before')).status).toBe(201)
    // Kept across the restart (a restart that loses the keys is refused for good: attack23 R1).
    await redis.cli('SAVE')
    await redis.stop()
    await redis.start({ extraArgs: ['--maxmemory-policy', 'allkeys-lru'] })
    // Reads from the restart on, through the client's reconnection (its backoff is at most 1 s):
    // none is served before the policy is read, so every one is refused.
    const statuses = new Set<number>()
    for (const until = Date.now() + 2500; Date.now() < until; ) {
      const read = await sandbox.fetch('/v1/categories', { headers: auth('partner') })
      statuses.add(read.status)
      if (read.status === 503) expectErrorBody(await jsonOf(read), 503, 'storage_unavailable')
      else await read.body?.cancel()
      await sleep(50)
    }
    expect([...statuses]).toEqual([503])
    expect((await create(sandbox, 'while evicting')).status).toBe(503)
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    // Only API requests from here on: no GET /__sandbox/health.
    let status = 0
    for (let attempt = 0; attempt < 40 && status !== 201; attempt++) {
      const response = await create(sandbox, 'after')
      status = response.status
      await response.body?.cancel()
      if (status !== 201) await sleep(250)
    }
    expect(status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'after'])
  })
  it('checks the epoch before the first command once an evicting policy is fixed: a backup restored in place meanwhile is refused, not served from (attack46 F1)', async () => {
    const redis = await startRedis()
    await redis.stop()
    await redis.start({ extraArgs: ['--enable-debug-command', 'yes'] })
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 5000, headersTimeoutMs: 2000 })
    const answered = await restoredWhileBlind(
      sandbox,
      redis,
      () => evictingRefused(sandbox, redis, 'allkeys-lru'),
      async () => void (await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')),
    )
    // Before: 201 {"id":2} and on, ids answered 201 before the backup was put back, until the next second's read.
    expect(answered.filter((answer) => !answer.startsWith('503')), answered.slice(0, 3).join('\n')).toEqual([])
  })

  it('counts a Redis first met behind its address (a failover to a node that evicted keys in its past, and back) from what it says then, not as keys evicted while serving (review41 R1)', async () => {
    const [first, other] = await Promise.all([startRedis(), startRedis()])
    // The other node evicted keys once, long before.
    await other.cli('CONFIG', 'SET', 'maxmemory-policy', 'allkeys-random')
    const used = Number(/used_memory:(\d+)/.exec(await other.cli('INFO', 'memory'))?.[1])
    await other.cli('CONFIG', 'SET', 'maxmemory', String(used + 256 * 1024))
    for (let i = 0; i < 24; i++) await other.cli('SET', `old:${i}`, 'o'.repeat(32 * 1024))
    expect(Number(/evicted_keys:(\d+)/.exec(await other.cli('INFO', 'stats'))?.[1])).toBeGreaterThan(0)
    await other.cli('CONFIG', 'SET', 'maxmemory', '0')
    await other.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    const proxy = await startFlakyProxy(first.port)
    const lines: string[] = []
    const link = await connectRedis({ url: proxy.url, warn: (line) => lines.push(line) })
    onTestFinished(() => link.close())
    const answered = async (value: string) => {
      for (let attempt = 0; ; attempt++) {
        try {
          return await link.call('probe', ['SET', 'probe', value])
        } catch (error) {
          if (attempt > 60) throw error
          await sleep(50)
        }
      }
    }
    await answered('first')
    proxy.moveTo(other.port)
    // Before: "storage lost: … evicted 22 keys (INFO evicted_keys 0 -> 22 …)", every command refused.
    await answered('other')
    expect(await other.cli('GET', 'probe')).toContain('other')
    proxy.moveTo(first.port)
    await answered('first again')
    expect(await first.cli('GET', 'probe')).toContain('first again')
    expect(lines.filter((line) => line.startsWith('storage lost')), lines.join('\n')).toEqual([])
  })

  it('reads the count of keys evicted each second when idle with --redis-allow-failover-loss: evictions, then a restart (a new run counting from 0), are storage lost, not served (attack49 F2)', async () => {
    const redis = await startRedis({ aof: true })
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, redisAllowFailoverLoss: true, warn: (line) => lines.push(line) })
    const tenants = Array.from({ length: 8 }, (_, index) => `tenant-${index}`)
    for (const key of tenants) for (let i = 0; i < 5; i++) expect((await create(sandbox, `${key} ${i}`, key)).status).toBe(201)
    // Idle, the sandbox: an operator lets Redis evict keys with a time to live (tenants'), a moment, and back.
    expect(await evictForAMoment(redis)).toBeGreaterThan(0)
    await sleep(2500)
    // Restarted from its AOF (which holds the evictions): a new run, its count from 0.
    await redis.stop('SIGTERM')
    await redis.start()
    // Before: never read while idle, the evictions unseen: every create 201, ids handed out again.
    for (const key of tenants) {
      const refused = await create(sandbox, `${key} after`, key)
      expect(refused.status, key).toBe(503)
      expectErrorBody(await jsonOf(refused), 503, 'storage_unavailable')
    }
    expect(lines.filter((line) => line.startsWith('storage lost'))).toHaveLength(1)
  })

  it('takes keys Redis evicted while an operator had set an evicting policy for storage lost: refused until restart once noeviction is back, rather than serve what is left and hand out ids again (attack41 F1)', async () => {
    const redis = await startRedis()
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, requestTimeoutMs: 5000, headersTimeoutMs: 2000, warn: (line) => lines.push(line) })
    const tenants = Array.from({ length: 8 }, (_, index) => `tenant-${index}`)
    for (const key of tenants) for (let i = 0; i < 5; i++) expect((await create(sandbox, `${key} ${i}`, key)).status).toBe(201)
    // The operator lets Redis evict, and fills it past a lowered maxmemory: keys go, tenants' among them.
    await evictingRefused(sandbox, redis, 'allkeys-random')
    const used = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))?.[1])
    await redis.cli('CONFIG', 'SET', 'maxmemory', String(used + 256 * 1024))
    const filler = 'f'.repeat(32 * 1024)
    for (let i = 0; i < 24; i++) await redis.cli('SET', `filler:${i}`, filler)
    expect(Number(/evicted_keys:(\d+)/.exec(await redis.cli('INFO', 'stats'))?.[1])).toBeGreaterThan(0)
    await redis.cli('CONFIG', 'SET', 'maxmemory', '0')
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    // Every tenant's create from here on is refused, the lost ones' and the others' (which went cannot be told).
    for (const key of tenants) {
      const refused = await create(sandbox, `${key} after`, key)
      expect(refused.status, key).toBe(503)
      expectErrorBody(await jsonOf(refused), 503, 'storage_unavailable')
    }
    expect(await jsonOf(await sandbox.fetch('/__sandbox/health'))).toMatchObject({ status: 'degraded', storage: { ok: false } })
    const lost = lines.filter((line) => line.startsWith('storage lost'))
    expect(lost, lines.join('\n')).toHaveLength(1)
    // Found by the count of evicted keys, or by the epoch key among those evicted (CI saw the latter): both say lost.
    expect(lost[0]).toMatch(/INFO evicted_keys|no longer holds the sandbox's keys/)
  })
})

describe.runIf(REQUIRE_REDIS)('what tenants hold in Redis', () => {
  it('is bounded by the store budget, counted and refused in the write’s own script: keys flooding a Redis with maxmemory get 503 over_capacity, Redis never fills nor evicts, another partner’s data stays, a reset makes room (issue 20 F02)', async () => {
    const redis = await startRedis()
    await redis.cli('CONFIG', 'SET', 'maxmemory', '16mb')
    const budget = 512 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, maxCategories: 50, journalBytes: 32 * 1024, storeBudgetBytes: budget })
    const acknowledged: string[] = []
    for (let i = 0; i < 10; i++) {
      expect((await create(sandbox, `victim ${i}`)).status).toBe(201)
      acknowledged.push(`victim ${i}`)
    }
    const description = 'd'.repeat(2000)
    // Keys of 50 categories of 2 KB each (the category limit) until the store refuses.
    let refusal: { code: string; message: string } | undefined
    let keys = 0
    for (; keys < 20 && refusal === undefined; keys++) {
      for (let i = 0; i < 50 && refusal === undefined; i++) {
        const response = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(`flood-${keys}`, true), body: JSON.stringify({ name: `flood ${i}`, description }) })
        if (response.status === 201) {
          await response.body?.cancel()
          continue
        }
        expect(response.status).toBe(503)
        expect(response.headers.get('retry-after')).toBe('30')
        refusal = (await jsonOf(response)) as { code: string; message: string }
      }
    }
    expect(refusal, 'refused before 20 keys of 100 KB').toBeDefined()
    expectErrorBody(refusal, 503, 'over_capacity')
    expect(keys).toBeGreaterThan(2)
    const counted = Number((await redis.cli('HGET', 'petstore-sandbox:usage', '!total')).trim())
    expect(counted).toBeLessThanOrEqual(budget)
    expect(await redis.cli('INFO', 'stats')).toMatch(/evicted_keys:0\r?\n/)
    expect(await names(sandbox)).toEqual(acknowledged)
    // A reset gives a flood key's bytes back: the victim writes again.
    const reset = await sandbox.fetch('/__sandbox/reset', { method: 'POST', headers: auth('flood-0') })
    expect(reset.status).toBe(200)
    expect((await create(sandbox, 'after the reset')).status).toBe(201)
    expect(Number((await redis.cli('HGET', 'petstore-sandbox:usage', '!total')).trim())).toBeLessThan(counted)
  })

  it('refuses a scenario switch past the store budget, writing nothing (issue 20 F02)', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: 256 * 1024 })
    expect((await create(sandbox, 'kept')).status).toBe(201)
    const response = await sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('partner', true), body: JSON.stringify({ name: 'large-catalog' }) })
    expect(response.status).toBe(503)
    expectErrorBody(await jsonOf(response), 503, 'over_capacity')
    expect(await names(sandbox)).toEqual(['kept'])
  })

  it('stores nothing for a first create refused 409 category_limit (a seed past --max-categories): no key, nothing counted (attack8 A3)', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'large-catalog', anyKey: true, maxCategories: 100, storeBudgetBytes: 8 * 1024 * 1024 })
    for (let i = 0; i < 3; i++) expectErrorBody(await jsonOf(await create(sandbox, 'x', `refused-${i}`)), 409, 'category_limit')
    for (let i = 0; i < 3; i++) expect((await redis.cli('EXISTS', `petstore-sandbox:{${tenantId(`refused-${i}`)}}:cats`)).trim()).toBe('0')
    expect((await redis.cli('HGET', 'petstore-sandbox:usage', tenantId('refused-0'))).trim()).toBe('')
    // The seed is what the key reads (from this process), as before.
    const listed = await sandbox.fetch('/v1/categories', { headers: auth('refused-0') })
    expect(((await jsonOf(listed)) as unknown[]).length).toBe(10_000)
  })

  it('never locks a partner holding data out of its creates when new keys flood the store with large-catalog switches, then fill what is left with long creates (issue 20, store budget with --any-key)', async () => {
    const redis = await startRedis()
    const budget = 4 * 1024 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    expect((await create(sandbox, 'kept')).status).toBe(201)
    const switchTo = (key: string) => sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(key, true), body: JSON.stringify({ name: 'large-catalog' }) })
    const long = (key: string) => sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name: 'n'.repeat(200), description: 'd'.repeat(2000) }) })
    let keys = 0
    for (const send of [switchTo, long]) {
      let refused: Response | undefined
      for (let i = 0; i < 1000 && refused === undefined; i++) {
        const response = await send(`flood-${keys++}`)
        if (response.status === 200 || response.status === 201) await response.body?.cancel()
        else refused = response
      }
      expect(refused, 'the flood is refused at last').toBeDefined()
      expect(refused!.headers.get('retry-after')).toBe('30')
      expectErrorBody(await jsonOf(refused!), 503, 'over_capacity')
    }
    const statuses = []
    for (let i = 0; i < 100; i++) statuses.push((await create(sandbox, `partner ${i}`)).status)
    expect(statuses).toEqual(Array.from({ length: 100 }, () => 201))
    expect(await names(sandbox)).toHaveLength(101)
    const usage = async (field: string) => Number((await redis.cli('HGET', 'petstore-sandbox:usage', field)).trim())
    expect(await usage('!total')).toBeLessThanOrEqual(budget)
    expect(await usage('!claimed')).toBeLessThanOrEqual(budget)
  })

  it('lets new partners create and be journaled again once the keys of a flood of one-line creates are idle for an hour, and never refuses the partner in use (issue 20 attack G5: floors and journal slots that cost nothing to keep)', async () => {
    const redis = await startRedis()
    const budget = 1024 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    expect((await create(sandbox, 'kept')).status).toBe(201)
    // New keys, one {"name":"j"} each, until refused: their floors and journal slots fill the budget (16 KiB each here).
    let refused: Response | undefined
    for (let i = 0; i < 1000 && refused === undefined; i++) {
      const response = await create(sandbox, 'j', `flood-${i}`)
      if (response.status === 201) await response.body?.cancel()
      else refused = response
    }
    expect(refused, 'the flood is refused at last').toBeDefined()
    expectErrorBody(await jsonOf(refused!), 503, 'over_capacity')
    const early = await create(sandbox, 'first', 'newcomer-0')
    expectErrorBody(await jsonOf(early), 503, 'over_capacity')
    expect(await statusesJournaled(sandbox, 'newcomer-0')).toEqual([])
    // An hour and a minute pass for the flood's keys (their last write and use, by Redis's time); the partner is in use.
    await idleAllBut(redis, 'partner', 61 * 60 * 1000)
    for (let i = 0; i < 5; i++) {
      expect((await create(sandbox, 'first', `newcomer-${i}`)).status).toBe(201)
      expect(await statusesJournaled(sandbox, `newcomer-${i}`)).toEqual([201])
    }
    const statuses = []
    for (let i = 0; i < 100; i++) statuses.push((await create(sandbox, `partner ${i}`)).status)
    expect(statuses).toEqual(Array.from({ length: 100 }, () => 201))
    expect(await names(sandbox)).toHaveLength(101)
    expect((await statusesJournaled(sandbox, 'partner')).at(-1)).toBe(201)
    // The flood's data stays (only its floors and idle journals went); every count stays true.
    expect(await names(sandbox, 'flood-0')).toEqual(['j'])
    const usage = async (field: string) => Number((await redis.cli('HGET', 'petstore-sandbox:usage', field)).trim())
    const claimed = await usage('!claimed')
    expect(claimed).toBeLessThanOrEqual(budget)
    await sandbox.sandbox.tenants.expireIdle(30 * DAY_MS)
    expect(await usage('!claimed')).toBe(claimed)
    const held = await journalHoldings(redis)
    expect(held.counted).toBeLessThanOrEqual(budget)
    expect(held.weights).toBe(held.counted)
    expect(held.lists).toBe(held.counted)
  })

  it('counts what tenants claim again at the sweep, for a usage hash an older version wrote without !claimed', async () => {
    const redis = await startRedis()
    const budget = 1024 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    expect((await create(sandbox, 'small')).status).toBe(201)
    const switched = await sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('big', true), body: JSON.stringify({ name: 'default' }) })
    expect(switched.status).toBe(200)
    const usage = async (field: string) => Number((await redis.cli('HGET', 'petstore-sandbox:usage', field)).trim() || '0')
    const floor = budget / 64
    // Two tenants holding less than their floor (16 KiB here): each claims its floor.
    expect(await usage('!claimed')).toBe(2 * floor)
    await redis.cli('HDEL', 'petstore-sandbox:usage', '!claimed')
    await sandbox.sandbox.tenants.expireIdle(30 * DAY_MS)
    expect(await usage('!claimed')).toBe(2 * floor)
    // Back on the server's start scenario, a tenant holds nothing: its floor goes with its data.
    const back = await sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('big', true), body: JSON.stringify({ name: 'empty' }) })
    expect(back.status).toBe(200)
    expect(await usage('!claimed')).toBe(floor)
  })

  it('moves the journal weights an older version kept in the usage hash into their sorted set at the sweep, and counts them', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: 1024 * 1024 })
    expect((await create(sandbox, 'kept')).status).toBe(201)
    const id = tenantId('partner')
    const weight = (await redis.cli('ZSCORE', 'petstore-sandbox:jweights', id)).trim()
    expect(Number(weight)).toBeGreaterThan(0)
    // The usage hash as the version before the sorted set left it.
    await redis.cli('DEL', 'petstore-sandbox:jweights')
    await redis.cli('HSET', 'petstore-sandbox:usage', `${id}:j`, weight, '!jtenants', '1', '!journals', '0')
    await sandbox.sandbox.tenants.expireIdle(30 * DAY_MS)
    expect((await redis.cli('ZSCORE', 'petstore-sandbox:jweights', id)).trim()).toBe(weight)
    expect((await redis.cli('HKEYS', 'petstore-sandbox:usage')).trim().split('\n').sort()).toEqual(['!claimed', '!counted', '!journals', '!total', id].sort())
    expect((await journalHoldings(redis)).counted).toBe(Number(weight))
  })

  it('counts the bytes Redis holds for what it writes, by the rule every store uses (stored-bytes.ts)', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, journalBytes: 0, storeBudgetBytes: 1024 * 1024 })
    expect((await create(sandbox, 'né\u0001')).status).toBe(201)
    const id = tenantId('partner')
    // A tenant: 256 + its id + its scenario name; a category: 96 + its JSON as Redis holds it (STRLEN of a copy).
    await redis.cli('EVAL', "return redis.call('SET', KEYS[2], redis.call('LINDEX', KEYS[1], 0))", '2', `petstore-sandbox:{${id}}:cats`, 'copy')
    const json = Number((await redis.cli('STRLEN', 'copy')).trim())
    expect(json).toBe(Buffer.byteLength('{"id":1,"name":"né\\u0001"}'))
    expect(Number((await redis.cli('HGET', 'petstore-sandbox:usage', id)).trim())).toBe(256 + id.length + 'empty'.length + 96 + json)
  })

  it('counts a category of control characters as the 6 bytes each its JSON holds: Redis with maxmemory never fills, the store budget refuses first (attack2 F1a)', async () => {
    const redis = await startRedis()
    const used = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))![1])
    const maxmemory = used + 4 * 1024 * 1024
    await redis.cli('CONFIG', 'SET', 'maxmemory', String(maxmemory))
    const budget = 1024 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    expect((await create(sandbox, 'before')).status).toBe(201)
    const fat = JSON.stringify({ name: '\x01'.repeat(200), description: '\x01'.repeat(2000) })
    let refused: Response | undefined
    let created = 0
    for (; created < 600 && refused === undefined; created++) {
      const response = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('fat', true), body: fat })
      if (response.status === 201) await response.body?.cancel()
      else refused = response
    }
    // Refused by the store budget (over_capacity), not by a Redis out of memory (storage_unavailable).
    expect(refused, 'the store budget refuses before 600 creates of 13 KB each').toBeDefined()
    expectErrorBody(await jsonOf(refused!), 503, 'over_capacity')
    // What Redis holds of the tenant's categories, by its own count, is within what the budget counts.
    const cats = `petstore-sandbox:{${tenantId('fat')}}:cats`
    const held = Number((await redis.cli('EVAL', "local n = 0 for _, v in ipairs(redis.call('LRANGE', KEYS[1], 0, -1)) do n = n + #v end return n", '1', cats)).trim())
    const counted = Number((await redis.cli('HGET', 'petstore-sandbox:usage', tenantId('fat'))).trim())
    expect(held).toBeGreaterThan(budget / 2)
    expect(counted).toBeGreaterThanOrEqual(held)
    expect(counted).toBeLessThanOrEqual(budget)
    expect(Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))![1])).toBeLessThan(maxmemory)
    // A partner holding data still writes (its floor), and Redis still takes its writes.
    expect((await create(sandbox, 'after')).status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'after'])
  })

  it('counts journal entries of control characters as the 6 bytes each their JSON holds: journals stay within their budget (attack2 F1b)', async () => {
    const redis = await startRedis()
    const budget = 1024 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    const body = '\x01'.repeat(65_000)
    for (let key = 0; key < 4; key++) {
      for (let i = 0; i < 8; i++) {
        const response = await sandbox.fetch('/v1/categories', { method: 'POST', headers: { ...auth(`junk-${key}`), 'content-type': 'text/plain' }, body })
        expect(response.status).toBeGreaterThanOrEqual(400)
        await response.body?.cancel()
      }
    }
    const journals = (await redis.cli('--scan', '--pattern', 'petstore-sandbox:*:journal')).trim().split('\n').filter(Boolean)
    expect(journals.length).toBeGreaterThan(0)
    const held = Number(
      (await redis.cli('EVAL', "local n = 0 for _, k in ipairs(KEYS) do for _, v in ipairs(redis.call('LRANGE', k, 0, -1)) do n = n + #v end end return n", String(journals.length), ...journals)).trim(),
    )
    const counted = Number((await redis.cli('HGET', 'petstore-sandbox:usage', '!journals')).trim())
    // 32 entries of 390 KB as JSON were sent: Redis holds no more than is counted, and that is within the budget and one entry.
    expect(held).toBeGreaterThan(budget / 4)
    expect(counted).toBeGreaterThanOrEqual(held)
    expect(counted).toBeLessThanOrEqual(budget + 6 * 65_000 + 4096)
  })

  it('never refuses a partner’s create because of what other keys’ rejected requests left in their journals: journals are counted apart from data (issue 20 redis2: journal lockout)', async () => {
    const redis = await startRedis()
    const budget = 512 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    expect((await create(sandbox, 'before')).status).toBe(201)
    const junk = JSON.stringify({ name: '', pad: 'x'.repeat(60_000) })
    for (let key = 0; key < 6; key++) {
      for (let i = 0; i < 4; i++) {
        const response = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(`junk-${key}`, true), body: junk })
        expect(response.status).toBe(400)
        await response.body?.cancel()
      }
    }
    // The junk keys' journals hold more than half the store budget, and no data.
    expect((await journalHoldings(redis)).counted).toBeGreaterThan(budget / 2)
    expect((await create(sandbox, 'after')).status).toBe(201)
    expect((await create(sandbox, 'first', 'newcomer')).status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'after'])
    // Journals have their own bound, the store budget: past it, the largest journals above their
    // floor drop their oldest entries, so the last junk key is journaled too, as is the partner.
    expect((await statusesJournaled(sandbox, 'junk-5')).length).toBeGreaterThan(0)
    expect(await statusesJournaled(sandbox, 'partner')).toEqual([201, 201])
    expect((await journalHoldings(redis)).counted).toBeLessThanOrEqual(budget)
  })

  it('keeps what journals hold within their budget however many new keys send requests with large headers: past it, an entry above its journal’s share is not recorded (re-attack finding: a newest entry per key took Redis to maxmemory)', async () => {
    const redis = await startRedis()
    const budget = 256 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    expect((await create(sandbox, 'before')).status).toBe(201)
    const pad = Object.fromEntries(Array.from({ length: 14 }, (_, i) => [`x-pad-${i}`, 'p'.repeat(1000)]))
    for (let key = 0; key < 60; key++) {
      const response = await sandbox.fetch('/v1/categories', { headers: { ...auth(`flood-${key}`), ...pad } })
      expect(response.status).toBe(200)
      await response.body?.cancel()
    }
    // 60 newest entries of ~15 KB would be ~900 KB.
    const held = await journalHoldings(redis)
    expect(held.counted).toBeLessThanOrEqual(budget)
    expect(held.lists).toBe(held.counted)
    expect((await create(sandbox, 'after')).status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'after'])
  })

  it('never cuts a partner’s journal below its floor however many new keys each leave one short entry (issue 20: journal shares shrinking with new keys)', async () => {
    const redis = await startRedis()
    const budget = 512 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    for (let i = 0; i < 3; i++) expect((await create(sandbox, `mine ${i}`)).status).toBe(201)
    const usage = async (field: string) => Number((await redis.cli('HGET', 'petstore-sandbox:usage', field)).trim() || '0')
    // New keys, eight at a time, one GET each, until the journals pass their budget or no new key gets a journal for 5 rounds.
    let keys = 0
    let still = 0
    const slots = async () => Number((await redis.cli('ZCARD', 'petstore-sandbox:jweights')).trim())
    while (keys < 2000 && still < 5 && (await usage('!journals')) <= budget) {
      const holders = await slots()
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          const response = await sandbox.fetch('/v1/categories', { headers: auth(`flood-${keys++}`) })
          expect(response.status).toBe(200)
          await response.body?.cancel()
        }),
      )
      still = (await slots()) === holders ? still + 1 : 0
    }
    expect((await create(sandbox, 'mine 3')).status).toBe(201)
    const journal = await sandbox.fetch('/__sandbox/requests?method=POST', { headers: auth('partner') })
    expect(((await jsonOf(journal)) as { response: { status: number } }[]).map((entry) => entry.response.status)).toEqual([201, 201, 201, 201])
    // The journals' share (their budget over the tenants holding one) is never under the floor (8 KiB here).
    expect(await slots()).toBeLessThanOrEqual(budget / (8 * 1024))
  })

  it('journals a partner again after it clears its journal while three junk keys’ 60 KB requests fill the journals’ budget, and journals new keys (attack2 F6)', async () => {
    const redis = await startRedis()
    const budget = 1024 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    expect((await create(sandbox, 'before')).status).toBe(201)
    for (let key = 0; key < 3; key++) for (let i = 0; i < 20; i++) await junkPost(sandbox, `junk${key}`)
    const cleared = await sandbox.fetch('/__sandbox/requests', { method: 'DELETE', headers: auth('partner') })
    expect(cleared.status).toBeLessThan(300)
    await cleared.body?.cancel()
    expect((await create(sandbox, 'after')).status).toBe(201)
    expect(await statusesJournaled(sandbox, 'partner')).toEqual([201])
    expect((await create(sandbox, 'first', 'newcomer')).status).toBe(201)
    expect(await statusesJournaled(sandbox, 'newcomer')).toEqual([201])
    // The junk keys go on: what the partner and the newcomer hold, within their floor, stays.
    for (let key = 0; key < 3; key++) for (let i = 0; i < 5; i++) await junkPost(sandbox, `junk${key}`)
    expect((await create(sandbox, 'again')).status).toBe(201)
    expect(await statusesJournaled(sandbox, 'partner')).toEqual([201, 201])
    expect(await statusesJournaled(sandbox, 'newcomer')).toEqual([201])
    const held = await journalHoldings(redis)
    expect(held.counted).toBeLessThanOrEqual(budget)
    expect(held.counted).toBeGreaterThan(budget / 2)
    expect(held.weights).toBe(held.counted)
    expect(held.lists).toBe(held.counted)
    expect(held.stored).toBeLessThanOrEqual(held.counted)
  })

  it('keeps the journals within their budget and every partner’s journal within its floor when a flood of new keys each send 60 KB requests, and journals a partner that cleared its journal after it (attack2 F6)', async () => {
    const redis = await startRedis()
    const budget = 512 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: budget })
    for (let i = 0; i < 4; i++) expect((await create(sandbox, `mine ${i}`)).status).toBe(201)
    expect((await create(sandbox, 'theirs', 'clearer')).status).toBe(201)
    for (let key = 0; key < 80; key++) {
      await junkPost(sandbox, `flood-${key}`)
      await junkPost(sandbox, `flood-${key}`)
    }
    const cleared = await sandbox.fetch('/__sandbox/requests', { method: 'DELETE', headers: auth('clearer') })
    await cleared.body?.cancel()
    for (let key = 0; key < 8; key++) await junkPost(sandbox, `flood-${key}`)
    expect(await statusesJournaled(sandbox, 'partner')).toEqual([201, 201, 201, 201])
    expect((await create(sandbox, 'theirs again', 'clearer')).status).toBe(201)
    expect(await statusesJournaled(sandbox, 'clearer')).toEqual([201])
    const held = await journalHoldings(redis)
    expect(held.counted).toBeLessThanOrEqual(budget)
    expect(held.weights).toBe(held.counted)
    expect(held.lists).toBe(held.counted)
    expect(held.stored).toBeLessThanOrEqual(held.counted)
    // At most as many tenants hold a journal as floors fit in the budget (8 KiB here).
    expect(Number((await redis.cli('ZCARD', 'petstore-sandbox:jweights')).trim())).toBeLessThanOrEqual(budget / (8 * 1024))
  })

  it('journals new keys again once the keys of a flood of GETs of a 404 path are idle for an hour, and keeps the partner’s journal (issue 20 attack G5: journal slots that cost nothing to keep)', async () => {
    const redis = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, storeBudgetBytes: 1024 * 1024 })
    expect((await create(sandbox, 'kept')).status).toBe(201)
    // 64 slots of 16 KiB fill the journals' budget: the partner holds one, 63 new keys the rest.
    for (let i = 0; i < 64; i++) {
      const response = await sandbox.fetch('/v1/nothing-here', { headers: auth(`flood-${i}`) })
      expect(response.status).toBe(404)
      await response.body?.cancel()
    }
    expect((await create(sandbox, 'first', 'newcomer-0')).status).toBe(201)
    expect(await statusesJournaled(sandbox, 'newcomer-0')).toEqual([])
    await idleAllBut(redis, 'partner', 61 * 60 * 1000)
    for (let i = 1; i < 4; i++) {
      expect((await create(sandbox, 'first', `newcomer-${i}`)).status).toBe(201)
      expect(await statusesJournaled(sandbox, `newcomer-${i}`)).toEqual([201])
    }
    expect((await create(sandbox, 'again')).status).toBe(201)
    expect(await statusesJournaled(sandbox, 'partner')).toEqual([201, 201])
    const held = await journalHoldings(redis)
    expect(held.weights).toBe(held.counted)
    expect(held.lists).toBe(held.counted)
  })

  it('never cuts a partner’s journal because of what other tenants’ data holds (issue 20 redis2: journal lockout)', async () => {
    const redis = await startRedis()
    const budget = 256 * 1024
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', anyKey: true, maxCategories: 50, storeBudgetBytes: budget })
    for (let i = 0; i < 3; i++) expect((await create(sandbox, `mine ${i}`)).status).toBe(201)
    const description = 'd'.repeat(2000)
    let full = false
    for (let key = 0; key < 10 && !full; key++) {
      for (let i = 0; i < 50 && !full; i++) {
        const response = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(`flood-${key}`, true), body: JSON.stringify({ name: `flood ${i}`, description }) })
        full = response.status === 503
        await response.body?.cancel()
      }
    }
    expect(full, 'the data reached the store budget').toBe(true)
    expect(await names(sandbox)).toEqual(['mine 0', 'mine 1', 'mine 2'])
    // The partner's own request with a large (invalid) body: its journal, small, keeps every entry.
    const rejected = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name: '', pad: 'x'.repeat(20_000) }) })
    expect(rejected.status).toBe(400)
    await rejected.body?.cancel()
    const journal = await sandbox.fetch('/__sandbox/requests?method=POST', { headers: auth('partner') })
    expect(journal.status).toBe(200)
    expect(((await jsonOf(journal)) as unknown[]).length).toBe(4)
  })
})

describe.runIf(REQUIRE_REDIS)('a Redis that answers but refuses writes (attack17 C1)', () => {
  it('says degraded on health while Redis is full under noeviction, logs it once, and says ok again once a write would pass', async () => {
    const redis = await startRedis()
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: redis.url, anyKey: true, scenario: 'empty', warn: (line) => lines.push(line) })
    expect((await create(sandbox, 'before')).status).toBe(201)
    const used = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))![1])
    await redis.cli('CONFIG', 'SET', 'maxmemory', String(used - 100_000))
    const refused = await Promise.all(Array.from({ length: 5 }, (_, i) => create(sandbox, `refused${i}`)))
    for (const response of refused) expectErrorBody(await jsonOf(response), 503, 'storage_unavailable')
    // Reads are served all the same.
    expect((await sandbox.fetch('/v1/categories', { headers: auth('partner') })).status).toBe(200)
    const health = await sandbox.fetch('/__sandbox/health')
    expect(health.status).toBe(503)
    expect(await health.json()).toMatchObject({ status: 'degraded', storage: { kind: 'redis', ok: false } })
    expect(lines.filter((line) => line.includes('storage refusing'))).toHaveLength(1)
    expect(lines.filter((line) => line.includes('storage failing') || line.includes('storage recovered'))).toEqual([])
    await redis.cli('CONFIG', 'SET', 'maxmemory', '0')
    const again = await sandbox.fetch('/__sandbox/health')
    expect(again.status).toBe(200)
    expect(lines.filter((line) => line.includes('storage accepting'))).toHaveLength(1)
    expect((await create(sandbox, 'after')).status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'after'])
  })

  it('says degraded on health once Redis is demoted to a read-only replica, before any write tries it (trial5 P4)', async () => {
    const redis = await startRedis()
    const other = await startRedis()
    const sandbox = await startSandbox({ redisUrl: redis.url, anyKey: true, scenario: 'empty' })
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200)
    await redis.cli('REPLICAOF', '127.0.0.1', String(other.port))
    // Before: 200 "ok" until some request wrote.
    const health = await sandbox.fetch('/__sandbox/health')
    expect(health.status).toBe(503)
    expect(await health.json()).toMatchObject({ status: 'degraded', storage: { kind: 'redis', ok: false } })
    await redis.cli('REPLICAOF', 'NO', 'ONE')
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200)
    expect((await create(sandbox, 'writable again')).status).toBe(201)
  })

  it('is refused at start when its user may not write, as Redis 7.0 words it inside a script (attack19 N1)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'reader', 'on', '>secret', '~*', '&*', '+@all', '-@write')
    // Before: "running", every create 503 and health 200.
    // Its write probe asks the ACL first (Redis 7.0 on), naming the command; before that, Redis's words inside the script.
    await expect(createSandboxApp({ redisUrl: `redis://reader:secret@127.0.0.1:${redis.port}`, demoDir: false })).rejects.toThrow(/it refuses writes \((?:.*can't run this command|NOPERM the sandbox's user may not run [A-Z]+ (?:on (?:the key )?\S+ )?\(its ACL\))/)
  })

  it('is refused at start when it is a replica, read-only or not, naming its master', async () => {
    const master = await startRedis()
    const replica = await startRedis()
    await replica.cli('REPLICAOF', '127.0.0.1', String(master.port))
    await expect(createSandboxApp({ redisUrl: replica.url, demoDir: false })).rejects.toThrow(`it is a replica of 127.0.0.1:${master.port}, and what is written to it is lost at its next sync. Point --redis-url at the master.`)
    // A writable one too: what it took, its master's next sync erased (attack19 W1).
    await replica.cli('CONFIG', 'SET', 'replica-read-only', 'no')
    await expect(createSandboxApp({ redisUrl: replica.url, demoDir: false })).rejects.toThrow(`it is a replica of 127.0.0.1:${master.port}`)
  })

  it.each([
    { announced: 'role:slave', finding: 'attack55 F2' },
    { announced: 'x\r\nrole:slave', finding: 'review45 F6, attack57 F2' },
  ])('writes on to a master whose replica announces itself under an address holding "role:slave" ($finding)', async ({ announced }) => {
    const [redis, replica] = await Promise.all([startRedis(), startRedis()])
    await redis.cli('CONFIG', 'SET', 'repl-diskless-sync-delay', '0')
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], redisAllowFailoverLoss: true })
    await replica.cli('CONFIG', 'SET', 'replica-announce-ip', announced)
    await replica.cli('REPLICAOF', '127.0.0.1', String(redis.port))
    await vi.waitFor(async () => expect(await redis.cli('INFO', 'replication')).toMatch(/role:slave,port=/), { timeout: 10_000, interval: 100 })
    // Before: the guard found "role:slave" anywhere in the master's INFO: every request refused, health degraded.
    const answer = await create(sandbox, 'on a master')
    expect(answer.status, await answer.clone().text()).toBe(201)
    // And the role read each second (past two of them), and at start: before, a line break in the address made the
    // master a replica there, every request 503, and a sandbox started on it refused (attack57 F2).
    await new Promise((resolve) => setTimeout(resolve, 2500))
    expect((await create(sandbox, 'still on a master')).status).toBe(201)
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200)
    const started = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], redisAllowFailoverLoss: true })
    expect((await create(started, 'through another')).status).toBe(201)
  })

  it('answers write_outcome_unknown, not 201, once its user may no longer run INFO while it serves: its replicas cannot be counted (attack54 F1)', async () => {
    const { redis, sandbox, lines } = await asUser()
    await redis.cli('ACL', 'SETUSER', 'sb', '-info')
    // Before: taken for no replica, 201 without waiting (a replica attached since lost them at a failover).
    await vi.waitFor(async () => expect((await create(sandbox, 'after')).status).toBe(503), { timeout: 5000, interval: 300 })
    const answer = await create(sandbox, 'after again')
    expect(((await jsonOf(answer)) as { code: string }).code).toBe('write_outcome_unknown')
    expect(lines.join('\n')).toContain('its replicas cannot be counted (INFO refused')
    await redis.cli('ACL', 'SETUSER', 'sb', '+info')
    await vi.waitFor(async () => expect((await create(sandbox, 'counted again')).status).toBe(201), { timeout: 5000, interval: 300 })
  })

  it.each([
    { finding: 'attack51 F1', what: 'with --redis-allow-failover-loss', flags: { redisAllowFailoverLoss: true }, user: false },
    { finding: 'attack51 F1b', what: 'with --redis-allow-failover-loss and a user without INFO', flags: { redisAllowFailoverLoss: true }, user: true },
    { finding: 'attack51 F2', what: 'with --redis-allow-eviction', flags: { redisAllowEviction: true }, user: false },
  ])('never answers 201 for a create onto a master just demoted to a writable replica, $what ($finding)', async ({ flags, user }) => {
    const [redis, other] = await Promise.all([startRedis(), startRedis()])
    if (user) await Promise.all([redis, other].map((server) => server.cli('ACL', 'SETUSER', 'noinfo', 'on', '>secret', '~*', '&*', '+@all', '-info')))
    const url = user ? `redis://noinfo:secret@127.0.0.1:${redis.port}` : redis.url
    const sandbox = await startSandbox({ redisUrl: url, scenario: 'empty', apiKeys: ['partner'], ...flags })
    expect((await create(sandbox, 'before')).status).toBe(201)
    // A switchover: the other promoted, this one demoted to a replica that takes writes; a create sent at once.
    await switchOver(redis, other)
    const statuses: number[] = []
    for (let i = 0; i < (user ? 1 : 5); i++) statuses.push((await create(sandbox, `onto a replica ${i}`)).status)
    // Before: 201 for up to a second after the switchover (for good with --redis-allow-eviction, and with a user without
    // INFO), into a replica whose master's next sync erases it.
    if (!user) expect(statuses).not.toContain(201)
    // Without INFO the scripts cannot tell at once: within about a second (by ROLE), then never again.
    await vi.waitFor(async () => expect((await create(sandbox, 'later')).status).toBe(503), { timeout: 5000, interval: 300 })
    expect((await create(sandbox, 'later still')).status).toBe(503)
    await redis.cli('REPLICAOF', 'NO', 'ONE')
    await vi.waitFor(async () => expect((await create(sandbox, 'a master again')).status).toBe(201), { timeout: 5000, interval: 300 })
  })

  it('refuses to start where its user may read neither INFO nor ROLE, --redis-allow-failover-loss too: it could not tell a replica (attack57 F1)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'blind', 'on', '>secret', '~*', '&*', '+@all', '-info', '-role')
    // Before: started, and wrote on to a master demoted to a writable replica for good, 201s lost, nothing said.
    await expect(startSandbox({ redisUrl: `redis://blind:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'], redisAllowFailoverLoss: true })).rejects.toThrow(/whether it is a replica cannot be read \(INFO and ROLE refused.*Allow INFO \(or at least ROLE\)/)
  })

  it('stays refused on a master demoted to a writable replica once its user may no longer read ROLE either: never "a master again" (attack57 F1b)', async () => {
    const [redis, other] = await Promise.all([startRedis(), startRedis()])
    await Promise.all([redis, other].map((server) => server.cli('ACL', 'SETUSER', 'noinfo', 'on', '>secret', '~*', '&*', '+@all', '-info')))
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: `redis://noinfo:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'], redisAllowFailoverLoss: true, warn: (line) => lines.push(line) })
    expect((await create(sandbox, 'before')).status).toBe(201)
    await switchOver(redis, other)
    await vi.waitFor(async () => expect((await create(sandbox, 'refused')).status).toBe(503), { timeout: 5000, interval: 300 })
    await redis.cli('ACL', 'SETUSER', 'noinfo', '-role')
    // Two readings each second later: before, the refused ROLE was read as a master, and every create 201 on the replica.
    await new Promise((resolve) => setTimeout(resolve, 2500))
    expect((await create(sandbox, 'still refused')).status).toBe(503)
    expect(lines.join('\n')).not.toContain('storage accepted')
  })

  it('refuses to start on a writable replica as a user without INFO, by ROLE (attack57 F6)', async () => {
    const [master, replica] = await Promise.all([startRedis(), startRedis()])
    await replica.cli('CONFIG', 'SET', 'replica-read-only', 'no')
    await replica.cli('REPLICAOF', '127.0.0.1', String(master.port))
    await replica.cli('ACL', 'SETUSER', 'noinfo', 'on', '>secret', '~*', '&*', '+@all', '-info')
    // Before: it served, its first creates 201 on the replica (lost at its next sync), until the first reading each second.
    await expect(startSandbox({ redisUrl: `redis://noinfo:secret@127.0.0.1:${replica.port}`, scenario: 'empty', apiKeys: ['partner'], redisAllowFailoverLoss: true })).rejects.toThrow(new RegExp(`it is a replica of 127\\.0\\.0\\.1:${master.port}.*Point --redis-url at the master`))
  })

  it('refuses to start on a Redis whose WAIT is renamed away, saying why, unless --redis-allow-failover-loss (attack57 F4)', async () => {
    const redis = await startRedis()
    await redis.stop()
    await redis.start({ extraArgs: ['--rename-command', 'WAIT', ''] })
    // Before: started, then every write answered write_outcome_unknown at once, for good, a replica blamed.
    await expect(startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'] })).rejects.toThrow(/its replicas cannot be counted or waited for \(.*unknown command/i)
    const accepted = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], redisAllowFailoverLoss: true })
    expect((await create(accepted, 'accepted')).status).toBe(201)
  })

  it('starts a worker in place of another while its user may not run INFO, answering writes unknown, not exiting (attack57 F5)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const url = `redis://sb:secret@127.0.0.1:${redis.port}`
    let epoch: RedisEpoch | undefined
    const first = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', onEpoch: (told) => (epoch = told) })
    await first.create(tenantId('partner'), { name: 'before' }, Number.POSITIVE_INFINITY)
    await vi.waitFor(() => expect(epoch).toBeDefined(), { timeout: 5000, interval: 100 })
    await first.close()
    await redis.cli('ACL', 'SETUSER', 'sb', '-info')
    const warnings: string[] = []
    // Before: refused at start ("its replicas cannot be counted or waited for"), again and again, nothing serving.
    const replacement = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', epoch, warn: (line) => warnings.push(line) })
    onTestFinished(() => replacement.close())
    expect(warnings.join('\n')).toContain('writes are answered 503 write_outcome_unknown until INFO and WAIT are allowed')
    await expect(replacement.create(tenantId('partner'), { name: 'during' }, Number.POSITIVE_INFINITY)).rejects.toBeInstanceOf(WriteOutcomeUnknownError)
  })

  it('starts a worker in place of another while its user may run neither CONFIG nor INFO, answering 503 until it may, said once, not exiting (attack59 F1, F4)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all', '-config')
    const url = `redis://sb:secret@127.0.0.1:${redis.port}`
    const epoch = await firstWorker(url)
    await redis.cli('ACL', 'SETUSER', 'sb', '-info')
    // Before: refused at start ("its maxmemory-policy could not be read"), again and again, nothing serving.
    const warnings: string[] = []
    const replacement = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', allowFailoverLoss: true, epoch, warn: (line) => warnings.push(line) })
    onTestFinished(() => replacement.close())
    await expect(replacement.create(tenantId('partner'), { name: 'during' }, Number.POSITIVE_INFINITY)).rejects.toBeInstanceOf(StorageUnavailableError)
    // Said once, as a refusal: not "failing" then "recovered" at each command (attack59 F4).
    for (let i = 0; i < 5; i++) await replacement.create(tenantId('partner'), { name: `during ${i}` }, Number.POSITIVE_INFINITY).catch(() => undefined)
    expect(warnings.filter((line) => line.includes('storage recovered'))).toEqual([])
    expect(warnings.filter((line) => line.includes('its maxmemory-policy could not be read')).length).toBe(1)
    await redis.cli('ACL', 'SETUSER', 'sb', '+info')
    await vi.waitFor(async () => expect(await replacement.create(tenantId('partner'), { name: 'after' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'after' }), { timeout: 10_000, interval: 500 })
  })

  it('starts a worker in place of another whose master was demoted since, while its user may read the policy neither by CONFIG nor by INFO: refused, not exiting (review48 F1)', async () => {
    const [redis, other] = await Promise.all([startRedis(), startRedis()])
    await Promise.all([redis, other].map((server) => server.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all', '-config')))
    const url = `redis://sb:secret@127.0.0.1:${redis.port}`
    const epoch = await firstWorker(url)
    await switchOver(redis, other)
    await redis.cli('ACL', 'SETUSER', 'sb', '-info')
    // Before: refused at start by the replica check (by ROLE), again and again.
    const replacement = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', allowFailoverLoss: true, epoch })
    onTestFinished(() => replacement.close())
    await expect(replacement.create(tenantId('partner'), { name: 'during' }, Number.POSITIVE_INFINITY)).rejects.toBeInstanceOf(StorageUnavailableError)
  })

  it.each([
    { take: '-@scripting', give: '+@scripting', handed: true, finding: 'attack60 F2' },
    { take: '-@write', give: '+@write', handed: true, finding: 'attack60 F2' },
    { take: '-@scripting', give: '+@scripting', handed: false, finding: 'attack61 F6: no epoch to hand, the token never taken' },
  ])('starts a worker in place of another while its user may not write ($take), answering 503 with health degraded until it may, not exiting ($finding)', async ({ take, give, handed }) => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const url = `redis://sb:secret@127.0.0.1:${redis.port}`
    const epoch = handed ? await firstWorker(url) : undefined
    await redis.cli('ACL', 'SETUSER', 'sb', take)
    const warnings: string[] = []
    // Before: refused at start ("it refuses writes"), again and again, nothing serving, health included.
    const replacement = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', allowFailoverLoss: true, epoch, replacing: true, warn: (line) => warnings.push(line) })
    onTestFinished(() => replacement.close())
    expect(warnings.join('\n')).toContain("storage refused: Redis at redis://sb:***@127.0.0.1")
    expect((await replacement.health()).ok).toBe(false)
    // Refused before its script ran: nothing written, so not unknown.
    const refused = await replacement.create(tenantId('partner'), { name: 'during' }, Number.POSITIVE_INFINITY).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(StorageUnavailableError)
    expect(refused).not.toBeInstanceOf(WriteOutcomeUnknownError)
    await redis.cli('ACL', 'SETUSER', 'sb', give)
    await vi.waitFor(async () => expect(await replacement.create(tenantId('partner'), { name: 'after' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'after' }), { timeout: 10_000, interval: 500 })
    await vi.waitFor(async () => expect((await replacement.health()).ok).toBe(true), { timeout: 10_000, interval: 500 })
    expect(warnings.join('\n')).toContain('storage allowed')
  })

  it('says a confirmation refused WAIT as that, not as a replica behind (attack60 F1)', async () => {
    const [redis, replica] = await Promise.all([startRedis(), startRedis()])
    await redis.cli('CONFIG', 'SET', 'repl-diskless-sync-delay', '0')
    await replica.cli('REPLICAOF', '127.0.0.1', String(redis.port))
    await vi.waitFor(async () => expect(await replica.cli('INFO', 'replication')).toMatch(/master_link_status:up/), { timeout: 10_000, interval: 100 })
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'], warn: (line) => lines.push(line) })
    expect((await create(sandbox, 'confirmed')).status).toBe(201)
    await redis.cli('ACL', 'SETUSER', 'sb', '-wait')
    const answer = await create(sandbox, 'unconfirmed')
    expect(answer.status).toBe(503)
    expect(((await jsonOf(answer)) as { code: string }).code).toBe('write_outcome_unknown')
    const said = lines.filter((line) => line.startsWith('storage replicas')).join('\n')
    // Before: "no replica confirmed the write within the request's time (a replica behind or stopped …)", WAIT never named.
    expect(said).toContain("'wait'")
    expect(said).not.toContain('a replica behind or stopped')
    await redis.cli('ACL', 'SETUSER', 'sb', '+wait')
    expect((await create(sandbox, 'confirmed again')).status).toBe(201)
  })

  it('serves on, healthy, while its user may not PING: the probe is the sandbox’s own (attack60 F3)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'], warn: (line) => lines.push(line) })
    await redis.cli('ACL', 'SETUSER', 'sb', '-ping')
    for (let i = 0; i < 3; i++) {
      expect((await create(sandbox, `served ${i}`)).status).toBe(201)
      // Before: 503 degraded, "storage failing … answering 503 storage_unavailable" while every create was 201.
      expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200)
    }
    expect(lines.join('\n')).not.toMatch(/storage (failing|recovered)/)
  })

  it('refuses a create whose script calls a command the ACL refuses before it runs: 503 storage_unavailable, nothing stored, health degraded until allowed, said once (review49 F1, F2)', async () => {
    const { redis, sandbox, lines } = await asUser()
    // The create's script trims the shared outcome record (ZCARD) after it stored the category: Redis checks a script's
    // commands as it runs them, and rolls back nothing.
    await redis.cli('ACL', 'SETUSER', 'sb', '-zcard')
    for (let i = 0; i < 2; i++) {
      const answer = await create(sandbox, `refused ${i}`)
      // Before: 201 (a misread of the replica guard sent the script again, its outcome replayed), or 503
      // storage_unavailable with the category stored all the same.
      expect(answer.status).toBe(503)
      expect(((await jsonOf(answer)) as { code: string }).code).toBe('storage_unavailable')
      // Past the 3 s the refusal was held: before, health said 200 between requests, and each said "refused" then "allowed".
      await sleep(3500)
      expect((await sandbox.fetch('/__sandbox/health')).status).toBe(503)
    }
    expect(lines.filter((line) => line.startsWith('storage refused'))).toHaveLength(1)
    expect(lines.join('\n')).not.toMatch(/storage allowed|refuses INFO/)
    await redis.cli('ACL', 'SETUSER', 'sb', '+zcard')
    await vi.waitFor(async () => expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200), { timeout: 5000, interval: 300 })
    expect(lines.join('\n')).toContain('storage allowed')
    expect((await create(sandbox, 'after')).status).toBe(201)
    expect(await names(sandbox)).toEqual(['before', 'after'])
  })

  it('refuses writes while its user may not count the epoch’s beat (INCR): a restore from a snapshot taken meanwhile would lose them unseen (attack61 F4)', async () => {
    const { redis, sandbox } = await asUser()
    await redis.cli('ACL', 'SETUSER', 'sb', '-incr')
    // Before: 201 (creates need no INCR) while the beat stood still, the watch for a restore blind.
    expect((await create(sandbox, 'unwatched')).status).toBe(503)
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(503)
    await redis.cli('ACL', 'SETUSER', 'sb', '+incr')
    await vi.waitFor(async () => expect((await create(sandbox, 'watched again')).status).toBe(201), { timeout: 5000, interval: 300 })
    expect(await names(sandbox)).toEqual(['before', 'watched again'])
  })

  it('answers no write before it holds the token of the sandbox’s keys: a worker started while its user may not read it refuses them, then serves once it is read (attack61 F7)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all', '-get')
    const url = `redis://sb:secret@127.0.0.1:${redis.port}`
    const told: RedisEpoch[] = []
    const replacement = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', replacing: true, onEpoch: (epoch) => told.push(epoch) })
    onTestFinished(() => replacement.close())
    // Before: 201, no token held (its read refused), nothing watched: a restore from a snapshot taken since handed the ids out again.
    await expect(replacement.create(tenantId('partner'), { name: 'unwatched' }, Number.POSITIVE_INFINITY)).rejects.toBeInstanceOf(StorageUnavailableError)
    expect(told).toEqual([])
    await redis.cli('ACL', 'SETUSER', 'sb', '+get')
    await vi.waitFor(async () => expect(await replacement.create(tenantId('partner'), { name: 'watched' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'watched' }), { timeout: 10_000, interval: 500 })
    expect(told.length).toBeGreaterThan(0)
  })

  it('is refused at start where its user’s key patterns leave out a key behind every write (the beat’s), and refuses writes once they do (attack61 F8)', async () => {
    const redis = await startRedis()
    // The prefix alone: `{petstore-sandbox:epoch:beat}:loose` (a slot fellow of the beat) is not under it.
    await redis.cli('ACL', 'SETUSER', 'narrow', 'on', '>secret', '~petstore-sandbox:*', '&*', '+@all')
    await expect(startSandbox({ redisUrl: `redis://narrow:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'] })).rejects.toThrow(/may not run [A-Z]+ on the key \{petstore-sandbox:epoch:beat\}:loose/)
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~petstore-sandbox:*', '~{petstore-sandbox:*', '&*', '+@all')
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'] })
    expect((await create(sandbox, 'watched')).status).toBe(201)
    await redis.cli('ACL', 'SETUSER', 'sb', 'resetkeys', '~petstore-sandbox:*')
    // Before: 201 for good while the beat could not be counted, health 503.
    expect((await create(sandbox, 'unwatched')).status).toBe(503)
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(503)
  })

  it.each([
    { finding: 'attack63 F1: RPUSH allowed on the tenants’ meta keys only', rules: ['-rpush', '(+rpush ~*:meta)'], give: ['+rpush'] },
    { finding: 'attack63 F4: the beat’s INCR allowed on the tenants’ keys only', rules: ['-incr', '(+incr ~petstore-sandbox:{*)'], give: ['+incr'] },
  ])('refuses a switch and a create before they write where a selector allows a command on other keys than they run it on ($finding)', async ({ rules, give }) => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'] })
    expect((await create(sandbox, 'mine')).status).toBe(201)
    await redis.cli('ACL', 'SETUSER', 'sb', ...rules)
    // Before: the switch stopped after its DEL (the tenant torn to its default seed, its 201s gone), or creates 201 while
    // the beat stood still.
    const switched = await sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('partner', true), body: JSON.stringify({ name: 'default' }) })
    expect(switched.status).toBe(503)
    expect(((await jsonOf(switched)) as { code: string }).code).toBe('storage_unavailable')
    expect((await create(sandbox, 'refused')).status).toBe(503)
    await redis.cli('ACL', 'SETUSER', 'sb', 'reset', 'on', '>secret', '~*', '&*', '+@all', ...give)
    expect(await names(sandbox)).toEqual(['mine'])
  })

  it('says degraded on health while its user may not write a key every create shares, though no request met it yet (attack63 F3)', async () => {
    const { redis, sandbox } = await asUser()
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200)
    // Every key of the sandbox but the registry of tenants.
    await redis.cli('ACL', 'SETUSER', 'sb', 'resetkeys', '~petstore-sandbox:{*', '~{petstore-sandbox:*', '~petstore-sandbox:[a-su-z]*')
    // Before: health 200 (its probe asked only its own key and the watch's).
    await vi.waitFor(async () => expect((await sandbox.fetch('/__sandbox/health')).status).toBe(503), { timeout: 5000, interval: 300 })
    await redis.cli('ACL', 'SETUSER', 'sb', '~*')
    await vi.waitFor(async () => expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200), { timeout: 5000, interval: 300 })
  })

  it('refuses a switch before it charges the budget where a selector allows its DEL on some of the keys it deletes: one check for all of a call’s keys (review51 F2)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'] })
    expect((await create(sandbox, 'mine')).status).toBe(201)
    const charged = async () => (await redis.cli('HGET', 'petstore-sandbox:usage', '!total')).trim()
    const before = await charged()
    await redis.cli('ACL', 'SETUSER', 'sb', '-del', '(+del ~*:meta)')
    for (let i = 0; i < 2; i++) {
      const switched = await sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('partner', true), body: JSON.stringify({ name: 'large-catalog' }) })
      // Before: 503 write_outcome_unknown (stopped at its DEL of the categories), the large catalog charged all the same.
      expect(switched.status).toBe(503)
      expect(((await jsonOf(switched)) as { code: string }).code).toBe('storage_unavailable')
    }
    expect(await charged()).toBe(before)
    await redis.cli('ACL', 'SETUSER', 'sb', '+del')
    expect(await names(sandbox)).toEqual(['mine'])
  })

  it('serves a user allowed the beat’s INCR on the beat’s key only, all the sandbox runs it on: started, creates 201, health ok (review51 F1)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~petstore-sandbox:*', '~{petstore-sandbox:*', '&*', '+@all', '-incr', '(+incr ~petstore-sandbox:epoch:beat)')
    // Before: refused at start ("it refuses writes (NOPERM … may not run INCR on the key petstore-sandbox:write-probe"),
    // and every create 503 where the ACL was narrowed while serving.
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'] })
    const beat = async () => Number(await redis.cli('GET', 'petstore-sandbox:epoch:beat'))
    const counted = await beat()
    for (let i = 0; i < 3; i++) expect((await create(sandbox, `counted ${i}`)).status).toBe(201)
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200)
    // The beat is counted still (the watch behind the 201s).
    await vi.waitFor(async () => expect(await beat()).toBeGreaterThan(counted), { timeout: 3000, interval: 200 })
    expect(await names(sandbox)).toEqual(['counted 0', 'counted 1', 'counted 2'])
  })

  it('says a refusal met again soon after "storage allowed" once 10 s are over, not never (review51 F3)', async () => {
    const { redis, sandbox, lines } = await asUser()
    const refusedLines = () => lines.filter((line) => line.startsWith('storage refused'))
    await redis.cli('ACL', 'SETUSER', 'sb', '-pexpire')
    expect((await create(sandbox, 'refused')).status).toBe(503)
    await redis.cli('ACL', 'SETUSER', 'sb', '+pexpire')
    await vi.waitFor(async () => expect((await sandbox.fetch('/__sandbox/health')).status).toBe(200), { timeout: 5000, interval: 300 })
    expect(lines.filter((line) => line.startsWith('storage allowed'))).toHaveLength(1)
    await redis.cli('ACL', 'SETUSER', 'sb', '-pexpire')
    expect((await create(sandbox, 'refused again')).status).toBe(503)
    expect(refusedLines()).toHaveLength(1)
    // Before: never said again while it lasted, the log's last word "storage allowed".
    await vi.waitFor(
      async () => {
        expect((await create(sandbox, 'refused still')).status).toBe(503)
        expect(refusedLines()).toHaveLength(2)
      },
      { timeout: 13_000, interval: 1000 },
    )
  })

  it('checks the epoch before the first command once its user is allowed again: a backup restored in place while the ACL refused the reads each second is refused, not served from (review49 F4)', async () => {
    const redis = await startRedis()
    await redis.stop()
    await redis.start({ extraArgs: ['--enable-debug-command', 'yes'] })
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 5000, headersTimeoutMs: 2000 })
    const answered = await restoredWhileBlind(
      sandbox,
      redis,
      async () => {
        await redis.cli('ACL', 'SETUSER', 'sb', '-@scripting')
        expect((await create(sandbox, 'refused')).status).toBe(503)
      },
      async () => void (await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')),
    )
    // Before: 201 {"id":2} and on, ids answered 201 before the backup was put back, until the next second's read.
    expect(answered.filter((answer) => !answer.startsWith('503')), answered.slice(0, 3).join('\n')).toEqual([])
  })

  it('says once that its user may not use the sandbox’s keys, in a worker started in place of another: health degraded, never "recovered" while refused (attack60 F4)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const url = `redis://sb:secret@127.0.0.1:${redis.port}`
    const epoch = await firstWorker(url)
    await redis.cli('ACL', 'SETUSER', 'sb', 'resetkeys', '~zz*')
    const warnings: string[] = []
    const replacement = await openRedisStorage({ url, seed: NO_SEED, unreachableAtStart: 'serve', allowFailoverLoss: true, epoch, warn: (line) => warnings.push(line) })
    onTestFinished(() => replacement.close())
    for (let i = 0; i < 6; i++) {
      await expect(replacement.create(tenantId('partner'), { name: `refused ${i}` }, Number.POSITIVE_INFINITY)).rejects.toBeInstanceOf(StorageUnavailableError)
      expect((await replacement.health()).ok).toBe(false)
      await sleep(300)
    }
    // Before: "storage failing" and "storage recovered … answers again" in turn at each request.
    expect(warnings.filter((line) => /storage (failing|recovered)/.test(line))).toEqual([])
    expect(warnings.filter((line) => line.includes('no permissions to access')).length).toBe(1)
    await redis.cli('ACL', 'SETUSER', 'sb', '~*')
    await vi.waitFor(async () => expect(await replacement.create(tenantId('partner'), { name: 'after' }, Number.POSITIVE_INFINITY)).toMatchObject({ name: 'after' }), { timeout: 10_000, interval: 500 })
  })

  it.each([
    { finding: 'attack57 F3', flags: {} },
    { finding: 'attack59 F3: with --redis-allow-eviction, nothing reads Redis each second', flags: { redisAllowEviction: true } },
  ])('checks in its scripts again that Redis is not a replica within about a second once INFO, refused a moment, is allowed again, saying both ($finding)', async ({ flags }) => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'sb', 'on', '>secret', '~*', '&*', '+@all')
    const lines: string[] = []
    const sandbox = await startSandbox({ redisUrl: `redis://sb:secret@127.0.0.1:${redis.port}`, scenario: 'empty', apiKeys: ['partner'], redisAllowFailoverLoss: true, warn: (line) => lines.push(line), ...flags })
    expect((await create(sandbox, 'guarded')).status).toBe(201)
    await redis.cli('ACL', 'SETUSER', 'sb', '-info')
    expect((await create(sandbox, 'unguarded')).status).toBe(201)
    await redis.cli('ACL', 'SETUSER', 'sb', '+info')
    // The reading each second sees INFO allowed (a request brings it about).
    await new Promise((resolve) => setTimeout(resolve, 1200))
    expect((await create(sandbox, 'a second on')).status).toBe(201)
    await new Promise((resolve) => setTimeout(resolve, 300))
    await redis.cli('CONFIG', 'RESETSTAT')
    for (let i = 0; i < 20; i++) expect((await create(sandbox, `guarded again ${i}`)).status).toBe(201)
    // Before: the guard stayed off 10 s after INFO was back (a switchover then lost a second of 201s), nothing said.
    const calls = Number(/cmdstat_info:calls=(\d+)/.exec(await redis.cli('INFO', 'commandstats'))?.[1] ?? 0)
    expect(calls).toBeGreaterThanOrEqual(20)
    expect(lines.join('\n')).toContain('its scripts go without their check that Redis is not a replica')
    expect(lines.join('\n')).toContain('its scripts check again that Redis is not a replica')
  })

  it('sends its scripts with the replica guard again once its user, refused INFO, is allowed it and the wait has passed (review44 F5)', async () => {
    const redis = await startRedis()
    await redis.cli('ACL', 'SETUSER', 'noinfo', 'on', '>secret', '~*', '&*', '+@all', '-info')
    const storage = await openRedisStorage({ url: `redis://noinfo:secret@127.0.0.1:${redis.port}`, seed: NO_SEED, allowFailoverLoss: true })
    onTestFinished(() => storage.close())
    const partner = tenantId('partner')
    await storage.create(partner, { name: 'without INFO' }, Number.POSITIVE_INFINITY)
    await redis.cli('ACL', 'SETUSER', 'noinfo', '+info')
    // The monotonic clock, moved past the wait.
    const now = performance.now.bind(performance)
    vi.spyOn(performance, 'now').mockImplementation(() => now() + 11_000)
    onTestFinished(() => void vi.restoreAllMocks())
    await redis.cli('CONFIG', 'RESETSTAT')
    for (let i = 0; i < 20; i++) await storage.create(partner, { name: `with INFO ${i}` }, Number.POSITIVE_INFINITY)
    // Each guarded script reads INFO in Redis (the reads each second outside them, a few at most).
    const calls = Number(/cmdstat_info:calls=(\d+)/.exec(await redis.cli('INFO', 'commandstats'))?.[1] ?? 0)
    // Before: left out for good once refused.
    expect(calls).toBeGreaterThanOrEqual(20)
  })

  it('refuses every request within about a second once its master is demoted to a writable replica, until it is a master again (attack46 F2)', async () => {
    const [redis, other] = await Promise.all([startRedis(), startRedis()])
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'] })
    expect((await create(sandbox, 'before')).status).toBe(201)
    // A failover: the other Redis, a copy of this one, promoted; this one demoted to a replica that takes writes.
    await other.cli('REPLICAOF', '127.0.0.1', String(redis.port))
    await vi.waitFor(async () => expect(await other.cli('INFO', 'replication')).toMatch(/master_link_status:up/), { timeout: 10_000, interval: 100 })
    await other.cli('REPLICAOF', 'NO', 'ONE')
    await redis.cli('CONFIG', 'SET', 'replica-read-only', 'no')
    await redis.cli('REPLICAOF', '127.0.0.1', String(other.port))
    await vi.waitFor(async () => expect(await redis.cli('INFO', 'replication')).toMatch(/master_link_status:up/), { timeout: 10_000, interval: 100 })
    // Before: 201, into a replica whose master's next sync erases it.
    await vi.waitFor(async () => expect((await create(sandbox, 'onto a replica')).status).toBe(503), { timeout: 5000, interval: 300 })
    expect((await create(sandbox, 'onto a replica')).status).toBe(503)
    expect((await sandbox.fetch('/__sandbox/health')).status).toBe(503)
    await redis.cli('REPLICAOF', 'NO', 'ONE')
    await vi.waitFor(async () => expect((await create(sandbox, 'a master again')).status).toBe(201), { timeout: 5000, interval: 300 })
  })
})
