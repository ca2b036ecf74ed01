/**
 * Attack2 on Redis: a scenario switch, a reset or an admin write (journal clear, planned answers)
 * whose reply was lost is answered with its true outcome, as a create is (F3); the longest delay
 * the Redis store documents never meets a 503 from a healthy Redis, however slowly the body came,
 * and a request that runs out of time is logged (F7). Each against a real redis-server.
 */
import { describe, expect, it, onTestFinished } from 'vitest'
import { redisDelayLimit } from '../../src/storage/redis-connection.js'
import { startFlakyProxy } from '../support/flaky-proxy.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { collect, openSocket } from '../support/raw-http.js'
import { REQUIRE_REDIS, startRedis } from '../support/redis-server.js'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

const create = (sandbox: RunningSandbox, name: string, key = 'partner') =>
  sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name }), signal: AbortSignal.timeout(15_000) })

const admin = (sandbox: RunningSandbox, method: string, path: string, body?: unknown) =>
  sandbox.fetch(`/__sandbox/${path}`, { method, headers: auth('partner', body !== undefined), ...(body === undefined ? {} : { body: JSON.stringify(body) }), signal: AbortSignal.timeout(15_000) })

async function state(sandbox: RunningSandbox): Promise<{ scenario: string; names: string[]; journalSize: number }> {
  const response = await admin(sandbox, 'GET', 'state')
  expect(response.status).toBe(200)
  const body = (await jsonOf(response)) as { scenario: { name: string }; categories: { name: string }[]; journalSize: number }
  return { scenario: body.scenario.name, names: body.categories.map((category) => category.name), journalSize: body.journalSize }
}

/** A sandbox on Redis through a proxy that can cut the connection after Redis ran a command, with one category of the partner's. */
async function sandboxBehindProxy(options: { requestTimeoutMs?: number } = {}) {
  const redis = await startRedis({ aof: true })
  const proxy = await startFlakyProxy(redis.port)
  const requestTimeoutMs = options.requestTimeoutMs ?? 10_000
  const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs, headersTimeoutMs: Math.min(5_000, requestTimeoutMs / 2) })
  expect((await create(sandbox, 'mine')).status).toBe(201)
  // Every script once, so that each later one goes by its SHA alone (a marker meets only its arguments).
  expect((await admin(sandbox, 'PUT', 'scenario', { name: 'default' })).status).toBe(200)
  expect((await admin(sandbox, 'PUT', 'scenario', { name: 'empty' })).status).toBe(200)
  expect((await admin(sandbox, 'POST', 'answers', { operation: 'listCategories', status: 500 })).status).toBe(201)
  for (const path of ['answers', 'requests']) expect((await admin(sandbox, 'DELETE', path)).status).toBe(204)
  expect((await create(sandbox, 'mine')).status).toBe(201)
  // The journal entries of the requests above are written before their answers leave: nothing is in flight.
  return { redis, proxy, sandbox }
}

describe.runIf(REQUIRE_REDIS)('a switch, reset or admin write Redis ran but whose reply was lost (attack2 F3)', () => {
  it('answers a scenario switch 200 when Redis applied it and the connection dropped before the reply, applied once', async () => {
    const { proxy, sandbox } = await sandboxBehindProxy()
    proxy.cut('$7\r\nreplace\r\n', 'after')
    const response = await admin(sandbox, 'PUT', 'scenario', { name: 'default' })
    expect(response.status, JSON.stringify(await response.clone().json())).toBe(200)
    expect(((await jsonOf(response)) as { scenario: { name: string } }).scenario.name).toBe('default')
    const after = await state(sandbox)
    expect(after.scenario).toBe('default')
    expect(after.names).not.toContain('mine')
  })

  it('answers a reset to the start scenario 200 when Redis applied it and the connection dropped before the reply', async () => {
    const { proxy, sandbox } = await sandboxBehindProxy()
    // The partner is on the server's start scenario: its reset takes its keys away (mode `default`).
    proxy.cut('$7\r\ndefault\r\n', 'after')
    const response = await admin(sandbox, 'POST', 'reset')
    expect(response.status, JSON.stringify(await response.clone().json())).toBe(200)
    expect(await jsonOf(response)).toMatchObject({ scenario: { name: 'empty' }, categories: 0 })
    expect(await state(sandbox)).toEqual({ scenario: 'empty', names: [], journalSize: 0 })
  })

  it('answers a reset onto another scenario ({"scenario": …}) 200 when Redis applied it and the connection dropped before the reply', async () => {
    const { proxy, sandbox } = await sandboxBehindProxy()
    proxy.cut('$7\r\nreplace\r\n', 'after')
    const response = await admin(sandbox, 'POST', 'reset', { scenario: 'default' })
    expect(response.status, JSON.stringify(await response.clone().json())).toBe(200)
    expect(((await jsonOf(response)) as { scenario: { name: string } }).scenario.name).toBe('default')
    const after = await state(sandbox)
    expect(after.scenario).toBe('default')
    expect(after.names).not.toContain('mine')
    expect(after.journalSize).toBe(0)
  })

  it('answers a scenario switch 503 write_outcome_unknown, saying so, when Redis stays silent past the request’s time', async () => {
    const { redis, proxy, sandbox } = await sandboxBehindProxy({ requestTimeoutMs: 4000 })
    onTestFinished(() => redis.signal('SIGCONT'))
    proxy.onCommand('$7\r\nreplace\r\n', () => redis.signal('SIGSTOP'))
    const response = await admin(sandbox, 'PUT', 'scenario', { name: 'default' })
    redis.signal('SIGCONT')
    expect(response.status).toBe(503)
    expect(response.headers.get('retry-after')).toBe('5')
    const body = await jsonOf(response)
    expectErrorBody(body, 503, 'write_outcome_unknown')
    expect((body as { message: string }).message).toContain('may or may not have been applied')
  })

  it('answers DELETE /__sandbox/requests 204 when Redis applied it and the connection dropped before the reply', async () => {
    const { proxy, sandbox } = await sandboxBehindProxy()
    expect((await state(sandbox)).journalSize).toBeGreaterThan(0)
    proxy.cut(':jsizes', 'after')
    const response = await admin(sandbox, 'DELETE', 'requests')
    expect(response.status).toBe(204)
    expect((await state(sandbox)).journalSize).toBe(0)
  })

  it('answers POST /__sandbox/answers 201 when Redis applied it and the connection dropped before the reply, planned once', async () => {
    const { proxy, sandbox } = await sandboxBehindProxy()
    const plan = { operation: 'listCategories', status: 500, code: 'internal_error' }
    expect((await admin(sandbox, 'POST', 'answers', { ...plan, times: 2 })).status).toBe(201)
    // The plan as stored (`<operation>\t<times>\t…`): only this PLAN script's arguments hold it.
    proxy.cut('listCategories\t3\t', 'after')
    const response = await admin(sandbox, 'POST', 'answers', { ...plan, times: 3 })
    expect(response.status, JSON.stringify(await response.clone().json())).toBe(201)
    const pending = (await jsonOf(await admin(sandbox, 'GET', 'answers'))) as { times: number }[]
    expect(pending.map((answer) => answer.times)).toEqual([2, 3])
  })

  it('answers DELETE /__sandbox/answers 204 when Redis applied it and the connection dropped before the reply', async () => {
    const { proxy, sandbox } = await sandboxBehindProxy()
    expect((await admin(sandbox, 'POST', 'answers', { operation: 'listCategories', status: 500 })).status).toBe(201)
    // The CLEAR script's keys: the list, then the outcome record (the scenario read names the list
    // too, but no outcome record after it).
    let cut = false
    proxy.cut(':answers\r\n$', 'after', () => (cut = true))
    const response = await admin(sandbox, 'DELETE', 'answers')
    expect(cut, 'the clear reached Redis and its reply was cut').toBe(true)
    expect(response.status).toBe(204)
    expect(await jsonOf(await admin(sandbox, 'GET', 'answers'))).toEqual([])
  })
})

/** Sends a create with `Prefer: delay=<delay>` whose body's last byte leaves `bodyMs` after its headers; the raw answer. */
async function slowCreate(sandbox: RunningSandbox, delay: number, bodyMs: number) {
  const body = JSON.stringify({ name: `slow body, delay ${delay}` })
  const socket = await openSocket(sandbox.origin)
  const answer = collect(socket, 20_000)
  socket.write(`POST /v1/categories HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nPrefer: delay=${delay}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, -1)}`)
  await sleep(bodyMs)
  socket.write(body.slice(-1))
  return answer
}

describe.runIf(REQUIRE_REDIS)('a delay on Redis with a slow body (attack2 F7)', () => {
  it('answers 201 to the longest Prefer: delay the Redis store allows after a body that took most of a second, the delay counting from the request’s arrival', async () => {
    const redis = await startRedis()
    const requestTimeoutMs = 3000
    const warnings: string[] = []
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs, headersTimeoutMs: 1500, warn: (message) => warnings.push(message) })
    const limit = redisDelayLimit(requestTimeoutMs)
    const answer = await slowCreate(sandbox, limit, 1200)
    expect(answer.status, answer.text).toBe(201)
    const names = ((await jsonOf(await sandbox.fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)
    expect(names).toEqual([`slow body, delay ${limit}`])
    expect(warnings).toEqual([])
  })

  it('holds a planned answer’s delayMs to the same limit: one over is refused naming it, the longest answers 201 after a slow body', async () => {
    const redis = await startRedis()
    const requestTimeoutMs = 3000
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs, headersTimeoutMs: 1500 })
    const limit = redisDelayLimit(requestTimeoutMs)
    const over = await admin(sandbox, 'POST', 'answers', { operation: 'createCategory', delayMs: limit + 1 })
    const body = (await jsonOf(over)) as { message: string }
    expectErrorBody(body, 400, 'invalid_field')
    expect(body.message).toContain(`from 0 to ${limit}`)
    expect((await admin(sandbox, 'POST', 'answers', { operation: 'createCategory', delayMs: limit })).status).toBe(201)
    const answer = await slowCreate(sandbox, 0, 1200)
    expect(answer.status, answer.text).toBe(201)
    expect(await jsonOf(await admin(sandbox, 'GET', 'answers'))).toEqual([])
  })

  it('logs a request whose body came too late for its Redis work, answered 503 storage_unavailable from a healthy Redis', async () => {
    const redis = await startRedis()
    const requestTimeoutMs = 5000
    const warnings: string[] = []
    const sandbox = await startSandbox({ redisUrl: redis.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs, headersTimeoutMs: 2000, warn: (message) => warnings.push(message) })
    // Its Redis deadline is 4.5 s after its headers; the server's own request timeout, 5 s.
    const answer = await slowCreate(sandbox, 0, 4600)
    expect(answer.status, answer.text).toBe(503)
    expectErrorBody(JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4)), 503, 'storage_unavailable')
    expect(warnings.filter((warning) => warning.startsWith('request out of time'))).toHaveLength(1)
    expect(warnings.join('\n')).toContain('Redis itself is not failing')
  })
})

describe.runIf(REQUIRE_REDIS)('a standalone Redis client whose connection stays open but silent (attack2 F2, a worker stuck for 7 minutes)', () => {
  it('is replaced by a new client after 5 s of failures, and the replica serves again with Redis healthy all along', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const warnings: string[] = []
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: 3000, headersTimeoutMs: 1500, warn: (message) => warnings.push(message) })
    expect((await create(sandbox, 'before')).status).toBe(201)
    // The client's one connection goes silent; nothing tells node-redis, which never reconnects by itself.
    proxy.stall()
    const statuses: number[] = []
    for (const until = Date.now() + 20_000; Date.now() < until && statuses.at(-1) !== 200; ) {
      const response = await sandbox.fetch('/v1/categories', { headers: auth('partner'), signal: AbortSignal.timeout(10_000) })
      statuses.push(response.status)
      await response.body?.cancel()
    }
    expect(statuses[0]).toBe(503)
    expect(statuses.at(-1)).toBe(200)
    expect(warnings.some((warning) => warning.includes('with a new client'))).toBe(true)
    expect((await create(sandbox, 'after')).status).toBe(201)
    const names = ((await jsonOf(await sandbox.fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)
    expect(names).toEqual(['before', 'after'])
  })
})

/**
 * Creates 'lost reply' on `sandbox`: Redis applies it and its reply is lost; its settle is held while another program
 * deletes the record of outcomes and `meanwhile` runs, then delivered. Resolves with the create's answer.
 */
async function lostReplyWhileRecordDeleted({ redis, proxy, sandbox }: Awaited<ReturnType<typeof sandboxBehindProxy>>, meanwhile: () => Promise<void>): Promise<Response> {
  let done: Promise<void> | undefined
  proxy.cut('"lost reply"', 'after', () => {
    proxy.hold('petstore-sandbox:opt')
    done = (async () => {
      await redis.cli('DEL', 'petstore-sandbox:ops', 'petstore-sandbox:opt')
      await meanwhile()
      // Delivered once the settle came (and was held).
      for (;;) {
        const delivered = await proxy.deliver().then(
          () => true,
          () => false,
        )
        if (delivered) break
        await sleep(20)
      }
    })()
  })
  const answer = await create(sandbox, 'lost reply')
  await done
  return answer
}

describe.runIf(REQUIRE_REDIS)('a create whose reply was lost while another program deleted the record of outcomes (attack66 F2)', () => {
  it('answers it 503 write_outcome_unknown, never storage_unavailable ("not applied") for a create Redis applied', async () => {
    const { redis, proxy, sandbox } = await sandboxBehindProxy()
    // Applied, then the record of outcomes deleted (a cleanup job deleting keys by pattern), then the reply lost.
    proxy.cut('"lost reply"', 'after', () => void redis.cli('DEL', 'petstore-sandbox:ops', 'petstore-sandbox:opt'))
    const answer = await create(sandbox, 'lost reply')
    // Before: 503 storage_unavailable, "not applied", the category stored all the same (a retry stored it twice).
    expect(answer.status).toBe(503)
    expect(((await jsonOf(answer)) as { code: string }).code).toBe('write_outcome_unknown')
    expect((await state(sandbox)).names).toContain('lost reply')
  })

  it('answers it 503 write_outcome_unknown when another write began the record again before the settle asked it (attack69 F1)', async () => {
    const setup = await sandboxBehindProxy()
    // Another replica on the same Redis (each tenant's writes share the one record there).
    const other = await startSandbox({ redisUrl: `redis://127.0.0.1:${setup.redis.port}`, scenario: 'empty', apiKeys: ['other'] })
    const answer = await lostReplyWhileRecordDeleted(setup, async () => {
      expect((await create(other, 'elsewhere', 'other')).status).toBe(201)
    })
    // Before: 503 storage_unavailable, "not applied" (the record held `!seq` again), the category stored all the same.
    expect(answer.status).toBe(503)
    expect(((await jsonOf(answer)) as { code: string }).code).toBe('write_outcome_unknown')
    expect((await state(setup.sandbox)).names).toContain('lost reply')
  })

  it('answers it 503 write_outcome_unknown when another replica’s settle, its first touch of the record, began the record again before the settle asked it (attack75 F1)', async () => {
    const setup = await sandboxBehindProxy()
    // Another replica on the same Redis, that has written nothing: its create never reaches Redis, so its settle is
    // what begins the record again.
    const otherProxy = await startFlakyProxy(setup.redis.port)
    const other = await startSandbox({ redisUrl: otherProxy.url, scenario: 'empty', apiKeys: ['other'], requestTimeoutMs: 10_000 })
    const answer = await lostReplyWhileRecordDeleted(setup, async () => {
      otherProxy.cut('"never sent"', 'before')
      // Right for its own create: Redis never had it.
      expectErrorBody(await jsonOf(await create(other, 'never sent', 'other')), 503, 'storage_unavailable')
    })
    // Before: 503 storage_unavailable, "not applied" (12 of 12 in the attack): the other replica's settle dated the record
    // it began as old as the writes it may ask about, and this settle took it for one there when its create was sent.
    expect(answer.status).toBe(503)
    expect(((await jsonOf(answer)) as { code: string }).code).toBe('write_outcome_unknown')
    expect((await state(setup.sandbox)).names).toContain('lost reply')
    expect((await setup.redis.cli('HEXISTS', 'petstore-sandbox:ops', '!bornBy')).trim()).toBe('1')
  })
})
