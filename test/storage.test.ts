/** The storage interface's shared suite: every implementation passes the same tests. */
import { describe, expect, it } from 'vitest'
import { CategoryLimitError, IdSpaceExhaustedError, seedState, type TenantState } from '../src/storage/storage.js'
import { BUILTIN_SCENARIOS } from '../src/scenario/builtin-scenarios.js'
import { STORES } from './support/stores.js'
import { MemoryStorage } from '../src/storage/memory-storage.js'

const SEED = seedState(BUILTIN_SCENARIOS['default']!)
const SEED_NAMES = ['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish']

describe.each(STORES)('$name storage', (kind) => {
  it('starts a tenant on the default seed, unmodified and not listed', async () => {
    const storage = await kind.open(SEED)
    const store = storage.open('t1')
    expect((await store.listCategories()).map((category) => category.name)).toEqual(SEED_NAMES)
    expect(await store.countCategories()).toBe(5)
    expect(await store.scenario()).toBe('default')
    expect(store.modified).toBe(false)
    expect(await storage.has('t1')).toBe(false)
    expect(await storage.list()).toEqual([])
  })

  it('gives concurrent creates distinct, increasing ids in arrival order', async () => {
    const storage = await kind.open(SEED)
    const store = storage.open('t1')
    const created = await Promise.all(Array.from({ length: 40 }, (_, i) => store.createCategory({ name: `c${i}` })))
    expect(created.map((category) => category.id)).toEqual(Array.from({ length: 40 }, (_, i) => 6 + i))
    expect((await store.listCategories()).slice(5)).toEqual(created)
    expect(store.modified).toBe(true)
    expect(await storage.has('t1')).toBe(true)
  })

  it('keeps tenants apart', async () => {
    const storage = await kind.open(SEED)
    await storage.open('a').createCategory({ name: 'only a', description: 'mine' })
    expect((await storage.open('b').listCategories()).map((category) => category.name)).toEqual(SEED_NAMES)
    expect((await storage.open('a').listCategories()).at(-1)).toEqual({ id: 6, name: 'only a', description: 'mine' })
  })

  it('replaces categories, next id and scenario in one step', async () => {
    const storage = await kind.open(SEED)
    const store = storage.open('t1')
    await store.createCategory({ name: 'gone after replace' })
    const state: TenantState = { scenario: 'empty', categories: [{ id: 3, name: 'Three' }], nextCategoryId: 10 }
    await store.replace(state)
    expect(await store.listCategories()).toEqual([{ id: 3, name: 'Three' }])
    expect(await store.scenario()).toBe('empty')
    expect(await store.createCategory({ name: 'next' })).toEqual({ id: 10, name: 'next' })
    expect(await storage.list()).toEqual([expect.objectContaining({ id: 't1', scenario: 'empty', categories: 2 })])
  })

  it('refuses a create once the next id is no longer a safe integer, keeping what it holds', async () => {
    const storage = await kind.open(SEED)
    const store = storage.open('t1')
    await store.replace({ scenario: 'empty', categories: [], nextCategoryId: Number.MAX_SAFE_INTEGER })
    expect(await store.createCategory({ name: 'last' })).toEqual({ id: Number.MAX_SAFE_INTEGER, name: 'last' })
    await expect(store.createCategory({ name: 'one too many' })).rejects.toBeInstanceOf(IdSpaceExhaustedError)
    expect(await store.listCategories()).toEqual([{ id: Number.MAX_SAFE_INTEGER, name: 'last' }])
  })

  it('holds the category limit across creates in flight together, and counts again after a replace', async () => {
    const storage = await kind.open(SEED)
    const store = storage.open('t1')
    const max = SEED_NAMES.length + 2
    const results = await Promise.allSettled(Array.from({ length: 5 }, (_, i) => store.createCategory({ name: `c${i}` }, max)))
    expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(2)
    for (const result of results.filter((result) => result.status === 'rejected')) expect(result.reason).toBeInstanceOf(CategoryLimitError)
    expect(await store.countCategories()).toBe(max)
    await store.replace({ scenario: 'empty', categories: [], nextCategoryId: 1 })
    await store.createCategory({ name: 'after reset' }, 1)
    await expect(store.createCategory({ name: 'one too many' }, 1)).rejects.toBeInstanceOf(CategoryLimitError)
    expect((await store.listCategories()).map((category) => category.name)).toEqual(['after reset'])
  })

  it('forgets a tenant when it is back on the default seed', async () => {
    const storage = await kind.open(SEED)
    const store = storage.open('t1')
    await store.createCategory({ name: 'x' })
    await store.replace(SEED)
    expect(store.modified).toBe(false)
    expect((await store.listCategories()).map((category) => category.name)).toEqual(SEED_NAMES)
  })

  it('deletes a tenant’s data', async () => {
    const storage = await kind.open(SEED)
    await storage.open('t1').createCategory({ name: 'x' })
    expect(await storage.delete('t1')).toBe(true)
    expect(await storage.delete('t1')).toBe(false)
    expect(await storage.list()).toEqual([])
    expect((await storage.open('t1').listCategories()).map((category) => category.name)).toEqual(SEED_NAMES)
  })

  it('expires tenants neither written nor touched since a time, and only those', async () => {
    const storage = await kind.open(SEED)
    await storage.open('old').createCategory({ name: 'x' })
    await storage.open('read').createCategory({ name: 'x' })
    // The cut lies 150 ms after 'old' was written and 150 ms before 'fresh' was: a loaded machine
    // may take that long between this test reading the clock and expire() reading the store's.
    const cut = Date.now() + 150
    await new Promise((resolve) => setTimeout(resolve, 300))
    await storage.open('fresh').createCategory({ name: 'y' })
    await storage.touch('read')
    await storage.touch('never-wrote')
    expect(await storage.expire(Date.now() - cut)).toEqual(['old'])
    expect((await storage.list()).map((summary) => summary.id).sort()).toEqual(['fresh', 'read'])
  })

  it('reports itself healthy', async () => {
    const storage = await kind.open(SEED)
    expect(await storage.health()).toEqual({ ok: true })
  })
})

describe('memory storage: a tenant deleted while a write of its is under way', () => {
  it('keeps that write the deleted tenant’s: the key’s next tenant starts from the seed, never holding another scenario’s categories under the seed’s name (attack64 F1)', async () => {
    const storage = new MemoryStorage(seedState(BUILTIN_SCENARIOS['default']!))
    // A switch whose request took the tenant's store before the delete, and writes once its body is in.
    const taken = storage.open('t1')
    await storage.delete('t1')
    await taken.replace(seedState(BUILTIN_SCENARIOS['large-catalog']!))
    const next = storage.open('t1')
    // Before: the switch's store brought back under the key: `default` named, 10,000 categories held.
    expect(next.scenarioName).toBe('default')
    expect(await next.countCategories()).toBe(seedState(BUILTIN_SCENARIOS['default']!).categories.length)
    expect(await storage.list()).toEqual([])
  })
})
