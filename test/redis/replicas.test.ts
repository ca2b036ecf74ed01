/**
 * Several sandbox replicas (real CLI processes) on one Redis, behind a real nginx balancing
 * round-robin with no affinity: what partners see whichever replica answers them. The load runs
 * PETSTORE_TEST_REPLICA_SECONDS seconds (a few by default, 20 in CI).
 */
import { describe, expect, it } from 'vitest'
import { startNginx } from '../support/nginx.js'
import { REQUIRE_REDIS, startRedis, startRedisCluster } from '../support/redis-server.js'
import { LOAD_SECONDS, runLoad, serverErrors, startReplicas, verifyLoad } from '../support/replicas.js'
import { tenantId } from '../../src/server.js'

const KEYS = Array.from({ length: 50 }, (_, i) => `partner-${i}`)
const NO_LOSS = { lost: 0, unexpected: 0, badIds: 0, journalMissing: 0, journalExtra: 0, inFlightApplied: 0 }
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
/** Room for two loads, starting the replicas and reading every tenant back. */
const TIMEOUT = { timeout: 2 * LOAD_SECONDS * 1000 + 90_000 }

describe.runIf(REQUIRE_REDIS)('three replicas on one Redis behind nginx round-robin', TIMEOUT, () => {
  it('serves 50 tenants identically under mixed load: no 5xx, no lost or unexpected write, unique ids, every journal complete', async () => {
    const redis = await startRedis({ aof: true })
    const replicas = await startReplicas(3, redis.url)
    const nginx = await startNginx(replicas.map((replica) => replica.port))
    const report = await runLoad({ origin: nginx.origin, keys: KEYS, seconds: LOAD_SECONDS })
    console.log(`replicas: ${report.requests} requests in ${LOAD_SECONDS} s through nginx, statuses ${JSON.stringify(Object.fromEntries(report.statuses))}`)
    expect(report.requests).toBeGreaterThan(100)
    expect(serverErrors(report)).toBe(0)
    expect(report.networkErrors).toBe(0)
    expect(await verifyLoad(nginx.origin, report)).toEqual(NO_LOSS)
  })

  it('keeps every acknowledged create when one replica is killed -9 mid-load, and the others keep serving', async () => {
    const redis = await startRedis({ aof: true })
    const replicas = await startReplicas(3, redis.url)
    const nginx = await startNginx(replicas.map((replica) => replica.port))
    const load = runLoad({ origin: nginx.origin, keys: KEYS, seconds: LOAD_SECONDS })
    await sleep((LOAD_SECONDS * 1000) / 2)
    replicas[0]!.run.child.kill('SIGKILL')
    const report = await load
    const verdict = await verifyLoad(nginx.origin, report, { journal: false })
    expect({ lost: verdict.lost, unexpected: verdict.unexpected, badIds: verdict.badIds }).toEqual({ lost: 0, unexpected: 0, badIds: 0 })
    // The two left answer every request from now on.
    const after = await runLoad({ origin: nginx.origin, keys: KEYS.slice(0, 10), seconds: 1, seed: 2 })
    expect(after.statuses.get(502) ?? 0).toBe(0)
    expect(serverErrors(after)).toBe(0)
    expect((await verifyLoad(nginx.origin, after, { journal: false })).lost).toBe(0)
  })

  it('keeps every acknowledged create across a Redis crash and restart with AOF (appendfsync always); every replica serves again without a restart', async () => {
    const began = Date.now()
    const step = (what: string) => console.log(`aof restart: ${what} at ${Date.now() - began} ms`)
    const redis = await startRedis({ aof: true })
    const replicas = await startReplicas(2, redis.url)
    const nginx = await startNginx(replicas.map((replica) => replica.port))
    /** What each replica told its operator (Redis failures and recoveries), for a failure's message. */
    const logs = () => replicas.map((replica, i) => `replica ${i}:\n${replica.run.stderr()}`).join('\n')
    step('up')
    const report = await runLoad({ origin: nginx.origin, keys: KEYS, seconds: LOAD_SECONDS })
    step(`load done, ${report.requests} requests, statuses ${JSON.stringify(Object.fromEntries(report.statuses))}`)
    expect(serverErrors(report), `statuses ${JSON.stringify(Object.fromEntries(report.statuses))}\n${logs()}`).toBe(0)
    await redis.stop('SIGKILL')
    step('redis killed')
    // Redis down: the replicas answer 503 storage_unavailable, promptly.
    const down = await fetch(`${nginx.origin}/v1/categories`, { headers: { authorization: 'Bearer partner-0', 'x-load-id': 'verify' }, signal: AbortSignal.timeout(10_000) })
    expect(down.status).toBe(503)
    expect(await down.json()).toMatchObject({ code: 'storage_unavailable', status: 503 })
    // Asked from the moment Redis accepts connections, while it may still be reloading its AOF.
    await redis.start({ until: 'listening' })
    step('redis restarted')
    // Each replica on its own (nginx would hide one that never recovers behind the other): its
    // normal answer or our 503, each within the replicas' request timeout (30 s; the abort at 10 s).
    for (const [i, replica] of replicas.entries()) {
      const statuses: number[] = []
      const deadline = Date.now() + 20_000
      while (statuses.at(-1) !== 200 && Date.now() < deadline) {
        const response = await fetch(`http://127.0.0.1:${replica.port}/v1/categories`, { headers: { authorization: 'Bearer partner-0', 'x-load-id': 'verify' }, signal: AbortSignal.timeout(10_000) })
        statuses.push(response.status)
        if (response.status === 200) await response.body?.cancel()
        else {
          expect(response.status).toBe(503)
          expect(await response.json()).toMatchObject({ code: 'storage_unavailable', status: 503 })
          await sleep(100)
        }
      }
      expect(statuses.at(-1), `replica ${i} answered ${statuses.join(' ')} after the restart\n${logs()}`).toBe(200)
      step(`replica ${i} serving again after ${statuses.length} requests`)
    }
    const explain: string[] = []
    expect(await verifyLoad(nginx.origin, report, { explain }), explain.join('\n')).toEqual(NO_LOSS)
    step('verified')
  })

  it('shows a scenario switch and a reset made on one replica on every other one', async () => {
    const redis = await startRedis()
    const [a, b] = await startReplicas(2, redis.url)
    const on = (replica: { port: number }, path: string, init: RequestInit = {}) =>
      fetch(`http://127.0.0.1:${replica.port}${path}`, { ...init, headers: { authorization: 'Bearer switcher', 'content-type': 'application/json' } })
    // On the empty scenario there are no pets; after the switch made on a, b serves default's.
    expect((await on(b!, '/v1/pets/1')).status).toBe(404)
    expect((await on(a!, '/__sandbox/scenario', { method: 'PUT', body: JSON.stringify({ name: 'default' }) })).status).toBe(200)
    expect((await on(b!, '/v1/pets/1')).status).toBe(200)
    expect(((await (await on(b!, '/__sandbox/state')).json()) as { scenario: { name: string } }).scenario.name).toBe('default')
    expect((await on(b!, '/v1/categories', { method: 'POST', body: JSON.stringify({ name: 'made on b' }) })).status).toBe(201)
    expect((await on(a!, '/__sandbox/reset', { method: 'POST' })).status).toBe(200)
    const names = ((await (await on(b!, '/v1/categories')).json()) as { name: string }[]).map((category) => category.name)
    expect(names).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
  })
})

describe.runIf(REQUIRE_REDIS)('three replicas on a 3-master Redis Cluster behind nginx', TIMEOUT, () => {
  it('spreads tenants over all three shards and serves them under mixed load with no 5xx, no lost write, complete journals; a replica killed -9 loses nothing', async () => {
    const cluster = await startRedisCluster()
    const masters = new Set(await Promise.all(KEYS.map((key) => cluster.masterOf(`petstore-sandbox:{${tenantId(key)}}:meta`))))
    expect(masters).toEqual(new Set(cluster.nodes.map((node) => node.port)))
    const replicas = await startReplicas(3, cluster.url)
    const nginx = await startNginx(replicas.map((replica) => replica.port))
    const report = await runLoad({ origin: nginx.origin, keys: KEYS, seconds: LOAD_SECONDS })
    expect(serverErrors(report)).toBe(0)
    expect(await verifyLoad(nginx.origin, report)).toEqual(NO_LOSS)
    // Every tenant's keys are where its hash tag says: on the master serving that slot.
    for (const key of KEYS.filter((candidate) => report.tenants.get(candidate)!.acknowledged.size > 0).slice(0, 10)) {
      const meta = `petstore-sandbox:{${tenantId(key)}}:meta`
      const port = await cluster.masterOf(meta)
      const node = cluster.nodes.find((candidate) => candidate.port === port)!
      expect((await node.cli('EXISTS', meta)).trim()).toBe('1')
    }
    const others = KEYS.map((key) => `${key}-b`)
    const load = runLoad({ origin: nginx.origin, keys: others, seconds: LOAD_SECONDS, seed: 3 })
    await sleep((LOAD_SECONDS * 1000) / 2)
    replicas[1]!.run.child.kill('SIGKILL')
    const killed = await load
    const verdict = await verifyLoad(nginx.origin, killed, { journal: false })
    expect({ lost: verdict.lost, unexpected: verdict.unexpected, badIds: verdict.badIds }).toEqual({ lost: 0, unexpected: 0, badIds: 0 })
  })
})

describe.runIf(REQUIRE_REDIS)('a replica on a Redis Cluster that loses a master', TIMEOUT, () => {
  it('answers 503 storage_unavailable for the lost shard’s tenants without hanging, reports it on health, and serves again once the master is back', async () => {
    const began = Date.now()
    const step = (what: string) => console.log(`cluster master loss: ${what} at ${Date.now() - began} ms`)
    const cluster = await startRedisCluster()
    const [replica] = await startReplicas(1, cluster.url)
    const origin = `http://127.0.0.1:${replica!.port}`
    step('cluster and replica up')
    const victim = cluster.nodes[0]!
    let onVictim: string | undefined
    for (const candidate of KEYS) {
      if ((await cluster.masterOf(`petstore-sandbox:{${tenantId(candidate)}}:meta`)) === victim.port) {
        onVictim = candidate
        break
      }
    }
    expect(onVictim).toBeDefined()
    // A request that hangs fails here (after 10 s) instead of eating the test's time.
    const list = () => fetch(`${origin}/v1/categories`, { headers: { authorization: `Bearer ${onVictim!}` }, signal: AbortSignal.timeout(10_000) })
    expect((await list()).status).toBe(200)
    expect((await fetch(`${origin}/__sandbox/health`)).status).toBe(200)
    await victim.stop('SIGKILL')
    step(`master ${victim.port} killed`)
    const down = await list()
    expect(down.status).toBe(503)
    expect(await down.json()).toMatchObject({ code: 'storage_unavailable' })
    const health = await fetch(`${origin}/__sandbox/health`, { signal: AbortSignal.timeout(10_000) })
    expect(health.status).toBe(503)
    expect(await health.json()).toMatchObject({ storage: { kind: 'redis', ok: false } })
    // Down longer than the cluster's node timeout (2 s): the other masters mark it failed.
    await sleep(5000)
    await victim.start()
    step('master restarted')
    let status = 0
    const deadline = Date.now() + 40_000
    while (status !== 200 && Date.now() < deadline) {
      status = (await list()).status
      if (status !== 200) await sleep(200)
    }
    step(`answered ${status}`)
    expect(status, replica!.run.stderr()).toBe(200)
    expect(replica!.run.child.exitCode).toBeNull()
  })
})
