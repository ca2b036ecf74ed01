/**
 * A list read in pages from SQLite (`TenantStore.streamCategories`, what the server sends a list
 * from as its client takes it) shows one state of the tenant: every row of the moment it was
 * opened, nothing written after, whatever creates, resets, scenario switches, deletes and expiries
 * happen while it is read (attack8 B1, B2: the list is no longer held whole while it is sent).
 */
import type { FileHandle } from 'node:fs/promises'
import { describe, expect, it, onTestFinished, vi } from 'vitest'
import type { Category } from '../src/contract/schemas.js'
import type { CategoryPages, TenantState, TenantStorage, TenantStore } from '../src/storage/storage.js'
import { StorageUnavailableError } from '../src/storage/storage.js'
import { openSqliteStorage } from '../src/storage/sqlite-storage.js'
import { stateStoredBytes } from '../src/storage/stored-bytes.js'
import { fileHandleMethod } from './support/file-handles.js'
import { dataDir, STORES } from './support/stores.js'

const SQLITE = STORES.find((kind) => kind.name === 'sqlite')!
const SEED: TenantState = {
  scenario: 'default',
  categories: [
    { id: 1, name: 'Seed one' },
    { id: 2, name: 'Seed two', description: 'with "quotes" \\ and \u0001' },
  ],
  nextCategoryId: 3,
}
const OTHER: TenantState = {
  scenario: 'other',
  categories: [
    { id: 10, name: 'Other ten' },
    { id: 11, name: 'Other eleven' },
    { id: 12, name: 'Other twelve' },
  ],
  nextCategoryId: 13,
}
const TENANT = 'tenant-a'

/** Every page left, one category a page (a page holds at least one). */
function rest(pages: CategoryPages): Category[] {
  const read: Category[] = []
  for (;;) {
    const page = pages.next(1)
    read.push(...page)
    if (pages.done) return read
  }
}

/** A storage whose tenant holds the seed and `count` created categories (names that JSON escapes, and beyond the BMP). */
async function tenantWith(count: number): Promise<{ storage: TenantStorage; store: TenantStore; state: Category[] }> {
  const storage = await SQLITE.open(SEED)
  const store = storage.open(TENANT)
  for (let i = 0; i < count; i++) await store.createCategory({ name: `Created ${i} "é" \u{1F600}`, description: i % 2 === 0 ? `line\nbreak ${i}` : undefined })
  return { storage, store, state: await store.listCategories() }
}

describe('list pages on SQLite', () => {
  it('gives the whole list in creation order, a page bounded by characters, and is done after its last', async () => {
    const { store, state } = await tenantWith(6)
    const pages = await store.streamCategories!()
    const first = pages.next(1)
    expect(first).toHaveLength(1)
    expect(pages.done).toBe(false)
    expect([...first, ...rest(pages)]).toEqual(state)
    expect(pages.next(1)).toEqual([])
    const all = await store.streamCategories!()
    expect(all.next(1_000_000)).toEqual(state)
    expect(all.done).toBe(true)
  })

  it('leaves out the categories created after it was opened', async () => {
    const { store, state } = await tenantWith(4)
    const pages = await store.streamCategories!()
    const first = pages.next(1)
    await store.createCategory({ name: 'Written after' })
    await store.createCategory({ name: 'Written after too' })
    expect([...first, ...rest(pages)]).toEqual(state)
    expect((await store.listCategories()).map((category) => category.name).slice(-2)).toEqual(['Written after', 'Written after too'])
  })

  it.each([
    { what: 'a reset to the default seed', write: (store: TenantStore) => store.replace(SEED) },
    { what: 'a switch to another scenario', write: (store: TenantStore) => store.replace(OTHER) },
    { what: 'a delete of the tenant', write: async (_store: TenantStore, storage: TenantStorage) => void (await storage.delete(TENANT)) },
  ])('reads the state it was opened on through $what made while it is read, and a create after that', async ({ write }) => {
    const { storage, store, state } = await tenantWith(5)
    const pages = await store.streamCategories!()
    const first = pages.next(1)
    await write(store, storage)
    await store.createCategory({ name: 'After the write' })
    expect([...first, ...rest(pages)]).toEqual(state)
    // Opened now, the pages show the state now.
    const now = await store.streamCategories!()
    expect(rest(now)).toEqual(await store.listCategories())
  })

  it('reads the state it was opened on through an expiry of its tenant', async () => {
    const { storage, store, state } = await tenantWith(3)
    const pages = await store.streamCategories!()
    const first = pages.next(1)
    expect(await storage.expire(-1)).toEqual([TENANT])
    expect([...first, ...rest(pages)]).toEqual(state)
    expect(await store.listCategories()).toEqual(SEED.categories)
  })

  it('reads the whole state it was opened on when the tenant expires and the expiry’s fsync is slow (attack10 T1)', async () => {
    const dir = dataDir()
    const storage = await openSqliteStorage({ dir, seed: SEED })
    onTestFinished(() => storage.close())
    const store = storage.open(TENANT)
    for (let i = 0; i < 3; i++) await store.createCategory({ name: `Created ${i}` })
    const state = await store.listCategories()
    const pages = await store.streamCategories!()
    const first = pages.next(1)
    const { prototype, real } = await fileHandleMethod(dir, 'datasync')
    let unstall!: () => void
    const stall = new Promise<void>((resolve) => (unstall = resolve))
    let stalled = 0
    const spy = vi.spyOn(prototype, 'datasync').mockImplementation(async function (this: FileHandle) {
      stalled++
      await stall
      return real.call(this)
    })
    onTestFinished(() => {
      unstall()
      spy.mockRestore()
    })
    const expired = storage.expire(-1)
    await vi.waitFor(() => expect(stalled).toBeGreaterThan(0))
    // Between the expiry's commit and its fsync: before, the pages found no rows and ended, done, as a whole list.
    const read = [...first, ...rest(pages)]
    unstall()
    expect(await expired).toEqual([TENANT])
    expect(read).toEqual(state)
  })

  it('reads the default seed for a tenant that never wrote, whatever it writes meanwhile', async () => {
    const storage = await SQLITE.open(SEED)
    const store = storage.open('never-wrote')
    const pages = await store.streamCategories!()
    const first = pages.next(1)
    await store.createCategory({ name: 'First write' })
    expect([...first, ...rest(pages)]).toEqual(SEED.categories)
  })

  it('keeps one past state of a tenant for pages still reading it: a second reset ends the pages of the first state', async () => {
    const { store, state } = await tenantWith(3)
    const oldest = await store.streamCategories!()
    oldest.next(1)
    await store.replace(OTHER)
    const middle = await store.streamCategories!()
    await store.replace(SEED)
    // The first state is let go (its pages end with a storage error, never another state's rows); the second is kept.
    expect(() => oldest.next(1)).toThrow(StorageUnavailableError)
    // Never done: a list ended early must not end as a whole one.
    expect(oldest.done).toBe(false)
    expect(rest(middle)).toEqual(OTHER.categories)
    expect(state).toHaveLength(SEED.categories.length + 3)
  })

  it('keeps past states for slow readers only within the store budget, counted: past it, the newest such list is ended (attack9 S2)', async () => {
    const big: TenantState = {
      scenario: 'big',
      categories: Array.from({ length: 200 }, (_, i) => ({ id: i + 1, name: `Big ${i}`, description: 'd'.repeat(1000) })),
      nextCategoryId: 201,
    }
    const bytes = stateStoredBytes('t0', big)
    const budgetBytes = Math.round(3.5 * bytes)
    const storage = await openSqliteStorage({ dir: dataDir(), seed: SEED, budgetBytes })
    onTestFinished(() => storage.close())
    const readers: CategoryPages[] = []
    for (let t = 0; t < 6; t++) {
      const store = storage.open(`t${t}`)
      const stored = await store.replace(big).then(() => true, () => false)
      if (!stored) continue
      const pages = await store.streamCategories!()
      pages.next(1)
      readers.push(pages)
      // Back on the seed: the big state is now kept for its slow reader alone.
      await store.replace(SEED)
      expect(storage.storedBytes).toBeLessThanOrEqual(budgetBytes)
    }
    const readable = readers.filter((pages) => {
      try {
        pages.next(1)
        return true
      } catch (error) {
        expect(error).toBeInstanceOf(StorageUnavailableError)
        expect(pages.done).toBe(false)
        return false
      }
    })
    // Before: all six kept, about 6 times a state on disk against a budget of 3.5.
    expect(readable.length * bytes).toBeLessThanOrEqual(budgetBytes)
    expect(readable.length).toBeGreaterThan(0)
  })
})
