/**
 * The in-memory {@link TenantStorage}: tenants live as long as the process. The server's
 * default without `--data-dir`.
 */
import { PetstoreStore } from './store.js'
import type { StorageHealth, TenantState, TenantStorage, TenantSummary } from './storage.js'

export class MemoryStorage implements TenantStorage {
  readonly kind = 'memory'
  readonly durable = false
  readonly #seed: TenantState
  readonly #stores = new Map<string, PetstoreStore>()

  /** @param seed the state a tenant starts from (the server's scenario's seed) */
  constructor(seed: TenantState) {
    this.#seed = seed
  }

  open(id: string): PetstoreStore {
    let store = this.#stores.get(id)
    if (!store) {
      store = new PetstoreStore(this.#seed)
      this.#stores.set(id, store)
    }
    return store
  }

  has(id: string): Promise<boolean> {
    return Promise.resolve(this.#stores.get(id)?.modified ?? false)
  }

  list(): Promise<TenantSummary[]> {
    const summaries = [...this.#stores].flatMap(([id, store]) =>
      store.modified ? [{ id, scenario: store.scenarioName, categories: store.categoryCount, updatedAt: store.updatedAt }] : [],
    )
    return Promise.resolve(summaries)
  }

  delete(id: string): Promise<boolean> {
    const store = this.#stores.get(id)
    this.#stores.delete(id)
    return Promise.resolve(store?.modified ?? false)
  }

  touch(id: string): Promise<void> {
    this.#stores.get(id)?.touch()
    return Promise.resolve()
  }

  expire(before: number): Promise<string[]> {
    const expired = [...this.#stores].filter(([, store]) => store.updatedAt < before).map(([id]) => id)
    for (const id of expired) this.#stores.delete(id)
    return Promise.resolve(expired)
  }

  health(): Promise<StorageHealth> {
    return Promise.resolve({ ok: true })
  }

  close(): Promise<void> {
    this.#stores.clear()
    return Promise.resolve()
  }
}
