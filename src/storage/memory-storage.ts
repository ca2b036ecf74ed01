/**
 * The in-memory {@link TenantStorage}: tenants live as long as the process. The server's
 * default without `--data-dir`.
 */
import { monotonicNow } from '../core/clock.js'
import { PetstoreStore } from './memory-store.js'
import type { StorageHealth, TenantState, TenantStorage, TenantSummary } from './storage.js'

/** Released stores are swept of collected ones once this many have piled up. */
const SWEEP_RELEASED_AT = 1024

export class MemoryStorage implements TenantStorage {
  readonly kind = 'memory'
  readonly durable = false
  #seed: TenantState
  /** Stores that hold writes, or that a caller holds open. */
  readonly #held = new Map<string, PetstoreStore>()
  /**
   * Stores released while on their seed: kept only as long as something else still refers to
   * them, so that a request already holding one and a later one for the same tenant share it.
   * @note Without this, a request in flight when its tenant was released would write to a store
   * no one could reach again: an acknowledged create lost.
   */
  readonly #released = new Map<string, WeakRef<PetstoreStore>>()
  /**
   * The seed each store was made or last reseeded on: not its default (`PetstoreStore`'s), which a save gives released
   * stores at once (adoptSeed), while this one is laid only when the store is next opened.
   */
  readonly #seedOf = new WeakMap<PetstoreStore, TenantState>()
  /** The stores of deleted tenants: a write still under way to one stays its own, never brought back (see open). */
  readonly #deleted = new WeakSet<PetstoreStore>()

  /** @param seed the state a tenant starts from (the server's scenario's seed) */
  constructor(seed: TenantState) {
    this.#seed = seed
  }

  open(id: string): PetstoreStore {
    let store = this.#held.get(id)
    const released = store === undefined ? this.#released.get(id)?.deref() : undefined
    // A released store made on an older seed takes the new one now, in its queue (unless it wrote meanwhile).
    if (released !== undefined && this.#seedOf.get(released) !== this.#seed) {
      this.#seedOf.set(released, this.#seed)
      void released.reseed(this.#seed).catch(() => undefined)
    }
    store ??= released
    if (!store) {
      const created = new PetstoreStore(this.#seed)
      this.#seedOf.set(created, this.#seed)
      // A write to a released store brings it back under the storage's hold; not one to a deleted store.
      // @note Brought back, a switch whose body came across the tenant's delete laid its state under the fresh tenant,
      // named `default` while it held the other scenario's categories (attack64 F1): the write is the deleted tenant's.
      created.onModified = () => {
        if (this.#held.get(id) === undefined && !this.#deleted.has(created)) {
          this.#held.set(id, created)
          this.#released.delete(id)
        }
      }
      store = created
    }
    this.#released.delete(id)
    this.#held.set(id, store)
    return store
  }

  release(id: string): void {
    const store = this.#held.get(id)
    if (!store || store.modified) return
    this.#held.delete(id)
    this.#released.set(id, new WeakRef(store))
    if (this.#released.size >= SWEEP_RELEASED_AT) {
      for (const [key, ref] of this.#released) if (ref.deref() === undefined) this.#released.delete(key)
    }
  }

  has(id: string): Promise<boolean> {
    return Promise.resolve(this.#held.get(id)?.modified ?? false)
  }

  list(): Promise<TenantSummary[]> {
    const summaries = [...this.#held].flatMap(([id, store]) =>
      store.modified ? [{ id, scenario: store.scenarioName, categories: store.categoryCount, updatedAt: store.updatedAt }] : [],
    )
    return Promise.resolve(summaries)
  }

  delete(id: string): Promise<boolean> {
    const store = this.#held.get(id) ?? this.#released.get(id)?.deref()
    if (store !== undefined) this.#deleted.add(store)
    this.#held.delete(id)
    this.#released.delete(id)
    return Promise.resolve(store?.modified ?? false)
  }

  touch(id: string): Promise<void> {
    this.#held.get(id)?.touch()
    return Promise.resolve()
  }

  expire(idleMs: number): Promise<string[]> {
    // @note Monotonic: a clock stepped forward must not make every tenant look idle.
    const before = monotonicNow() - idleMs
    const expired = [...this.#held].filter(([, store]) => store.usedAt < before).map(([id]) => id)
    for (const id of expired) this.#held.delete(id)
    return Promise.resolve(expired)
  }

  setSeed(seed: TenantState, later?: ReadonlySet<string>): void {
    this.#seed = seed
    // Stores on the old seed take the new one in their write queue: one that wrote first keeps its writes.
    // @note Held stores only (writers, and tenants with a request under way); released ones when next opened: each
    // reseeded at once built the new seed, however many there were (attack47 F1). Those `later` names too (tenants with
    // a request under way: they leave once it ends), taking it as their default meanwhile (review43 R5, review44 F3).
    for (const [id, store] of this.#held) {
      if (later?.has(id)) {
        store.adoptSeed(seed)
        continue
      }
      this.#seedOf.set(store, seed)
      void store.reseed(seed).catch(() => undefined)
    }
    // Released ones (a request of theirs may still be under way) take it as their default now, laid when next opened:
    // a reset onto the new version meanwhile is then on its seed, not a write (attack53 F1).
    for (const ref of this.#released.values()) ref.deref()?.adoptSeed(seed)
  }

  health(): Promise<StorageHealth> {
    return Promise.resolve({ ok: true })
  }

  close(): Promise<void> {
    this.#held.clear()
    this.#released.clear()
    return Promise.resolve()
  }
}
