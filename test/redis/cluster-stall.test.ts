/**
 * A Redis Cluster with one master stalled (SIGSTOP, shorter than the cluster's node timeout, so
 * Redis itself still serves every other slot): tenants whose keys live on the other masters are
 * served all along, writes and scenario switches included; the stalled master's tenants are told
 * 503 without hanging, and served again once it answers (attack11 R7).
 */
import { describe, expect, it } from 'vitest'
import { REQUIRE_REDIS, startRedisCluster } from '../support/redis-server.js'
import { startReplicas } from '../support/replicas.js'
import { tenantId } from '../../src/server.js'
import { keySlot } from '../../src/storage/redis-connection.js'

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
/** How long the master stays stopped: past the link's renewal of a failing client (5 s). */
const STALL_MS = 11_000

describe.runIf(REQUIRE_REDIS)('a replica on a Redis Cluster while one master stalls', { timeout: 90_000 }, () => {
  it('serves the tenants of the other masters all along (creates, lists, a scenario switch), the registry’s master being the stalled one (attack11 R7)', async () => {
    // Redis's own node timeout (15 s): the stalled master is not failed over, every other slot is served.
    const cluster = await startRedisCluster({ nodeTimeoutMs: 15_000 })
    // The link knows each command's master before sending it: its slots are Redis's own.
    for (const key of ['petstore-sandbox:tenants', 'a{b}{c}', 'a{}{c}', '{}', 'é{ü}', `petstore-sandbox:{${tenantId('partner-1')}}:meta`]) {
      expect(keySlot(key), key).toBe(Number((await cluster.nodes[0]!.cli('CLUSTER', 'KEYSLOT', key)).trim()))
    }
    const registry = await cluster.masterOf('petstore-sandbox:tenants')
    const stalled = cluster.nodes.find((node) => node.port === registry)!
    const on = async (port: number) => {
      for (let i = 0; ; i++) {
        const key = `partner-${i}`
        if ((port === registry) === ((await cluster.masterOf(`petstore-sandbox:{${tenantId(key)}}:meta`)) === registry)) return key
      }
    }
    const healthy = await on(cluster.nodes.find((node) => node !== stalled)!.port)
    const victim = await on(registry)
    const [replica] = await startReplicas(1, cluster.url)
    const origin = `http://127.0.0.1:${replica!.port}`
    const ask = (key: string, path: string, init: RequestInit = {}) =>
      fetch(`${origin}${path}`, { ...init, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, signal: AbortSignal.timeout(20_000) })
    const create = (key: string, name: string) => ask(key, '/v1/categories', { method: 'POST', body: JSON.stringify({ name }) })
    expect((await create(healthy, 'before')).status).toBe(201)
    expect((await create(victim, 'before')).status).toBe(201)

    stalled.signal('SIGSTOP')
    let thawed = false
    const thaw = sleep(STALL_MS).then(() => {
      stalled.signal('SIGCONT')
      thawed = true
    })
    const answers: { what: string; status: number; whileStalled: boolean }[] = []
    const note = async (what: string, answer: Promise<Response>) => {
      const response = await answer
      answers.push({ what, status: response.status, whileStalled: !thawed })
      return response
    }
    // The victim keeps trying: its master fails past the link's renewal time (5 s).
    const victimStatuses: number[] = []
    const victimLoop = (async () => {
      while (!thawed) victimStatuses.push((await note('victim create', create(victim, 'during'))).status)
    })()
    await note('switch', ask(healthy, '/__sandbox/scenario', { method: 'PUT', body: JSON.stringify({ name: 'default' }) }))
    const acknowledged: number[] = []
    for (let i = 0; !thawed; i++) {
      const response = await note('create', create(healthy, `during ${i}`))
      if (response.status === 201) acknowledged.push(((await response.json()) as { id: number }).id)
      await note('list', ask(healthy, '/v1/categories'))
    }
    await thaw
    await victimLoop
    const fromHealthy = answers.filter((answer) => answer.what !== 'victim create')
    expect(fromHealthy.filter((answer) => answer.status >= 300), JSON.stringify(fromHealthy.slice(0, 20))).toEqual([])
    expect(fromHealthy.filter((answer) => answer.whileStalled).length).toBeGreaterThan(2)
    const listed = ((await (await ask(healthy, '/v1/categories')).json()) as { id: number }[]).map((category) => category.id)
    expect(listed).toEqual(expect.arrayContaining(acknowledged))

    // The stalled master's tenant was told (not left hanging), and is served again once it answers.
    expect(victimStatuses.length).toBeGreaterThan(1)
    expect(victimStatuses[0]).toBe(503)
    let status = 0
    for (let attempt = 0; attempt < 100 && status !== 201; attempt++) {
      status = (await create(victim, 'after')).status
      if (status !== 201) await sleep(200)
    }
    expect(status, replica!.run.stderr()).toBe(201)
    // The log names the master that failed, and only that one.
    const failing = replica!.run.stderr().split('\n').filter((line) => line.includes('storage failing'))
    expect(failing.length).toBeGreaterThan(0)
    expect(failing.filter((line) => !line.includes(`(master 127.0.0.1:${registry})`))).toEqual([])
  })
})
