/**
 * Planned answers on Redis: two sandbox replicas on one real redis-server serve one tenant, and
 * a plan made through either answers exactly as many requests as it says, whichever replica they reach.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it, onTestFinished } from 'vitest'
import { MAX_BOOK_PLANS, MAX_PLANNED_ANSWERS, PlanBookFullError, type PendingAnswer } from '../../src/core/planned-answers.js'
import { tenantId } from '../../src/server.js'
import { openRedisStorage, type RedisStorage } from '../../src/storage/redis-storage.js'
import { OUTCOME_RECORD_ENTRIES, OUTCOME_RECORD_TOTAL } from '../../src/storage/redis-outcomes.js'
import { REQUIRE_REDIS, startRedis, startRedisCluster, type RedisServer } from '../support/redis-server.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'
import { redisPrefix, redisUrl } from '../support/stores.js'

const ADMIN = 'admin-token-for-tests'

/** Two replicas sharing one Redis and one key prefix. */
async function twoReplicas(): Promise<[RunningSandbox, RunningSandbox]> {
  const shared = { redisUrl: redisUrl(), redisPrefix: redisPrefix(), adminToken: ADMIN, anyKey: true }
  return [await startSandbox(shared), await startSandbox(shared)]
}

const plan = (replica: RunningSandbox, body: object, key = 'partner') =>
  replica.fetch('/__sandbox/answers', { method: 'POST', headers: auth(key, true), body: JSON.stringify(body) })

/** How many scripts Redis has run (`EVALSHA` and `EVAL`, each one round trip of a replica), from INFO commandstats. */
async function scriptsRun(redis: RedisServer): Promise<number> {
  const stats = await redis.cli('INFO', 'commandstats')
  return [...stats.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((sum, match) => sum + Number(match[1]), 0)
}

const pending = async (replica: RunningSandbox, key = 'partner') => jsonOf(await replica.fetch('/__sandbox/answers', { headers: auth(key) }))

describe.runIf(REQUIRE_REDIS)('planned answers across two replicas on one Redis', () => {
  it('answers a plan of 40 exactly 40 times among 60 concurrent requests, two thirds of them to the other replica', async () => {
    const [a, b] = await twoReplicas()
    expect((await plan(a, { operation: 'listCategories', status: 503, times: 40 })).status).toBe(201)
    const statuses = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => (await fetch(`${(i % 3 === 0 ? a : b).origin}/v1/categories`, { headers: auth('partner') })).status),
    )
    expect(statuses.filter((status) => status === 503)).toHaveLength(40)
    expect(statuses.filter((status) => status === 200)).toHaveLength(20)
    expect(await pending(b)).toEqual([])
  })

  it('shows a plan made on one replica on the other, first in first out, and drops it on the other’s reset', async () => {
    const [a, b] = await twoReplicas()
    await plan(a, { operation: 'createCategory', status: 500 })
    await plan(b, { operation: 'createCategory', status: 400, times: 2 })
    expect(await pending(b)).toEqual([
      { operation: 'createCategory', status: 500, code: 'internal_error', times: 1 },
      { operation: 'createCategory', status: 400, code: 'invalid_body', times: 2 },
    ])
    const create = (replica: RunningSandbox) => replica.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: '{"name":"x"}' })
    expect((await create(b)).status).toBe(500)
    expect((await create(a)).status).toBe(400)
    expect(await pending(a)).toEqual([{ operation: 'createCategory', status: 400, code: 'invalid_body', times: 1 }])
    await a.fetch('/__sandbox/reset', { method: 'POST', headers: auth('partner') })
    expect(await pending(b)).toEqual([])
    expect((await create(b)).status).toBe(201)
  })

  it('keeps each tenant’s plans apart, holds at most 100 a tenant, and forgets them with the tenant', async () => {
    const [a, b] = await twoReplicas()
    for (let i = 0; i < 100; i++) await plan(a, { operation: 'listOrders', status: 500 }, 'k1')
    expect((await plan(b, { operation: 'listOrders', status: 500 }, 'k1')).status).toBe(409)
    expect((await b.fetch('/v1/store/orders', { headers: auth('k2') })).status).toBe(200)
    const deleted = await b.fetch(`/__sandbox/tenants/${tenantId('k1')}`, { method: 'DELETE', headers: auth(ADMIN) })
    expect(deleted.status).toBe(204)
    expect(await pending(a, 'k1')).toEqual([])
  })

  it('answers a plan made on one replica with the very next request on the other, which had found nothing planned', async () => {
    const [a, b] = await twoReplicas()
    const list = (replica: RunningSandbox) => replica.fetch('/v1/categories', { headers: auth('partner') })
    expect((await list(b)).status).toBe(200)
    expect((await list(b)).status).toBe(200)
    expect((await plan(a, { operation: 'listCategories', status: 401 })).status).toBe(201)
    expect((await list(b)).status).toBe(401)
    expect((await list(b)).status).toBe(200)
    expect((await plan(a, { operation: 'listCategories', network: true })).status).toBe(201)
    await expect(list(b)).rejects.toThrow()
    expect((await list(b)).status).toBe(200)
  })

  it('asks Redis for no plan when the tenant has none: one script less per request than with a plan of another operation pending', async () => {
    const redis = await startRedis()
    const replica = await startSandbox({ redisUrl: redis.url, adminToken: ADMIN, anyKey: true })
    const requests = 10
    // @note The fewest of three counts: the sandbox reads the epoch's beat each second with a script, which a count
    // may or may not take in (1 run in 8 counted 13 for 10).
    const scriptsOf = async (key: string) => {
      await replica.fetch('/v1/categories', { headers: auth(key) })
      const counts: number[] = []
      for (let attempt = 0; attempt < 3; attempt++) {
        const before = await scriptsRun(redis)
        for (let i = 0; i < requests; i++) expect((await replica.fetch('/v1/categories', { headers: auth(key) })).status).toBe(200)
        counts.push((await scriptsRun(redis)) - before)
      }
      return Math.min(...counts)
    }
    const nothingPlanned = await scriptsOf('plans-nothing')
    expect((await plan(replica, { operation: 'listOrders', status: 500 }, 'plans-orders')).status).toBe(201)
    const ordersPlanned = await scriptsOf('plans-orders')
    expect(ordersPlanned - nothingPlanned).toBe(requests)
    expect(await pending(replica, 'plans-orders')).toEqual([{ operation: 'listOrders', status: 500, code: 'internal_error', times: 1 }])
  })

  it('asks for a plan as the read sent last says, whatever order the reads answer in, and after planning', async () => {
    const storage = await openRedisStorage({ url: redisUrl(), seed: { scenario: 'default', categories: [], nextCategoryId: 1 }, prefix: redisPrefix() })
    onTestFinished(() => storage.close())
    const answers = storage.answersOf('a1b2c3')
    const sentFirst = answers.reading()
    const sentLast = answers.reading()
    answers.saw(sentLast, false)
    answers.saw(sentFirst, true)
    // No promise: nothing sent to Redis.
    expect(answers.take('listCategories')).toBeUndefined()
    const sentBeforePlan = answers.reading()
    await answers.plan({ operation: 'listCategories', status: 500, code: 'internal_error', times: 1 })
    answers.saw(sentBeforePlan, false)
    expect(await answers.take('listCategories')).toEqual({ operation: 'listCategories', status: 500, code: 'internal_error' })
  })
})

/** The plan of attack 3 G3: a long delay, a thousand times, on an operation the partner never calls. */
const JUNK: PendingAnswer = { operation: 'listOrders', status: 500, code: 'internal_error', delayMs: 27500, times: 1000 }

/** A replica's storage on `url` (one prefix: replicas share it), closed when the test finishes. */
async function replicaStorage(url: string, prefix: string, maxPlans?: number): Promise<RedisStorage> {
  const storage = await openRedisStorage({ url, seed: { scenario: 'default', categories: [], nextCategoryId: 1 }, prefix, maxPlans })
  onTestFinished(() => storage.close())
  return storage
}

/** Tenant `id` plans `count` of `plan` through `storage`, one after another. */
async function fill(storage: RedisStorage, id: string, count = MAX_PLANNED_ANSWERS, plan: PendingAnswer = JUNK): Promise<void> {
  const answers = storage.answersOf(id)
  for (let i = 0; i < count; i++) await answers.plan(plan)
}

/** Keys of the flood, 100 plans each through either replica, and the room Redis has left for them (bytes). */
const FLOOD_KEYS = 40
const FLOOD_HEADROOM = 850_000

const held = async (storage: RedisStorage, id: string) => (await storage.answersOf(id).pending()).length

/** @note The book orders tenants by Redis's clock, in ms: a pause makes "before" unambiguous. */
const nextMs = () => sleep(3)

describe.runIf(REQUIRE_REDIS)('the plan book on Redis: all tenants’ plans together bounded, as in memory (attack3 G3)', () => {
  it('holds at most its cap over all tenants across two replicas: a new plan takes the newest plan of the tenant holding the most, only if it holds more than the planner then would (attack4 H6)', async () => {
    const prefix = redisPrefix()
    const [a, b] = [await replicaStorage(redisUrl(), prefix, 200), await replicaStorage(redisUrl(), prefix, 200)]
    await fill(a, 'hog')
    await nextMs()
    await fill(b, 'other', 90)
    await nextMs()
    await fill(a, 'partner', 10)
    await fill(b, 'partner', 20)
    expect([await held(a, 'hog'), await held(a, 'other'), await held(a, 'partner')]).toEqual([85, 85, 30])
    await expect(fill(b, 'hog', 1)).rejects.toThrow('the sandbox holds the most planned answers allowed over all tenants (200), and no tenant holds more than this one would')
    let planned = 30
    for (; planned < MAX_PLANNED_ANSWERS; planned++) {
      const refused = await (planned % 2 === 0 ? a : b).answersOf('partner').plan(JUNK).then(() => undefined, (error: unknown) => error)
      if (refused !== undefined) {
        expect(refused).toBeInstanceOf(PlanBookFullError)
        break
      }
    }
    expect(planned).toBe(66)
    expect((await held(b, 'hog')) + (await held(b, 'other'))).toBe(134)
  })

  it('keeps its count true through takes, clears, deletes and keys Redis expired, so that it drops no plan before the cap and, at it, the newest of the tenant holding the most', async () => {
    const redis = await startRedis()
    const [a, b] = [await replicaStorage(redis.url, 'p:', 200), await replicaStorage(redis.url, 'p:', 200)]
    const once: PendingAnswer = { ...JUNK, times: 1 }
    await fill(a, 'kept')
    await nextMs()
    await fill(b, 'taken', 100, once)
    for (let i = 0; i < 100; i++) expect(await a.answersOf('taken').take('listOrders')).toBeDefined()
    await fill(b, 'cleared')
    await a.answersOf('cleared').clear()
    await fill(b, 'deleted')
    await a.delete('deleted')
    await fill(b, 'expired')
    // As Redis expires a list by its TTL: nothing tells a replica; the sweep counts again.
    await redis.cli('PEXPIRE', 'p:{expired}:answers', '1')
    await sleep(20)
    await b.expire(24 * 60 * 60 * 1000)
    await nextMs()
    await fill(a, 'last')
    expect(await held(b, 'kept')).toBe(100)
    await nextMs()
    await fill(a, 'past-the-cap', 1)
    expect([await held(b, 'kept'), await held(b, 'last'), await held(b, 'past-the-cap')]).toEqual([99, 100, 1])
  })

  it('no longer lets a flood of throw-away keys’ plans fill Redis nor change a partner’s answers: the partner creates, switches and gets its planned answer on both replicas; the flood past its share gets 503 plan_book_full', async () => {
    const redis = await startRedis()
    await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
    const shared = { redisUrl: redis.url, adminToken: ADMIN, anyKey: true }
    const [a, b] = [await startSandbox(shared), await startSandbox(shared)]
    expect((await a.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: '{"name":"before"}' })).status).toBe(201)
    expect((await plan(a, { operation: 'listOrders', status: 500, times: 100 })).status).toBe(201)
    expect((await b.fetch('/v1/store/orders', { headers: auth('partner') })).status).toBe(500)
    // The book filled to one tenant short of its cap by earlier keys (the same script a replica runs, without HTTP).
    const earlier = Array.from({ length: MAX_BOOK_PLANS / MAX_PLANNED_ANSWERS - 1 }, (_, i) => `earlier-${i}`)
    const storage = await replicaStorage(redis.url, 'petstore-sandbox:')
    for (const id of earlier) {
      await Promise.all(Array.from({ length: MAX_PLANNED_ANSWERS }, () => storage.answersOf(tenantId(id)).plan(JUNK)))
      await nextMs()
    }
    // Room for what the flood leaves besides plans (its lost-reply records, 4,000 in the record all
    // tenants share, for 2 minutes, and its keys: 690 KB measured), not for its plans too (about
    // 110 bytes each: 440 KB).
    const used = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))![1])
    await redis.cli('CONFIG', 'SET', 'maxmemory', String(used + FLOOD_HEADROOM))
    const flood = Array.from({ length: FLOOD_KEYS }, (_, i) => `flood-${i}`)
    const refusals: Response[] = []
    for (let i = 0; i < flood.length; i += 10) {
      await Promise.all(flood.slice(i, i + 10).map(async (key) => {
        for (let n = 0; n < MAX_PLANNED_ANSWERS; n++) {
          const response = await plan(n % 2 === 0 ? a : b, { ...JUNK, times: 1000 }, key)
          if (response.status === 201) await response.arrayBuffer()
          else refusals.push(response)
        }
      }))
    }
    expect(refusals.length).toBeGreaterThan(0)
    expect(refusals[0]!.headers.get('retry-after')).toBe('1')
    expectErrorBody(await jsonOf(refusals[0]!), 503, 'plan_book_full')
    expect((await b.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: '{"name":"after"}' })).status).toBe(201)
    expect(await pending(b)).toEqual([{ operation: 'listOrders', status: 500, code: 'internal_error', times: 99 }])
    expect((await a.fetch('/v1/store/orders', { headers: auth('partner') })).status).toBe(500)
    expect((await a.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('partner', true), body: '{"name":"empty"}' })).status).toBe(200)
    const counts = await Promise.all([...earlier, ...flood].map(async (key) => ((await pending(b, key)) as unknown[]).length))
    expect(counts.reduce((sum, count) => sum + count, 0)).toBe(MAX_BOOK_PLANS - 1)
    // None gave way below its share of the cap.
    expect(Math.min(...counts)).toBeGreaterThanOrEqual(Math.floor(MAX_BOOK_PLANS / (counts.length + 1)) - 1)
  })
})

describe.runIf(REQUIRE_REDIS)('planned answers on a Redis Cluster', () => {
  it('plans, answers, clears and deletes a tenant’s plans as on one Redis, and tells the operator the cap over all tenants is not enforced there', async () => {
    const cluster = await startRedisCluster()
    const warnings: string[] = []
    const sandbox = await startSandbox({ redisUrl: cluster.url, adminToken: ADMIN, anyKey: true, warn: (message) => warnings.push(message) })
    expect(warnings).toContain(`the cap on planned answers over all tenants (${MAX_BOOK_PLANS}) is not enforced on a Redis Cluster (the plan book is in another slot than a tenant's plans); each tenant still holds at most ${MAX_PLANNED_ANSWERS}`)
    // So is the cap on write outcomes on record: on a Cluster each tenant keeps its own record (attack4 H5).
    expect(warnings).toContain(`the cap on write outcomes on record over all tenants (${OUTCOME_RECORD_TOTAL}) is not enforced on a Redis Cluster (the shared record is in another slot than a tenant's keys); each tenant still keeps at most ${OUTCOME_RECORD_ENTRIES}, and its record (about 570 bytes for one write) an hour after its last write`)
    expect((await plan(sandbox, { operation: 'listCategories', status: 401, times: 2 })).status).toBe(201)
    expect((await sandbox.fetch('/v1/categories', { headers: auth('partner') })).status).toBe(401)
    expect(await pending(sandbox)).toEqual([{ operation: 'listCategories', status: 401, code: 'invalid_api_key', times: 1 }])
    expect((await sandbox.fetch('/__sandbox/answers', { method: 'DELETE', headers: auth('partner') })).status).toBe(204)
    expect((await sandbox.fetch('/v1/categories', { headers: auth('partner') })).status).toBe(200)
    expect((await plan(sandbox, { operation: 'createCategory', status: 500 })).status).toBe(201)
    expect((await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: '{"name":"x"}' })).status).toBe(500)
    expect((await plan(sandbox, { operation: 'createCategory', status: 500 })).status).toBe(201)
    expect((await sandbox.fetch(`/__sandbox/tenants/${tenantId('partner')}`, { method: 'DELETE', headers: auth(ADMIN) })).status).toBe(204)
    expect(await pending(sandbox)).toEqual([])
  })
})
