import { describe, expect, it } from 'vitest'
import { PetstoreStore, type DurableWrite, type StoreSnapshot } from '../src/core/store.js'
import { Tenant } from '../src/core/tenant.js'
import { createPetstore, tenantOf } from '../src/petstore.js'
import { BUILTIN_SCENARIOS } from '../src/scenario/builtin-scenarios.js'

const defaultScenario = BUILTIN_SCENARIOS['default']!

describe('PetstoreStore snapshot and restore', () => {
  it('snapshots the seeded categories and the next id', async () => {
    const store = new PetstoreStore()
    await store.seed(defaultScenario)
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
    const store = new PetstoreStore()
    await store.seed(defaultScenario)
    await store.restore(saved)
    expect(await store.listCategories()).toEqual(saved.categories)
    expect(await store.createCategory({ name: 'Snakes' })).toEqual({ id: 10, name: 'Snakes' })
    expect(await store.listPets()).toHaveLength(defaultScenario.seed.pets.length)
  })

  it('reports the state after every seed, create and restore to onWrite', async () => {
    const store = new PetstoreStore()
    const seen: StoreSnapshot[] = []
    store.onWrite = (snapshot) => seen.push(snapshot)
    await store.seed(BUILTIN_SCENARIOS['empty']!)
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

  it('answers a create only once its onDurableWrite promise settles', async () => {
    const store = new PetstoreStore()
    await store.seed(BUILTIN_SCENARIOS['empty']!)
    let release!: () => void
    store.onDurableWrite = () => new Promise<void>((resolve) => (release = resolve))
    let answered = false
    const created = store.createCategory({ name: 'Ferrets' }).then(() => (answered = true))
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(answered).toBe(false)
    release()
    await created
    expect(answered).toBe(true)
  })

  it('hands concurrent creates to onDurableWrite in id order before any of them is durable, so they can share one fsync', async () => {
    const store = new PetstoreStore()
    await store.seed(BUILTIN_SCENARIOS['empty']!)
    const writes: DurableWrite[] = []
    let release!: () => void
    const batch = new Promise<void>((resolve) => (release = resolve))
    store.onDurableWrite = (write) => {
      writes.push(write)
      return batch
    }
    const creates = ['a', 'b', 'c'].map((name) => store.createCategory({ name }))
    await new Promise((resolve) => setTimeout(resolve, 10))
    expect(writes).toEqual(['a', 'b', 'c'].map((name, index) => ({ kind: 'created', category: { id: index + 1, name } })))
    release()
    expect(await Promise.all(creates)).toEqual([
      { id: 1, name: 'a' },
      { id: 2, name: 'b' },
      { id: 3, name: 'c' },
    ])
  })

  it('fails the create when onDurableWrite rejects', async () => {
    const store = new PetstoreStore()
    await store.seed(BUILTIN_SCENARIOS['empty']!)
    store.onDurableWrite = () => Promise.reject(new Error('disk full'))
    await expect(store.createCategory({ name: 'Ferrets' })).rejects.toThrow('disk full')
  })

  it('starts a tenant from a saved state and reports reseeds with the scenario name', async () => {
    const writes: [DurableWrite, string][] = []
    const saved: StoreSnapshot = { categories: [{ id: 7, name: 'Saved' }], nextCategoryId: 8 }
    const tenant = new Tenant(defaultScenario, {}, { saved, onWrite: (write, name) => void writes.push([write, name]) })
    await tenant.ready
    expect(await tenant.store.listCategories()).toEqual([{ id: 7, name: 'Saved' }])
    expect(await tenant.store.listPets()).toHaveLength(defaultScenario.seed.pets.length)
    await tenant.useScenario(BUILTIN_SCENARIOS['empty']!)
    expect(writes).toEqual([
      [{ kind: 'replaced', snapshot: saved }, 'default'],
      [{ kind: 'replaced', snapshot: { categories: [], nextCategoryId: 1 } }, 'empty'],
    ])
  })
})
