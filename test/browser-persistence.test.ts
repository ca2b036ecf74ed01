import { getResponse } from 'msw'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { persistInSession, type SessionStore } from '../src/browser/session-persistence.js'
import { PERSIST_STORAGE_KEY } from '../src/browser/persist-key.js'
import { createPetstore, type PetstoreOptions } from '../src/petstore.js'

class MemoryStorage implements SessionStore {
  readonly items = new Map<string, string>()
  getItem(key: string): string | null {
    return this.items.get(key) ?? null
  }
  setItem(key: string, value: string): void {
    this.items.set(key, value)
  }
  removeItem(key: string): void {
    this.items.delete(key)
  }
}

/** A page load: a fresh petstore persisted in `storage`, as `setupPetstoreWorker({ persist: true })` makes. */
async function load(storage: SessionStore, options: PetstoreOptions = {}) {
  const petstore = createPetstore({ scenario: 'empty', ...options })
  await persistInSession(petstore, storage)
  return petstore
}

afterEach(() => {
  vi.restoreAllMocks()
})

describe('persist: true (sessionStorage snapshots)', () => {
  it('keeps created categories and continues ids after a reload', async () => {
    const storage = new MemoryStorage()
    const first = await load(storage)
    await first.categories.create({ name: 'Ferrets', description: 'Curious' })
    await first.categories.create({ name: 'Snakes' })

    const second = await load(storage)
    expect(await second.categories.list()).toEqual([
      { id: 1, name: 'Ferrets', description: 'Curious' },
      { id: 2, name: 'Snakes' },
    ])
    expect(await second.categories.create({ name: 'Owls' })).toEqual({ id: 3, name: 'Owls' })
  })

  it('saves what requests create through the handlers', async () => {
    const storage = new MemoryStorage()
    const petstore = await load(storage, { baseUrl: 'https://api.shop.test/v1' })
    const request = new Request('https://api.shop.test/v1/categories', {
      method: 'POST',
      headers: { authorization: 'Bearer t0ken', 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Ferrets' }),
    })
    const response = await getResponse(petstore.handlers, request)
    expect(response?.status).toBe(201)
    expect(JSON.parse(storage.getItem(PERSIST_STORAGE_KEY)!)).toMatchObject({
      scenario: 'empty',
      categories: [{ id: 1, name: 'Ferrets' }],
      nextCategoryId: 2,
    })
  })

  it('starts from the seed when the saved state belongs to another scenario', async () => {
    const storage = new MemoryStorage()
    const empty = await load(storage)
    await empty.categories.create({ name: 'Ferrets' })

    const shop = await load(storage, { scenario: 'default' })
    expect((await shop.categories.list()).map((category) => category.name)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
    expect(JSON.parse(storage.getItem(PERSIST_STORAGE_KEY)!)).toMatchObject({ scenario: 'default', nextCategoryId: 6 })
  })

  it('goes back to the seed, in the store and in storage, on reset', async () => {
    const storage = new MemoryStorage()
    const first = await load(storage)
    await first.categories.create({ name: 'Ferrets' })
    await first.reset()

    const second = await load(storage)
    expect(await second.categories.list()).toEqual([])
    expect(await second.categories.create({ name: 'Owls' })).toEqual({ id: 1, name: 'Owls' })
  })

  it.each([
    ['text that is not JSON', '{"format":1,'],
    ['a state of another format', JSON.stringify({ format: 2, scenario: 'empty' })],
    ['a category without a name', JSON.stringify({ format: 1, scenario: 'empty', scenarioVersion: '1.0.0', categories: [{ id: 1 }], nextCategoryId: 2 })],
  ])('drops %s and starts from the seed', async (_name, text) => {
    const storage = new MemoryStorage()
    storage.setItem(PERSIST_STORAGE_KEY, text)
    const petstore = await load(storage)
    expect(await petstore.categories.list()).toEqual([])
    expect(JSON.parse(storage.getItem(PERSIST_STORAGE_KEY)!)).toMatchObject({ format: 1, scenario: 'empty', categories: [] })
  })

  it('still creates, and warns once, when the storage is full', async () => {
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined)
    const storage = new MemoryStorage()
    storage.setItem = () => {
      throw new DOMException('The quota has been exceeded.', 'QuotaExceededError')
    }
    const petstore = await load(storage)
    await petstore.categories.create({ name: 'Ferrets' })
    await petstore.categories.create({ name: 'Snakes' })
    expect(await petstore.categories.list()).toHaveLength(2)
    expect(warn).toHaveBeenCalledTimes(1)
    expect(String(warn.mock.calls[0]?.[0])).toMatch(/cannot persist.*QuotaExceededError/)
  })
})
