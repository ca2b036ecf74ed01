/**
 * A replica on Redis while Redis crashes, restarts and reloads its AOF: every request ends within
 * the request timeout with its answer or a 503 storage_unavailable Error body (with Retry-After),
 * and the replica serves again, without a restart, once Redis is back.
 */
import { describe, expect, it } from 'vitest'
import { expectErrorBody } from '../support/openapi-validator.js'
import { startFlakyProxy } from '../support/flaky-proxy.js'
import { REQUIRE_REDIS, startRedis } from '../support/redis-server.js'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
/** The sandboxes' request timeout here; a request still unanswered by then fails the test. */
const REQUEST_TIMEOUT_MS = 5000

/** One request; its status once it ends, failing the test when it takes past the request timeout or answers anything but `ok` or our 503. */
async function expectAnswerOr503(sandbox: RunningSandbox, path: string, init: RequestInit, ok: number): Promise<number> {
  const began = Date.now()
  const response = await sandbox.fetch(path, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS + 1000) })
  const took = Date.now() - began
  expect(took, `${init.method ?? 'GET'} ${path} took ${took} ms`).toBeLessThanOrEqual(REQUEST_TIMEOUT_MS)
  if (response.status !== ok) {
    expect(response.status).toBe(503)
    expect(response.headers.get('retry-after')).toBe('5')
    expectErrorBody(await jsonOf(response), 503, 'storage_unavailable')
  } else await response.body?.cancel()
  return response.status
}

/** Lists until a 200 or `ms` pass; each answer checked by {@link expectAnswerOr503}. */
async function listWithin(sandbox: RunningSandbox, ms: number): Promise<number> {
  const deadline = Date.now() + ms
  let status = 0
  while (status !== 200 && Date.now() < deadline) {
    status = await expectAnswerOr503(sandbox, '/v1/categories', { headers: auth('partner') }, 200)
    if (status !== 200) await sleep(100)
  }
  return status
}

describe.runIf(REQUIRE_REDIS)('a replica while Redis crashes and restarts', () => {
  it('serves again when Redis dies while the replica reconnects (a connection accepted, then reset, before Redis answered)', async () => {
    const redis = await startRedis()
    const proxy = await startFlakyProxy(redis.port)
    const sandbox = await startSandbox({ redisUrl: proxy.url, scenario: 'empty', apiKeys: ['partner'], requestTimeoutMs: REQUEST_TIMEOUT_MS, headersTimeoutMs: 2000 })
    const created = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name: 'before' }) })
    expect(created.status).toBe(201)
    // @note node-redis reconnects at once when its connection drops: against a Redis being
    // killed, that connection can be accepted and reset while the client is saying hello.
    proxy.crash(1)
    await sleep(500)
    expect(proxy.resets).toBe(1)
    expect(await listWithin(sandbox, 10_000)).toBe(200)
    const listed = (await jsonOf(await sandbox.fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]
    expect(listed.map((category) => category.name)).toEqual(['before'])
  })
})
