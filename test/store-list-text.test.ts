/**
 * The in-memory store keeps its list's JSON text between writes (issue 14): every write must
 * change what the next list answers, and the text must be the list's own serialisation.
 */
import { describe, expect, it } from 'vitest'
import { seedState } from '../src/storage/storage.js'
import { PetstoreStore } from '../src/storage/memory-store.js'
import { BUILTIN_SCENARIOS } from '../src/scenario/builtin-scenarios.js'

const defaultScenario = BUILTIN_SCENARIOS['default']!
const emptyScenario = BUILTIN_SCENARIOS['empty']!

async function listed(store: PetstoreStore): Promise<unknown> {
  const text = await store.listCategoriesJson()
  expect(text).toBe(JSON.stringify(await store.listCategories()))
  return JSON.parse(text)
}

describe('PetstoreStore list text', () => {
  it('answers the list as its JSON text, and again after every create, replace and restore', async () => {
    const store = new PetstoreStore(seedState(defaultScenario))
    expect(await listed(store)).toHaveLength(5)
    await store.createCategory({ name: 'Ferrets', description: 'Curious' })
    expect(await listed(store)).toContainEqual({ id: 6, name: 'Ferrets', description: 'Curious' })
    await store.replace(seedState(emptyScenario))
    expect(await listed(store)).toEqual([])
    await store.restore({ categories: [{ id: 3, name: 'Owls' }], nextCategoryId: 4 })
    expect(await listed(store)).toEqual([{ id: 3, name: 'Owls' }])
  })

  it('never answers a list from before a write queued ahead of it', async () => {
    const store = new PetstoreStore(seedState(defaultScenario))
    await store.listCategoriesJson()
    const created = store.createCategory({ name: 'Queued' })
    const text = await store.listCategoriesJson()
    await created
    expect(JSON.parse(text)).toContainEqual({ id: 6, name: 'Queued' })
  })

  it('counts its list’s text in what the store holds from the write on, made or not (attack12 M1)', async () => {
    const store = new PetstoreStore(seedState(defaultScenario))
    await store.seeded
    const held = store.heldBytes
    const text = await store.listCategoriesJson()
    // Counted before it was made: making it adds nothing.
    expect(store.heldBytes).toBe(held)
    expect(held).toBeGreaterThan(text.length)
    // Listed or not, two stores with the same writes hold the same, each at least its list's text.
    const unlisted = new PetstoreStore(seedState(defaultScenario))
    await store.createCategory({ name: 'Ferrets', description: '\u0001'.repeat(1000) })
    await unlisted.createCategory({ name: 'Ferrets', description: '\u0001'.repeat(1000) })
    expect(store.heldBytes).toBe(unlisted.heldBytes)
    expect(unlisted.heldBytes).toBeGreaterThan((await unlisted.listCategoriesJson()).length)
    // A character above Latin-1 makes the whole text two bytes a unit.
    const ascii = unlisted.heldBytes
    await unlisted.createCategory({ name: 'Ā' })
    expect(unlisted.heldBytes).toBeGreaterThan(2 * (await unlisted.listCategoriesJson()).length)
    expect(unlisted.heldBytes - ascii).toBeGreaterThan((await unlisted.listCategoriesJson()).length)
  })
})
