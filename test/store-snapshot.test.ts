import { describe, expect, it } from 'vitest'
import { seedState } from '../src/storage/storage.js'
import { PetstoreStore, type StoreSnapshot } from '../src/storage/memory-store.js'
import { createPetstore, tenantOf } from '../src/library/petstore.js'
import { BUILTIN_SCENARIOS } from '../src/scenario/builtin-scenarios.js'

const defaultScenario = BUILTIN_SCENARIOS['default']!

describe('PetstoreStore snapshot and restore', () => {
  it('snapshots the seeded categories and the next id', async () => {
    const store = new PetstoreStore(seedState(defaultScenario))
    const snapshot = await store.snapshot()
    expect(snapshot.categories.map((category) => category.name)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
    expect(snapshot.nextCategoryId).toBe(6)
  })

  it('restores categories and continues ids from the snapshot', async () => {
    const saved: StoreSnapshot = {
      categories: [
        { id: 1, name: 'Dogs' },
        { id: 9, name: 'Ferrets', description: 'Curious' },
      ],
      nextCategoryId: 10,
    }
    const store = new PetstoreStore(seedState(defaultScenario))
    await store.restore(saved)
    expect(await store.listCategories()).toEqual(saved.categories)
    expect(await store.createCategory({ name: 'Snakes' })).toEqual({ id: 10, name: 'Snakes' })
  })

  it('reports the state after every seed, create and restore to onWrite', async () => {
    const store = new PetstoreStore(seedState(BUILTIN_SCENARIOS['empty']!))
    const seen: StoreSnapshot[] = []
    store.onWrite = (snapshot) => seen.push(snapshot)
    await store.createCategory({ name: 'Ferrets' })
    await store.restore({ categories: [], nextCategoryId: 7 })
    await store.listCategories()
    expect(seen).toEqual([
      { categories: [], nextCategoryId: 1 },
      { categories: [{ id: 1, name: 'Ferrets' }], nextCategoryId: 2 },
      { categories: [], nextCategoryId: 7 },
    ])
  })

  it('reaches the store of a petstore through tenantOf and refuses other objects', async () => {
    const petstore = createPetstore({ scenario: 'empty' })
    await tenantOf(petstore).store.restore({ categories: [{ id: 4, name: 'Ferrets' }], nextCategoryId: 5 })
    expect(await petstore.categories.list()).toEqual([{ id: 4, name: 'Ferrets' }])
    expect(() => tenantOf({ ...petstore })).toThrow(/made by createPetstore/)
  })
})
