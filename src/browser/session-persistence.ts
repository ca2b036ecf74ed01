/**
 * `persist: true` for the browser runtime: the store's writable state (categories and the next
 * id) is written to sessionStorage after every write and read back when the page starts again
 * with the same scenario. The store's own rules decide everything else.
 */
import * as z from 'zod'
import { StoredCategory } from '../contract/schemas.js'
import type { StoreSnapshot } from '../storage/memory-store.js'
import { tenantOf, type Petstore } from '../library/petstore.js'
import { PERSIST_STORAGE_KEY } from './persist-key.js'


/** What is stored: the snapshot plus the scenario it belongs to. Bump `format` on any change. */
const SavedState = z.object({
  format: z.literal(1),
  scenario: z.string(),
  scenarioVersion: z.string(),
  categories: z.array(StoredCategory),
  nextCategoryId: z.int().min(1),
})
type SavedState = z.infer<typeof SavedState>

/** The subset of the Web Storage API used here, so tests can pass an in-memory stand-in. */
export type SessionStore = Pick<Storage, 'getItem' | 'setItem' | 'removeItem'>

/**
 * Restores the petstore from `storage` when the saved state belongs to the scenario it starts
 * with, then saves after every write. Settles when the restore is queued and saving is on.
 * @note The saved state is read before anything else runs, because the first seed would
 * otherwise overwrite it; saving starts only once the scenario is seeded for the same reason.
 */
export function persistInSession(petstore: Petstore, storage: SessionStore): Promise<void> {
  const saved = readSaved(storage)
  const tenant = tenantOf(petstore)
  let warned = false
  const save = (snapshot: StoreSnapshot): void => {
    const state: SavedState = {
      format: 1,
      scenario: tenant.scenario.name,
      scenarioVersion: tenant.scenario.version,
      categories: [...snapshot.categories],
      nextCategoryId: snapshot.nextCategoryId,
    }
    try {
      storage.setItem(PERSIST_STORAGE_KEY, JSON.stringify(state))
    } catch (error) {
      // A full or blocked storage must not fail the request that wrote; say so once.
      if (!warned) console.warn(`petstore-sandbox: cannot persist the petstore state (${String(error)}); it will not survive a reload.`)
      warned = true
    }
  }
  // @note Registered now, so this reaction runs before any request or API call waiting on the same
  // `ready`: the restore is queued in the store ahead of them.
  return petstore.ready.then(() => {
    const { store } = tenant
    store.onWrite = save
    const matches = saved?.scenario === tenant.scenario.name && saved.scenarioVersion === tenant.scenario.version
    if (saved && matches) {
      void store.restore({ categories: saved.categories, nextCategoryId: saved.nextCategoryId })
    } else {
      void store.snapshot().then(save)
    }
  })
}

/** The saved state, or undefined when there is none or it is not one this version wrote. */
function readSaved(storage: SessionStore): SavedState | undefined {
  let text: string | null
  try {
    text = storage.getItem(PERSIST_STORAGE_KEY)
  } catch {
    return undefined
  }
  if (text === null) return undefined
  try {
    const parsed = SavedState.safeParse(JSON.parse(text))
    if (parsed.success) return parsed.data
  } catch {
    // Not JSON: fall through and drop it.
  }
  storage.removeItem(PERSIST_STORAGE_KEY)
  return undefined
}
