/** One isolated store, journal and scenario per API key; keys never leave the server. */
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import { MemoryStorage } from '../../src/storage/memory-storage.js'
import { seedState } from '../../src/storage/storage.js'
import type { Tenant } from '../../src/storage/tenant.js'
import { loadScenario } from '../../src/scenario/scenario-loader.js'
import { tenantId, type SandboxAppOptions } from '../../src/server.js'
import { TenantRegistry, type TenantRegistryOptions } from '../../src/server/tenant-registry.js'
import { expectErrorBody, expectOperationResponse } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox, useStore } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'
import { BUILTIN_SCENARIOS } from '../../src/scenario/builtin-scenarios.js'
import { OverCapacityError } from '../../src/core/capacity.js'

type Category = { id: number; name: string }

async function createCategory(fetch: (path: string, init?: RequestInit) => Promise<Response>, key: string, name: string) {
  const response = await fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name }) })
  expect(response.status).toBe(201)
  return (await jsonOf(response)) as Category
}

async function categoryNames(fetch: (path: string, init?: RequestInit) => Promise<Response>, key: string) {
  const response = await fetch('/v1/categories', { headers: auth(key) })
  expect(response.status).toBe(200)
  return ((await jsonOf(response)) as Category[]).map((category) => category.name)
}

describe.each(STORES)('tenancy ($name store)', (kind) => {
  useStore(kind)

  it('keeps the data of two keys apart', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1', 'k2'] })
    await createCategory(fetch, 'k1', 'Only k1')
    expect(await categoryNames(fetch, 'k1')).toContain('Only k1')
    expect(await categoryNames(fetch, 'k2')).not.toContain('Only k1')
    expect(await categoryNames(fetch, 'k2')).toHaveLength(5)
  })

  it('gives each key its own ids, starting after the seed', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1', 'k2'] })
    expect((await createCategory(fetch, 'k1', 'a')).id).toBe(6)
    expect((await createCategory(fetch, 'k2', 'b')).id).toBe(6)
  })

  it('keeps the journals of two keys apart', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1', 'k2'] })
    await createCategory(fetch, 'k1', 'x')
    const journal = (await jsonOf(await fetch('/__sandbox/requests', { headers: auth('k2') }))) as unknown[]
    expect(journal).toEqual([])
  })

  it('switches the scenario of one key only', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1', 'k2'] })
    const switched = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('k1', true), body: '{"name":"empty"}' })
    expect(switched.status).toBe(200)
    expect(await categoryNames(fetch, 'k1')).toEqual([])
    expect(await categoryNames(fetch, 'k2')).toHaveLength(5)
  })

  it('accepts the development key only when no key is configured', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k1'] })
    expectErrorBody(await jsonOf(await fetch('/v1/categories', { headers: auth() })), 401, 'invalid_api_key')
  })

  it("accepts the scenario's apiKeys when no key is given", async () => {
    const { fetch, sandbox } = await startSandbox({
      scenario: { name: 'keyed', version: '1.0.0', description: 'Two keys', apiKeys: ['scn-a', 'scn-b'] },
    })
    expect(sandbox.apiKeys).toEqual(['scn-a', 'scn-b'])
    expect((await fetch('/v1/categories', { headers: auth('scn-b') })).status).toBe(200)
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(401)
  })

  it('gives every distinct key its own store with anyKey', async () => {
    const { fetch } = await startSandbox({ anyKey: true })
    await createCategory(fetch, 'partner-a', 'A')
    expect(await categoryNames(fetch, 'partner-b')).not.toContain('A')
    expect(await categoryNames(fetch, 'partner-a')).toContain('A')
  })

  it('never accepts the admin token as an API key, even with anyKey', async () => {
    const { fetch } = await startSandbox({ anyKey: true, adminToken: 'root-token' })
    const response = await fetch('/v1/categories', { headers: auth('root-token') })
    expectOperationResponse('GET', '/categories', 401, await jsonOf(response))
  })

  it('never shows a key in logs, journal entries, state, tenant lists or error messages', async () => {
    const key = 'secret-partner-key-123'
    const { fetch, logs } = await startSandbox({ apiKeys: [key], adminToken: 'admin-secret-456' })
    await createCategory(fetch, key, 'x')
    await fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: '{' })
    const seen = [
      await (await fetch('/__sandbox/requests', { headers: auth(key) })).text(),
      await (await fetch('/__sandbox/state', { headers: auth(key) })).text(),
      await (await fetch('/__sandbox/tenants', { headers: auth('admin-secret-456') })).text(),
      await (await fetch('/__sandbox/state', { headers: auth('wrong-key-789') })).text(),
      JSON.stringify(logs),
    ].join('\n')
    expect(seen).not.toContain(key)
    expect(seen).not.toContain('admin-secret-456')
    expect(seen).not.toContain('wrong-key-789')
    expect(seen).toContain(tenantId(key))
  })

  it('gives 200 concurrent creates on one tenant 200 distinct ids and a list 200 longer', async () => {
    const { fetch } = await startSandbox()
    const before = await categoryNames(fetch, 'sandbox-dev-key')
    const created = await Promise.all(
      Array.from({ length: 200 }, (_, index) => createCategory(fetch, 'sandbox-dev-key', `Concurrent ${index}`)),
    )
    expect(new Set(created.map((category) => category.id)).size).toBe(200)
    const after = await categoryNames(fetch, 'sandbox-dev-key')
    expect(after).toHaveLength(before.length + 200)
  })

  it.each<{ name: string; options: SandboxAppOptions; message: RegExp }>([
    { name: 'apiKeys with anyKey', options: { apiKeys: ['a'], anyKey: true }, message: /cannot be used together/ },
    { name: 'an admin token equal to a key', options: { apiKeys: ['a'], adminToken: 'a' }, message: /must differ/ },
    { name: 'a key with a space', options: { apiKeys: ['a b'] }, message: /without spaces/ },
    { name: 'an unknown scenario', options: { scenario: 'nope' }, message: /no such scenario/ },
  ])('refuses $name when the app is created', async ({ options, message }) => {
    await expect(startSandbox(options)).rejects.toThrow(message)
  })
})

describe('tenancy in memory: eviction never drops data that exists nowhere else', () => {
  it('evicts the least recently used tenant still on its seed beyond maxTenants, never one that wrote', async () => {
    const { fetch, sandbox } = await startSandbox({ anyKey: true, maxTenants: 2 })
    await createCategory(fetch, 'a', 'A')
    await categoryNames(fetch, 'reader') // on its seed: may be evicted
    await createCategory(fetch, 'c', 'C') // evicts reader, not a
    expect(sandbox.tenants.size).toBe(2)
    expect(sandbox.tenants.evictions).toBe(1)
    expect(await categoryNames(fetch, 'a')).toContain('A')
    expect(await categoryNames(fetch, 'c')).toContain('C')
  })

  it('evicts by last use: a tenant used again after a newer one came in stays', async () => {
    const { fetch, sandbox } = await startSandbox({ anyKey: true, maxTenants: 2 })
    await categoryNames(fetch, 'r1')
    await categoryNames(fetch, 'r1')
    await categoryNames(fetch, 'r2')
    await categoryNames(fetch, 'r1') // r1 is now the most recently used
    await categoryNames(fetch, 'r3') // evicts r2
    const live = (await sandbox.tenants.list()).filter((tenant) => tenant.live).map((tenant) => tenant.id)
    expect(live.sort()).toEqual([tenantId('r1'), tenantId('r3')].sort())
  })

  it('refuses a new key with 503 tenant_capacity and Retry-After when every tenant in memory holds writes', async () => {
    const { fetch } = await startSandbox({ anyKey: true, maxTenants: 2 })
    await createCategory(fetch, 'a', 'A')
    await createCategory(fetch, 'b', 'B')
    const refused = await fetch('/v1/categories', { headers: auth('newcomer') })
    expect(refused.status).toBe(503)
    // Until the least recently used tenant has been idle for evictIdleMinutes (60 by default).
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(3500)
    expect(Number(refused.headers.get('retry-after'))).toBeLessThanOrEqual(3600)
    expect(((await jsonOf(refused)) as { code: string }).code).toBe('tenant_capacity')
    expect(await categoryNames(fetch, 'a')).toEqual(expect.arrayContaining(['A']))
    expect(await categoryNames(fetch, 'b')).toEqual(expect.arrayContaining(['B']))
  })

  it('lets a new key in once a tenant holding writes has been idle for evictIdleMinutes: keys that wrote once cannot lock partners out', async () => {
    // Idleness is measured on the monotonic clock (performance.now()), which the test moves on.
    vi.useFakeTimers({ toFake: ['performance'] })
    onTestFinished(() => {
      vi.useRealTimers()
    })
    const { fetch } = await startSandbox({ anyKey: true, maxTenants: 2, evictIdleMinutes: 10 })
    await createCategory(fetch, 'a', 'A')
    await createCategory(fetch, 'b', 'B')
    expect((await fetch('/v1/categories', { headers: auth('newcomer') })).status).toBe(503)
    vi.advanceTimersByTime(5 * 60_000)
    await categoryNames(fetch, 'b') // b is in use; a has been idle 5 minutes
    vi.advanceTimersByTime(6 * 60_000)
    expect(await categoryNames(fetch, 'newcomer')).toHaveLength(5)
    expect(await categoryNames(fetch, 'b')).toContain('B')
  })

  it('evicts no tenant holding writes when the machine’s clock steps a year forward: idleness is measured on the monotonic clock', async () => {
    vi.useFakeTimers({ toFake: ['Date'] })
    onTestFinished(() => {
      vi.useRealTimers()
    })
    const { fetch } = await startSandbox({ anyKey: true, maxTenants: 1, evictIdleMinutes: 10 })
    await createCategory(fetch, 'a', 'A')
    vi.setSystemTime(Date.now() + 365 * 24 * 60 * 60_000)
    const refused = await fetch('/v1/categories', { headers: auth('newcomer') })
    expect(refused.status).toBe(503)
    expect(((await jsonOf(refused)) as { code: string }).code).toBe('tenant_capacity')
    // Not idle yet by the monotonic clock: about 10 minutes to wait, as before the step.
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(500)
    expect(await categoryNames(fetch, 'a')).toContain('A')
  })

  it('never evicts a tenant holding writes with evictIdleMinutes: 0', async () => {
    vi.useFakeTimers({ toFake: ['performance'] })
    onTestFinished(() => {
      vi.useRealTimers()
    })
    const { fetch } = await startSandbox({ anyKey: true, maxTenants: 1, evictIdleMinutes: 0 })
    await createCategory(fetch, 'a', 'A')
    vi.advanceTimersByTime(365 * 24 * 60 * 60_000)
    const refused = await fetch('/v1/categories', { headers: auth('newcomer') })
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe('30')
    expect(await categoryNames(fetch, 'a')).toContain('A')
  })
})

describe('tenant registry at the cap: a tenant with a request under way never leaves (issue 20 F10, F12)', () => {
  async function registry(options: Partial<TenantRegistryOptions> = {}): Promise<TenantRegistry> {
    const scenario = await loadScenario('empty')
    return new TenantRegistry({ scenario, keys: 'any', maxTenants: 1, overrides: {}, storage: new MemoryStorage(seedState(scenario)), ...options })
  }

  it('refuses a new key only after waiting in vain for the tenant with a request under way, with Retry-After 5, and admits it once that request ends (issue 20 F10, F12)', async () => {
    const tenants = await registry({ admissionWaitMs: 100 })
    const a = (await tenants.resolve('a'))!
    await expect(tenants.resolve('b')).rejects.toMatchObject({ code: 'tenant_capacity', retryAfterSeconds: 5 })
    expect(tenants.evictions).toBe(0)
    const b = tenants.resolve('b')
    expect(tenants.waiting).toBe(1)
    a.leave()
    expect(tenants.idOf((await b)!)).toBe(tenantId('b'))
    expect(tenants.evictions).toBe(1)
  })

  it('drains the tenant a waiting key needs: its own new requests wait behind that key, so a steady stream of them cannot keep it in for good (issue 20 F12)', async () => {
    const tenants = await registry({ admissionWaitMs: 60_000 })
    const first = (await tenants.resolve('a'))!
    const newcomer = tenants.resolve('b')
    const again = tenants.resolve('a')
    expect(tenants.waiting).toBe(2)
    first.leave()
    const b = (await newcomer) as Tenant
    expect(tenants.idOf(b)).toBe(tenantId('b'))
    expect(tenants.waiting).toBe(1)
    b.leave()
    expect(tenants.idOf((await again)!)).toBe(tenantId('a'))
    expect(tenants.waiting).toBe(0)
    expect(tenants.evictions).toBe(2)
  })
})

describe('tenant registry at a --watch save of the start scenario, in memory', () => {
  const shop = (version: string, count: number) => ({ ...BUILTIN_SCENARIOS.empty!, name: 'shop', version, seed: { ...BUILTIN_SCENARIOS.empty!.seed, categories: Array.from({ length: count }, (_, i) => ({ id: i + 1, name: `${version} ${i}` })) } })

  it('admits the new seed of a tenant still opening at the save before it is built: it leaves once its request ends (review45 F4)', async () => {
    const v1 = shop('1.0.0', 10)
    const v2 = shop('2.0.0', 2000)
    const admitted: number[] = []
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 10, overrides: {}, storage: new MemoryStorage(seedState(v1)), admit: (_work, growth) => void admitted.push(growth) })
    const opening = tenants.resolve('newcomer')
    tenants.reload(v2)
    const first = (await opening)!
    // Before: its store was reseeded where it stood, 2,000 categories built with nothing admitted for them.
    expect(await first.store.countCategories()).toBe(10)
    first.leave()
    const second = (await tenants.resolve('newcomer'))!
    expect(await second.store.countCategories()).toBe(2000)
    expect(admitted).toHaveLength(2)
    expect(admitted[1]).toBeGreaterThan(admitted[0]! * 50)
  })

  it('gives a stale tenant’s next request the new seed at once, admitted, while its request under way goes on (review45 F3, review46 F2)', async () => {
    const v1 = shop('1.0.0', 1)
    const v2 = shop('2.0.0', 2)
    const admitted: number[] = []
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 10, overrides: {}, storage: new MemoryStorage(seedState(v1)), admissionWaitMs: 60_000, admit: (_work, growth) => void admitted.push(growth) })
    // A request under way at the save, and for as long as this test runs (a delay, a slow reader).
    const busy = (await tenants.resolve('poller'))!
    tenants.reload(v2)
    // Before: entered on the old seed, for as long as its requests overlapped (review45 F3); then made to wait for the
    // request under way, every later request waited the whole admission wait, on the old seed still (review46 F2).
    const next = tenants.resolve('poller')
    expect(next).toBe(busy)
    expect((await busy.store.listCategories()).map((category) => category.name)).toEqual(['2.0.0 0', '2.0.0 1'])
    expect(admitted.at(-1)).toBeGreaterThan(0)
  })

  it('serves a stale tenant’s next request the old seed whole while the new one does not fit, and takes it once it does: never a throw (review46 F1, attack58 F1)', async () => {
    const v1 = shop('1.0.0', 1)
    const v2 = shop('2.0.0', 2)
    let full = false
    const tenants = new TenantRegistry({
      scenario: v1,
      keys: 'any',
      maxTenants: 10,
      overrides: {},
      storage: new MemoryStorage(seedState(v1)),
      admit: (_work, growth) => {
        if (full && growth > 0) throw new OverCapacityError('the tenants hold all the memory the operator allowed', 30)
      },
    })
    const busy = (await tenants.resolve('poller'))!
    tenants.reload(v2)
    full = true
    // Before: the waiting request was routed where nothing caught the refusal (the process exited); then the refusal was
    // the request's answer, so it could not even switch or reset to a smaller state (attack58 F1).
    expect(tenants.resolve('poller')).toBe(busy)
    expect((await busy.store.listCategories()).map((category) => category.name)).toEqual(['1.0.0 0'])
    // Whole: its own version's scenario beside its own seed.
    expect(busy.scenario.version).toBe('1.0.0')
    full = false
    expect(tenants.resolve('poller')).toBe(busy)
    expect((await busy.store.listCategories()).map((category) => category.name)).toEqual(['2.0.0 0', '2.0.0 1'])
    expect(busy.scenario.version).toBe('2.0.0')
  })

  it('keeps a stale tenant in use while its next request’s reseed builds: not dropped to make room mid-build, uncounted (review47 F1)', async () => {
    const v1 = shop('1.0.0', 1)
    const v2 = shop('2.0.0', 20_000)
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 10, overrides: {}, storage: new MemoryStorage(seedState(v1)) })
    const busy = (await tenants.resolve('reader'))!
    tenants.reload(v2)
    // Its next request reads nothing of the seed (GET /store/orders) and ends at once; so does the one under way.
    const next = tenants.resolve('reader') as Tenant
    next.leave()
    busy.leave()
    // Before: idle and on its seed, dropped at once to make room, its 20,000 categories built on, counted nowhere.
    expect(tenants.relieve(tenants.heldBytes() - 1)).toBe(0)
    expect(await next.store.countCategories()).toBe(20_000)
    expect(tenants.heldBytes()).toBeGreaterThan(1_000_000)
  })

  it('asks the memory budget with the signed growth of a stale tenant’s new seed: a smaller one gives memory back (review47 F2)', async () => {
    const v1 = shop('1.0.0', 2000)
    const v2 = shop('2.0.0', 1)
    const admitted: number[] = []
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 10, overrides: {}, storage: new MemoryStorage(seedState(v1)), admit: (_work, growth) => void admitted.push(growth) })
    const busy = (await tenants.resolve('reader'))!
    await busy.store.countCategories()
    tenants.reload(v2)
    expect(tenants.resolve('reader')).toBe(busy)
    // Before: 0, refused as growth near the heap's limit or past the budget, where a switch to the same state was let in.
    expect(admitted.at(-1)).toBeLessThan(0)
  })

  it('gives a request that comes after the save while the tenant still opens the new seed (review47 F3)', async () => {
    const v1 = shop('1.0.0', 3000)
    const v2 = shop('2.0.0', 2)
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 10, overrides: {}, storage: new MemoryStorage(seedState(v1)) })
    const opening = tenants.resolve('newcomer')
    tenants.reload(v2)
    const after = (await tenants.resolve('newcomer'))!
    await opening
    // Before: version 1's 3,000 categories beside version 2's scenario.
    expect(after.scenario.version).toBe('2.0.0')
    expect((await after.store.listCategories()).map((category) => category.name)).toEqual(['2.0.0 0', '2.0.0 1'])
  })

  it('answers what is under way at a save, or opening then, from the old version whole: its scenario with its seed (attack58 F2)', async () => {
    const v1 = shop('1.0.0', 3)
    const v2 = shop('2.0.0', 2)
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 10, overrides: {}, storage: new MemoryStorage(seedState(v1)) })
    const busy = (await tenants.resolve('reader'))!
    const opening = tenants.resolve('newcomer')
    tenants.reload(v2)
    const opened = (await opening)!
    // Before: the new version's name (its state, pets and orders) beside the old seed's categories.
    for (const tenant of [busy, opened]) {
      expect(tenant.scenario.version).toBe('1.0.0')
      expect(await tenant.store.countCategories()).toBe(3)
    }
  })

  it('keeps a reset under way at a save whole: the version it laid, not the new one’s name beside its seed (review48 F2)', async () => {
    const v1 = shop('1.0.0', 1)
    const v2 = shop('2.0.0', 2)
    const v3 = shop('3.0.0', 3)
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 10, overrides: {}, storage: new MemoryStorage(seedState(v1)) })
    const busy = (await tenants.resolve('reader'))!
    tenants.reload(v2)
    expect(tenants.resolve('reader')).toBe(busy)
    // A reset onto version 2 under way when version 3 is saved.
    const reset = busy.resetTo(v2)
    tenants.reload(v3)
    await reset
    // Before: version 3's name (pets, orders) beside version 2's categories.
    expect(busy.scenario.version).toBe('2.0.0')
    expect(await busy.store.countCategories()).toBe(2)
  })

  it('gives a stale tenant’s request queued at the tenant cap the new seed, not the old (review46 F3, F4)', async () => {
    const v1 = shop('1.0.0', 1)
    const v2 = shop('2.0.0', 2)
    const tenants = new TenantRegistry({ scenario: v1, keys: 'any', maxTenants: 2, overrides: {}, storage: new MemoryStorage(seedState(v1)), admissionWaitMs: 60_000 })
    const k = (await tenants.resolve('k'))!
    const l = (await tenants.resolve('l'))!
    // A newcomer waits at the cap (k is drained for it); k's next request queues behind it.
    const newcomer = tenants.resolve('j')
    const again = tenants.resolve('k')
    expect(tenants.waiting).toBe(2)
    tenants.reload(v2)
    l.leave()
    const j = (await newcomer)!
    expect(tenants.idOf(j)).toBe(tenantId('j'))
    const served = (await again)!
    expect(served).toBe(k)
    // Before: claimed into the stale tenant, on the old seed.
    expect((await served.store.listCategories()).map((category) => category.name)).toEqual(['2.0.0 0', '2.0.0 1'])
  })
})
