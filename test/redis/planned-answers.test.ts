/**
 * Planned answers on Redis: two sandbox replicas on one real redis-server serve one tenant, and
 * a plan made through either answers exactly as many requests as it says, whichever replica they reach.
 */
import { describe, expect, it, onTestFinished } from 'vitest'
import { tenantId } from '../../src/server.js'
import { openRedisStorage } from '../../src/server/redis-storage.js'
import { REQUIRE_REDIS, startRedis, type RedisServer } from '../support/redis-server.js'
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
    const scriptsOf = async (key: string) => {
      await replica.fetch('/v1/categories', { headers: auth(key) })
      const before = await scriptsRun(redis)
      for (let i = 0; i < requests; i++) expect((await replica.fetch('/v1/categories', { headers: auth(key) })).status).toBe(200)
      return (await scriptsRun(redis)) - before
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
