/**
 * The standalone server's tenants: one isolated {@link Tenant} per accepted API key, admitted on
 * its first request (API or admin) and kept in memory up to a cap. Tenants are named by a hash
 * of their key, so that ids can be listed, logged and passed around without exposing the key.
 *
 * Eviction (to stay under the cap) never loses a partner's data: with a durable storage any
 * tenant may leave memory, since its state comes back from disk; in memory only, only tenants
 * still on the default seed may (they come back identical). When none may leave, the new
 * tenant is refused with 503 `tenant_capacity` and `Retry-After`.
 */
import type { HeldBytesMeter } from '../core/heap-weight.js'
import { createHash } from 'node:crypto'
import { constantTimeEqual, KeyRing } from '../core/auth.js'
import { RequestJournal } from '../core/journal.js'
import type { TenantStorage } from '../core/storage.js'
import { Tenant, TenantRefusedError, type TenantOverrides } from '../core/tenant.js'
import type { TenantResolver } from '../pipeline/pipeline.js'
import type { Scenario } from '../scenario/scenario-format.js'

/** The key accepted when none is configured: documented, printed at start, never secret. */
export const DEV_API_KEY = 'sandbox-dev-key'

/** @default 1000 tenants kept in memory */
export const DEFAULT_MAX_TENANTS = 1000

/** How many hex digits of a tenant id are shown where a short form is enough (logs, the demo page). */
export const DISPLAY_ID_LENGTH = 12

/** How long a client refused for capacity is told to wait. */
const CAPACITY_RETRY_SECONDS = 30

/** Options of {@link TenantRegistry}. */
export interface TenantRegistryOptions {
  /** The scenario new tenants are seeded from. */
  readonly scenario: Scenario
  /** Accepted keys, or `'any'` for every non-empty key (each its own tenant). */
  readonly keys: readonly string[] | 'any'
  /** The admin token: never accepted as an API key. */
  readonly adminToken?: string | undefined
  /** At most this many tenants are kept in memory. */
  readonly maxTenants: number
  readonly overrides: TenantOverrides
  /** Where tenants' state lives (its default seed is `scenario`'s). */
  readonly storage: TenantStorage
  /** A scenario by name, for tenants whose saved state names one. */
  readonly scenarioNamed?: ((name: string) => Scenario | undefined) | undefined
  /** Told about tenants whose saved scenario no longer exists. @default none */
  readonly warn?: ((message: string) => void) | undefined
  /** Throws when there is no room for a new tenant (the memory budget). @default always room */
  readonly admit?: ((work: 'grow') => void) | undefined
  /**
   * In memory only: when no tenant on its seed can make room, the least recently used tenant
   * unused for this long is evicted even though its writes are then gone, so that keys which
   * wrote once and left cannot keep new partners out for good. 0: never (new keys wait instead).
   * @default 60 minutes
   */
  readonly evictIdleMs?: number | undefined
}

/** @default 60 minutes */
export const DEFAULT_EVICT_IDLE_MS = 60 * 60 * 1000

/**
 * The id of the tenant a key opens: the first 128 bits of its SHA-256, as 32 hex digits.
 * @example tenantId('sandbox-dev-key') // a 32-character hex string
 */
export function tenantId(key: string): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 32)
}

/** The short form of a tenant id shown in logs: its first {@link DISPLAY_ID_LENGTH} hex digits. */
export function displayId(id: string): string {
  return id.slice(0, DISPLAY_ID_LENGTH)
}

/** What `GET /__sandbox/tenants` shows about one tenant. */
export interface TenantListing {
  readonly id: string
  readonly scenario: string
  readonly categories: number
  readonly journalSize: number
  /** Whether it is in memory now (else only on disk). */
  readonly live: boolean
}

const encoder = new TextEncoder()

interface Entry {
  tenant: Tenant | undefined
  readonly opening: Promise<Tenant>
  /** When the storage last heard the tenant was used (ms since the epoch). */
  touched: number
  /** When it was last used (ms since the epoch). */
  usedAt: number
}

/** How often a tenant in use tells the storage so (idle expiry needs no finer grain). */
const TOUCH_INTERVAL_MS = 60 * 60 * 1000

/**
 * Keys whose tenant id is remembered with `anyKey` (configured keys are always remembered); past
 * it the memory starts over. Bounds what a flood of one-off keys can make it hold.
 */
const REMEMBERED_IDS = 4096

export class TenantRegistry implements TenantResolver {
  readonly #options: TenantRegistryOptions
  readonly #keys: KeyRing
  readonly #adminToken: Uint8Array | undefined
  /** Ids of the configured keys, so the admin token can name tenants before their first request. */
  readonly #configuredIds: ReadonlySet<string>
  /** @note A Map iterates in insertion order: re-inserting on use makes its first entry the LRU. */
  readonly #tenants = new Map<string, Entry>()
  /** The entry last moved to the end of {@link #tenants} (the most recently used, unless removed since). */
  #lastUsed: Entry | undefined
  /** What the live tenants hold together: kept current by their stores and journals, not summed per request. */
  #heldBytes = 0
  readonly #meter: HeldBytesMeter = { add: (delta) => void (this.#heldBytes += delta) }
  #evictions = 0
  /**
   * The tenant id of each accepted key seen, so that a request does not hash its key again.
   * @note Filled only after the key was accepted by the constant-time comparison, so a lookup
   * here says nothing about keys that are not accepted.
   */
  #ids = new Map<string, string>()
  /** The id of each live tenant, for the request log. */
  readonly #idOfTenant = new WeakMap<Tenant, string>()

  constructor(options: TenantRegistryOptions) {
    this.#options = options
    this.#keys = new KeyRing(options.keys)
    this.#adminToken = options.adminToken === undefined ? undefined : encoder.encode(options.adminToken)
    const configured = options.keys === 'any' ? [] : options.keys.map((key) => [key, tenantId(key)] as const)
    this.#configuredIds = new Set(configured.map(([, id]) => id))
    this.#ids = new Map(configured)
  }

  /** The tenant of an accepted key, admitted on first use; undefined when the key is not accepted. */
  resolve(token: string): Tenant | undefined | Promise<Tenant | undefined> {
    const id = this.idOfKey(token)
    if (id === undefined) return undefined
    const entry = this.#tenants.get(id)
    // The common case, a live tenant whose scenario no other process changes: no promise to wait for.
    if (entry?.tenant !== undefined && !this.#options.storage.shared) {
      this.#used(id, entry)
      return entry.tenant
    }
    return this.open(id)
  }

  /**
   * The tenant id of an accepted API key ({@link tenantId}, hashed once per key and remembered),
   * or undefined when the key is not accepted.
   */
  idOfKey(token: string): string | undefined {
    if (!this.accepts(token)) return undefined
    let id = this.#ids.get(token)
    if (id === undefined) {
      id = tenantId(token)
      if (this.#options.keys === 'any' && this.#ids.size >= REMEMBERED_IDS) this.#ids = new Map()
      this.#ids.set(token, id)
    }
    return id
  }

  /** The id of a tenant this registry opened (the request log names it), or undefined. */
  idOf(tenant: Tenant): string | undefined {
    return this.#idOfTenant.get(tenant)
  }

  /** Whether `token` is an accepted API key (the admin token never is). */
  accepts(token: string): boolean {
    return !this.isAdminToken(token) && this.#keys.accepts(token)
  }

  /** Whether `token` is the admin token, compared in constant time. */
  isAdminToken(token: string): boolean {
    return this.#adminToken !== undefined && constantTimeEqual(encoder.encode(token), this.#adminToken) === 1
  }

  /**
   * The tenant with this id, admitted when needed. Rejects with {@link TenantRefusedError} when
   * the registry is full and nothing may be evicted.
   */
  open(id: string): Promise<Tenant> {
    const entry = this.#tenants.get(id)
    if (entry) {
      this.#used(id, entry)
      const tenant = entry.tenant
      // Another replica may have switched the tenant's scenario since: read it back.
      if (tenant && this.#options.storage.shared) return tenant.store.scenario().then((name) => (tenant.follow(this.#scenarioOf(id, name)), tenant))
      return entry.opening
    }
    return this.#admit(id)
  }

  /** Marks a tenant used now: last in the LRU order, and the storage told now and then. */
  #used(id: string, entry: Entry): void {
    // @note Most requests come from the tenant used last: it is already last in the order.
    if (this.#lastUsed !== entry) {
      this.#tenants.delete(id)
      this.#tenants.set(id, entry)
      this.#lastUsed = entry
    }
    const now = Date.now()
    entry.usedAt = now
    if (now - entry.touched >= TOUCH_INTERVAL_MS) {
      entry.touched = now
      this.#options.storage.touch(id).catch(() => undefined)
    }
  }

  /**
   * The full id a caller of the admin API means: a full id, or a prefix of at least
   * {@link DISPLAY_ID_LENGTH} digits matching one known tenant only. Undefined when none or several match.
   */
  async lookup(idOrPrefix: string): Promise<string | undefined> {
    if (!/^[0-9a-f]+$/.test(idOrPrefix) || idOrPrefix.length < DISPLAY_ID_LENGTH) return undefined
    if (this.#tenants.has(idOrPrefix) || this.#configuredIds.has(idOrPrefix) || (await this.#options.storage.has(idOrPrefix))) return idOrPrefix
    const known = new Set([...this.#tenants.keys(), ...this.#configuredIds, ...(await this.#options.storage.list()).map((summary) => summary.id)])
    const matches = [...known].filter((id) => id.startsWith(idOrPrefix))
    return matches.length === 1 ? matches[0] : undefined
  }

  /** Live tenants, configured keys' tenants and stored tenants, least recently used live ones first. */
  async list(): Promise<TenantListing[]> {
    const listing = new Map<string, TenantListing>()
    // @note With a shared storage the list is the storage's alone, so every replica shows the same.
    for (const [id, entry] of this.#options.storage.shared ? [] : this.#tenants) {
      const tenant = entry.tenant
      if (!tenant) continue
      listing.set(id, { id, scenario: tenant.scenario.name, categories: await tenant.store.countCategories(), journalSize: await tenant.journal.count(), live: true })
    }
    for (const summary of await this.#options.storage.list()) {
      if (listing.has(summary.id)) continue
      const live = this.#tenants.get(summary.id)?.tenant
      const journalSize = live ? await live.journal.count() : 0
      listing.set(summary.id, { id: summary.id, scenario: summary.scenario, categories: summary.categories, journalSize, live: live !== undefined })
    }
    for (const id of this.#configuredIds) {
      if (!listing.has(id)) {
        listing.set(id, { id, scenario: this.scenario.name, categories: this.#seedSize(), journalSize: 0, live: false })
      }
    }
    return [...listing.values()]
  }

  /** Forgets a tenant: out of memory and out of storage. True when it existed anywhere. */
  async delete(id: string): Promise<boolean> {
    const live = this.#remove(id)
    const stored = await this.#options.storage.delete(id)
    return live || stored
  }

  /** Forgets every tenant that has not been used (read or written) for `ttlMs`; returns how many. */
  async expireIdle(ttlMs: number): Promise<number> {
    const expired = await this.#options.storage.expire(ttlMs)
    for (const id of expired) this.#remove(id)
    return expired.length
  }

  /** The tenants in memory now, least recently used first. */
  *live(): IterableIterator<[string, Tenant]> {
    for (const [id, entry] of this.#tenants) if (entry.tenant) yield [id, entry.tenant]
  }

  /** The scenario new tenants start from. */
  get scenario(): Scenario {
    return this.#options.scenario
  }


  get storage(): TenantStorage {
    return this.#options.storage
  }

  /** How many tenants are in memory. */
  get size(): number {
    return this.#tenants.size
  }

  /**
   * What the live tenants hold on the heap together, estimated (see {@link Tenant.heldBytes}).
   * @note Kept current by a meter every live tenant's store and journal report to: summed over
   * every tenant on each request (the memory budget asks on every write), a thousand live
   * tenants made a create cost 65% more.
   */
  heldBytes(): number {
    return this.#heldBytes
  }

  /**
   * Evicts tenants that lose nothing by leaving (with a durable storage, any; in memory, those
   * still on their seed), least recently used first, until the live tenants hold at most `bytes`;
   * none when dropping all of them would not be enough. A tenant with a request under way stays
   * (its journal entry is still to come), and so does the tenant used last. Returns how many left.
   * @note A tenant that only read loses its journal with it, as at the tenant cap.
   */
  relieve(bytes: number): number {
    // Unlike at the tenant cap, where a new partner would be turned away, a busy tenant stays.
    const droppable = (entry: Entry): entry is Entry & { tenant: Tenant } =>
      entry !== this.#lastUsed && this.#leavesWithoutLoss(entry) && !entry.tenant.busy
    let room = 0
    for (const entry of this.#tenants.values()) if (droppable(entry)) room += entry.tenant.heldBytes
    if (this.#heldBytes - room > bytes) return 0
    let evicted = 0
    for (const [id, entry] of this.#tenants) {
      if (this.#heldBytes <= bytes) break
      if (!droppable(entry)) continue
      this.#evict(id, false)
      evicted++
    }
    return evicted
  }

  /** How many tenants were evicted from memory to stay under the cap or the memory budget since start. */
  get evictions(): number {
    return this.#evictions
  }

  /**
   * The one place a tenant enters memory: room is made (or the tenant refused), then its store
   * is opened and its scenario read back.
   */
  #admit(id: string): Promise<Tenant> {
    this.#options.admit?.('grow')
    this.#makeRoom()
    const { storage, overrides } = this.#options
    const store = storage.open(id)
    storage.touch(id).catch(() => undefined)
    const entry: Entry = {
      touched: Date.now(),
      usedAt: Date.now(),
      tenant: undefined,
      opening: store.scenario().then((name) => {
        const journal = storage.journal?.(id, overrides.journalLimit) ?? new RequestJournal(overrides.journalLimit, overrides.journalBytes)
        const tenant = new Tenant(this.#scenarioOf(id, name), overrides, store, journal)
        this.#idOfTenant.set(tenant, id)
        entry.tenant = tenant
        // An entry removed while it opened (deleted, expired) never counts.
        if (this.#tenants.get(id) === entry) this.#count(tenant)
        return tenant
      }),
    }
    // A failed open (storage unavailable) must not stay cached: the next request tries again.
    entry.opening.catch(() => {
      if (this.#tenants.get(id) === entry) this.#remove(id)
    })
    this.#tenants.set(id, entry)
    this.#lastUsed = entry
    return entry.opening
  }

  /** The scenario a stored scenario name means: that one, or the server's when it is not known (the operator is told). */
  #scenarioOf(id: string, name: string): Scenario {
    const scenario = this.#options.scenario
    if (name === scenario.name) return scenario
    const named = this.#options.scenarioNamed?.(name)
    if (named) return named
    this.#options.warn?.(`tenant ${displayId(id)}: its saved scenario "${name}" is not known; pets and orders come from "${scenario.name}"`)
    return scenario
  }

  /**
   * Evicts until there is room for one more tenant; throws {@link TenantRefusedError} when nothing
   * may leave. First any tenant that loses nothing by leaving ({@link #leavesWithoutLoss}), least
   * recently used first; then, in memory, the least recently used tenant idle for `evictIdleMs`
   * (its writes go with it).
   */
  #makeRoom(): void {
    const { maxTenants } = this.#options
    if (this.#tenants.size < maxTenants) return
    for (const [id, entry] of this.#tenants) {
      if (this.#tenants.size < maxTenants) return
      if (this.#leavesWithoutLoss(entry)) this.#evict(id, false)
    }
    const idleMs = this.#options.evictIdleMs ?? DEFAULT_EVICT_IDLE_MS
    const now = Date.now()
    let retryAfterMs = Number.POSITIVE_INFINITY
    for (const [id, entry] of this.#tenants) {
      if (this.#tenants.size < maxTenants) return
      if (!entry.tenant) continue
      const idle = now - entry.usedAt
      if (idleMs > 0 && idle >= idleMs) this.#evict(id, true)
      else retryAfterMs = Math.min(retryAfterMs, idleMs - idle)
    }
    if (this.#tenants.size >= maxTenants) {
      // When the least idle wait ends, a tenant can leave; without idle eviction, a short default.
      const retryAfter = idleMs > 0 && Number.isFinite(retryAfterMs) ? Math.max(1, Math.ceil(retryAfterMs / 1000)) : CAPACITY_RETRY_SECONDS
      throw new TenantRefusedError('tenant_capacity', { limit: maxTenants }, retryAfter)
    }
  }

  /**
   * Whether a live tenant can leave memory without losing its data: with a durable storage any,
   * in memory one still on its seed (a request under way keeps its store, not its journal entry).
   */
  #leavesWithoutLoss(entry: Entry): entry is Entry & { tenant: Tenant } {
    const tenant = entry.tenant
    return tenant !== undefined && (this.#options.storage.durable || !tenant.store.modified)
  }

  /** Drops a tenant from memory; with `forget`, an in-memory storage forgets its writes too. */
  #evict(id: string, forget: boolean): void {
    const { storage } = this.#options
    this.#remove(id)
    if (forget && !storage.durable) void storage.delete(id).catch(() => undefined)
    else storage.release(id)
    this.#evictions++
  }

  /** Takes a tenant out of memory: out of the map, and out of {@link heldBytes}. True when it was there. */
  #remove(id: string): boolean {
    const entry = this.#tenants.get(id)
    if (entry === undefined) return false
    this.#tenants.delete(id)
    if (entry.tenant) this.#uncount(entry.tenant)
    return true
  }

  /** Counts a live tenant in {@link heldBytes}: what it holds now, then every change its store and journal report. */
  #count(tenant: Tenant): void {
    this.#heldBytes += tenant.heldBytes
    tenant.store.meter = this.#meter
    tenant.journal.meter = this.#meter
  }

  #uncount(tenant: Tenant): void {
    if (tenant.store.meter === this.#meter) tenant.store.meter = undefined
    if (tenant.journal.meter === this.#meter) tenant.journal.meter = undefined
    this.#heldBytes -= tenant.heldBytes
  }

  #seedSize(): number {
    const { categories } = this.#options.scenario.seed
    return 'generate' in categories ? categories.generate.count : categories.length
  }
}
