/**
 * The in-memory store's default seed (what "on its seed" means): a store holds it while it holds that very state, and
 * a new version of it (a --watch edit) reaches every store that never wrote, in its queue of writes.
 */
import { describe, expect, it } from 'vitest'
import { seedState } from '../src/storage/storage.js'
import { PetstoreStore } from '../src/storage/memory-store.js'
import { BUILTIN_SCENARIOS } from '../src/scenario/builtin-scenarios.js'

const first = seedState(BUILTIN_SCENARIOS['default']!)
const edited = { ...first, categories: [{ id: 1, name: 'Edited' }], nextCategoryId: 2 }

describe('PetstoreStore default seed', () => {
  it('takes a new version of its seed while its first is still being laid, and stays on its seed (attack52 F1)', async () => {
    // The constructor queues its first seed; the edit lands before that ran.
    const store = new PetstoreStore(first)
    expect(await store.reseed(edited)).toBe(true)
    // Before: the first seed, laid after the new default was set, was taken for a write: the store kept it, a writer.
    expect(store.modified).toBe(false)
    expect((await store.listCategories()).map((category) => category.name)).toEqual(['Edited'])
  })

  it('keeps a tenant’s writes through a new version of its seed, and is on its seed again once reset onto it', async () => {
    const store = new PetstoreStore(first)
    await store.createCategory({ name: 'Mine' })
    expect(await store.reseed(edited)).toBe(false)
    expect(store.modified).toBe(true)
    await store.replace(edited)
    expect(store.modified).toBe(false)
  })
})
