/**
 * The standalone server's tenants: one isolated {@link Tenant} per accepted API key, admitted on
 * its first request (API or admin) and kept in memory up to a cap. Tenants are named by a hash
 * of their key, so that ids can be listed, logged and passed around without exposing the key.
 *
 * Eviction (to stay under the cap) never loses a partner's data: with a durable storage any
 * tenant may leave memory, since its state comes back from disk; in memory only, only tenants
 * still on the default seed may (they come back identical).
 *
 * A tenant with a request under way (from the moment a request is routed to it until its answer
 * is written) never leaves: eviction cannot interleave with a request's use of the tenant, so an
 * answer never acknowledges a write to a tenant that is gone. A new key that finds every tenant
 * busy waits (up to {@link DEFAULT_ADMISSION_WAIT_MS}, in arrival order) for one that can leave
 * to finish, and new requests of that tenant wait behind it, so that a steady stream of requests
 * cannot keep it busy for good. When no tenant could leave even once its requests end, the new
 * key is refused at once with 503 `tenant_capacity` and `Retry-After`; after waiting in vain, too.
 */
import type { HeldBytesMeter } from '../core/heap-weight.js'
import { createHash } from 'node:crypto'
import { constantTimeEqual, KeyRing } from '../core/auth.js'
import { monotonicNow } from '../core/clock.js'
import { RequestJournal } from '../core/journal.js'
import { AnswerBook } from '../core/planned-answers.js'
import { seedState, type TenantStorage, type TenantStore } from '../storage/storage.js'
import { scenarioHeldBytes } from '../storage/memory-store.js'
import { Tenant, TenantRefusedError, type TenantOverrides } from '../storage/tenant.js'
import type { TenantResolver } from '../pipeline/pipeline.js'
import type { Scenario } from '../contract/scenario-format.js'

/** The key accepted when none is configured: documented, printed at start, never secret. */
export const DEV_API_KEY = 'sandbox-dev-key'

/** @default 1000 tenants kept in memory */
export const DEFAULT_MAX_TENANTS = 1000

/** How many hex digits of a tenant id are shown where a short form is enough (logs, the demo page). */
export const DISPLAY_ID_LENGTH = 12

/** How long a client refused for capacity is told to wait. */
const CAPACITY_RETRY_SECONDS = 30

/**
 * How long a new key waits for a busy tenant to finish its requests and leave, at the cap.
 * @default 10 s
 */
export const DEFAULT_ADMISSION_WAIT_MS = 10_000

/** What a new key refused after waiting in vain is told to wait: tenants are busy now, not full for an hour. */
const BUSY_RETRY_SECONDS = 5

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
  readonly admit?: ((work: 'grow', growth: number) => void) | undefined
  /**
   * In memory only: when no tenant on its seed can make room, the least recently used tenant
   * unused for this long is evicted even though its writes are then gone, so that keys which
   * wrote once and left cannot keep new partners out for good. 0: never (new keys wait instead).
   * @default 60 minutes
   */
  readonly evictIdleMs?: number | undefined
  /** How long a new key waits at the cap for a busy tenant to leave. @default {@link DEFAULT_ADMISSION_WAIT_MS} */
  readonly admissionWaitMs?: number | undefined
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
  /** Its store, opened before the tenant exists. */
  readonly store: TenantStore
  /** When the storage last heard the tenant was used ({@link monotonicNow}). */
  touched: number
  /** When it was last used: a request routed to it, or its last request's end ({@link monotonicNow}). */
  usedAt: number
  /** Requests routed to it while it opens: they enter the tenant once it exists. */
  claims: number
  /** Chosen to leave for a waiting key once its requests end: new requests wait instead of keeping it busy. */
  draining: boolean
  /**
   * On an older version of the start seed (a --watch save came while it was busy or opening): leaves once idle, if it
   * still may without loss, or takes the new seed where it stands, admitted, at its next request ({@link #refresh}).
   */
  stale: boolean
}

/** A request for a tenant not in memory, waiting for room. */
interface Waiter {
  readonly id: string
  readonly resolve: (tenant: Promise<Tenant>) => void
  readonly reject: (error: unknown) => void
  readonly timer: NodeJS.Timeout
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
  /** The start scenario, in its latest version ({@link reload}). */
  #scenario: Scenario
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
  /**
   * In memory, the seeds of the tenants entering (their stores building it), counted until they are, and the growth of
   * switches and resets under way ({@link pledge}): in {@link heldBytes} from the moment each is admitted.
   * @note Counted only once opened, 60 new keys at once on a start seed of 100,000 categories were each admitted
   * against a budget none of the others had reached yet: 1.1 GB, every request timed out.
   */
  #enteringBytes = 0
  /** The meters a pledge lends a tenant's store while it builds ({@link pledge}): counted as {@link #meter} is. */
  readonly #pledgeMeters = new WeakSet<HeldBytesMeter>()
  #evictions = 0
  /** Requests for tenants not in memory waiting for room, in arrival order. */
  readonly #waiters: Waiter[] = []
  #serving = false
  /**
   * The tenant id of each accepted key seen, so that a request does not hash its key again.
   * @note Filled only after the key was accepted by the constant-time comparison, so a lookup
   * here says nothing about keys that are not accepted.
   */
  #ids = new Map<string, string>()
  /** The id of each live tenant, for the request log. */
  readonly #idOfTenant = new WeakMap<Tenant, string>()
  /**
   * Planned answers of tenants whose storage does not keep them (memory, SQLite), by tenant id:
   * kept here, not with the tenant, so that a tenant leaving memory keeps its plans. Bounded by
   * the book's own cap, not counted in {@link heldBytes}: plans never refuse anyone's writes.
   */
  readonly #answers = new AnswerBook()

  constructor(options: TenantRegistryOptions) {
    this.#options = options
    this.#scenario = options.scenario
    this.#keys = new KeyRing(options.keys)
    this.#adminToken = options.adminToken === undefined ? undefined : encoder.encode(options.adminToken)
    const configured = options.keys === 'any' ? [] : options.keys.map((key) => [key, tenantId(key)] as const)
    this.#configuredIds = new Set(configured.map(([, id]) => id))
    this.#ids = new Map(configured)
  }

  /**
   * The tenant of an accepted key, admitted on first use; undefined when the key is not accepted.
   * The tenant comes {@link Tenant.enter | entered} for the caller, who calls `leave()` once its answer is written.
   */
  resolve(token: string): Tenant | undefined | Promise<Tenant | undefined> {
    const id = this.idOfKey(token)
    if (id === undefined) return undefined
    const entry = this.#tenants.get(id)
    // The common case, a live tenant whose scenario no other process changes: no promise to wait for.
    if (entry?.tenant !== undefined && !entry.draining && !this.#options.storage.shared) {
      if (entry.stale) this.#refresh(entry.tenant, entry)
      this.#used(id, entry)
      entry.tenant.enter()
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
   * The tenant with this id, admitted when needed, {@link Tenant.enter | entered} for the caller
   * (who calls `leave()` once its answer is written). Rejects with {@link TenantRefusedError}
   * when the registry is full and no tenant can leave in time.
   */
  open(id: string): Promise<Tenant> {
    const entry = this.#tenants.get(id)
    if (entry && !entry.draining) return this.#claim(id, entry)
    return this.#admit(id)
  }

  /**
   * A stale tenant's next request: unless it wrote meanwhile, its store takes the new seed where it stands, admitted by
   * the memory budget as a new key's ({@link TenantRegistryOptions.admit}; where it does not fit, it stays stale and on
   * its old version, whole), in its queue: its requests under way read the old seed, this one and later ones the new.
   * Never throws.
   * @note Left on the old seed until its requests ended, a partner whose requests always overlapped (a poller, a
   * scenario's latency) was served the old seed's categories beside the new version's pets and orders for good (review45
   * F3). Made to wait for them instead, a waiter refused admission threw where nothing caught it (the process exited), a
   * request under way past the wait kept every later one waiting it, and at the tenant cap a newcomer took the slot
   * (review46 F1-F4).
   */
  #refresh(tenant: Tenant, entry: Entry): void {
    const { store } = tenant
    if (!store.modified && store.reseed !== undefined) {
      // Signed: a save that makes the seed smaller gives memory back, as a switch to a smaller state does (review47 F2).
      const growth = (store.heldBytesFor?.(this.#scenario) ?? 0) - store.heldBytes
      // @note Where it does not fit, the old seed serves on, whole (its own version's pets and orders), tried again at the
      // next request: refused, a partner busy at the save could not even switch or reset to a smaller state, which
      // gives memory back (attack58 F1).
      if (this.#options.admit !== undefined) {
        try {
          this.#options.admit('grow', growth)
        } catch {
          return
        }
      }
      const release = this.pledge(Math.max(0, growth), tenant)
      // @note In use until it is built: left to a request that read nothing, the tenant was idle, then dropped to make
      // room mid-build and uncounted, and every stale tenant's build ran at once past the budget (review47 F1: 12 of
      // 9.4 MB under 28 MB).
      tenant.enter()
      const built = () => {
        release()
        tenant.leave()
      }
      store.reseed(seedState(this.#scenario)).then(built, built)
    }
    entry.stale = false
    if (tenant.scenario.name === this.#scenario.name) tenant.follow(this.#scenario)
  }

  /** Routes a request to a tenant in memory (or opening): it is marked in use at once. */
  #claim(id: string, entry: Entry): Promise<Tenant> {
    this.#used(id, entry)
    const tenant = entry.tenant
    const shared = this.#options.storage.shared
    if (tenant !== undefined && entry.stale) this.#refresh(tenant, entry)
    if (tenant === undefined) {
      entry.claims++
      // @note Shared: the opening's read was sent before this request arrived, so it may miss a
      // scenario switch or a plan acknowledged before the request was sent: it reads its own.
      if (shared) return entry.opening.then((opened) => this.#readBack(id, opened))
      // @note A request that came after a --watch save while the tenant opened takes the new seed too: served the old
      // one's categories beside the new version's pets and orders, one state answer mixed the two (review47 F3).
      if (!entry.stale) return entry.opening
      return entry.opening.then((opened) => {
        if (entry.stale && this.#tenants.get(id) === entry) this.#refresh(opened, entry)
        return opened
      })
    }
    tenant.enter()
    if (!shared) return Promise.resolve(tenant)
    return this.#readBack(id, tenant)
  }

  /**
   * Another replica may have switched the tenant's scenario (or planned answers) since: read it
   * back, for a request routed to `tenant` (entered for it, and left when the read fails).
   */
  #readBack(id: string, tenant: Tenant): Promise<Tenant> {
    return tenant.store.scenario().then(
      (name) => (tenant.follow(this.#scenarioOf(id, name)), tenant),
      (error: unknown) => {
        tenant.leave()
        throw error
      },
    )
  }

  /** How many requests wait for room for their tenant (at the cap, every tenant busy). */
  get waiting(): number {
    return this.#waiters.length
  }

  /** Marks a tenant used now: last in the LRU order, and the storage told now and then. */
  #used(id: string, entry: Entry): void {
    // @note Most requests come from the tenant used last: it is already last in the order.
    if (this.#lastUsed !== entry) {
      this.#tenants.delete(id)
      this.#tenants.set(id, entry)
      this.#lastUsed = entry
    }
    const now = monotonicNow()
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
    const stored = await this.#options.storage.delete(id)
    // @note Once the delete is durable: one answered 503 leaves the tenant whole, its journal and plans too (attack6 S1, attack8 A2).
    const live = this.#remove(id)
    this.#serveWaiters()
    const planned = this.#answers.drop(id)
    return live || stored || planned
  }

  /** Forgets every tenant that has not been used (read or written) for `ttlMs`; returns how many. */
  async expireIdle(ttlMs: number): Promise<number> {
    const expired = await this.#options.storage.expire(ttlMs)
    for (const id of expired) {
      this.#remove(id)
      this.#answers.drop(id)
    }
    this.#serveWaiters()
    return expired.length
  }

  /** The tenants in memory now, least recently used first. */
  *live(): IterableIterator<[string, Tenant]> {
    for (const [id, entry] of this.#tenants) if (entry.tenant) yield [id, entry.tenant]
  }

  /** The scenario new tenants start from. */
  get scenario(): Scenario {
    return this.#scenario
  }

  /**
   * Takes up a new version of a scenario (its file was reloaded; same name). Tenants on it take
   * its pets, orders, faults and latency at once; their categories are the storage's: for the
   * start scenario, tenants that never wrote (or were reset since) get the new seed, and tenants
   * holding writes keep them until their next reset, which seeds the new version.
   */
  reload(scenario: Scenario): void {
    // A tenant still opening reads its scenario once opened (#scenarioOf). Those leaving memory below take the new
    // version too: a request of theirs under way (a reset reading its body) goes on with it (attack53 F1). A stale one
    // (below) keeps the old one with the old seed until it takes the new seed (#refresh), or leaves.
    const stale = this.#staleAt(scenario)
    for (const entry of this.#tenants.values()) if (entry.tenant?.scenario.name === scenario.name && !stale.has(entry)) entry.tenant.follow(scenario)
    if (scenario.name === this.#scenario.name) {
      this.#scenario = scenario
      // @note In memory, tenants still on the seed leave first, to take the new seed on their next request, admitted
      // then: reseeded where they stood, each built the new seed at once past the memory budget (attack47 F1: one
      // edit to 100,000 categories with 150 readers live, out of memory). Those with a request under way leave once
      // their requests end, on the old seed meanwhile: reseeded at once, each built it unadmitted (review43 R5: 40
      // readers waiting out a scenario's latency, 110 MB against 4 MiB); sent out at once, a switch their request then
      // made was built uncounted, and the journal entry of a write it made was lost (review44 F3).
      const later = new Set<string>()
      for (const [id, entry] of this.#tenants) {
        if (stale.has(entry)) {
          entry.stale = true
          later.add(id)
        } else if (!this.#options.storage.durable && this.#leavesWithoutLoss(entry)) this.#evict(id, false)
      }
      this.#options.storage.setSeed(seedState(scenario), later)
    }
  }

  /**
   * The tenants a save of the start scenario (`scenario`, same name) leaves stale: in memory, those on its seed with a
   * request under way, or still opening (review45 F4: reseeded where it stood, its store built the new seed unadmitted).
   * @note Not following the new version at once: a request under way at the save answered the new version's name (its
   * state) beside the old seed's categories (attack58 F2).
   */
  #staleAt(scenario: Scenario): Set<Entry> {
    const stale = new Set<Entry>()
    if (this.#options.storage.durable || scenario.name !== this.#scenario.name) return stale
    for (const entry of this.#tenants.values()) {
      if (entry.tenant !== undefined && !this.#leavesWithoutLoss(entry)) continue
      if (this.#busy(entry)) stale.add(entry)
    }
    return stale
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
    return this.#heldBytes + this.#enteringBytes
  }

  /**
   * Counts `bytes` in {@link heldBytes} until the function returned is called (a second call does nothing): the growth
   * of a switch or reset admitted, until it is done.
   * @note Counted only once each store began building its seed, switches to a `--scenarios-dir` scenario sent together
   * (waiting for one load of its file, then admitted one after the other in the same turn) all passed the budget: 200
   * at once ran out of memory (attack50 F6).
   */
  pledge(bytes: number, tenant?: Tenant): () => void {
    this.#enteringBytes += bytes
    let left = bytes
    // @note Taken over by what the tenant's store counts as it builds the new state: counted both ways until the build
    // ended, a switch held the budget twice meanwhile, and partners' writes were refused for bytes not there (review43 R3).
    const store = tenant?.store
    const meter: HeldBytesMeter = {
      add: (delta) => {
        this.#heldBytes += delta
        const taken = Math.min(Math.max(0, delta), left)
        left -= taken
        this.#enteringBytes -= taken
      },
    }
    const takesOver = store !== undefined && store.meter === this.#meter
    if (takesOver) {
      store.meter = meter
      this.#pledgeMeters.add(meter)
    }
    return () => {
      this.#enteringBytes -= left
      left = 0
      if (takesOver && store.meter === meter) store.meter = this.#meter
    }
  }

  /**
   * Evicts tenants that lose nothing by leaving (with a durable storage, any; in memory, those
   * still on their seed), least recently used first, until the live tenants hold at most `bytes`;
   * none when dropping all of them would not be enough. A tenant with a request under way stays
   * (its journal entry is still to come); the tenant used last goes last (the order is by use). Returns how many left.
   * @note A tenant that only read loses its journal with it, as at the tenant cap.
   * @note The tenant used last once always stayed: with a seed weighing more than half the budget, the one tenant
   * live kept every new key out for good.
   */
  relieve(bytes: number): number {
    // Unlike at the tenant cap, where a new partner would be turned away, a busy tenant stays.
    const droppable = (entry: Entry): entry is Entry & { tenant: Tenant } => this.#leavesWithoutLoss(entry) && !this.#busy(entry)
    let room = 0
    for (const entry of this.#tenants.values()) if (droppable(entry)) room += entry.tenant.heldBytes
    if (this.heldBytes() - room > bytes) return 0
    let evicted = 0
    for (const [id, entry] of this.#tenants) {
      if (this.heldBytes() <= bytes) break
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
   * A request for a tenant not in memory (or leaving it): admitted now when there is room or a
   * tenant that may leave now, else queued behind earlier ones until a busy tenant leaves;
   * refused at once when none could.
   */
  #admit(id: string): Promise<Tenant> {
    if (this.#waiters.length === 0 && !this.#tenants.has(id)) {
      const room = this.#makeRoom()
      if (room === true) return this.#enter(id)
      if (room !== 'wait') return Promise.reject(room)
    }
    return new Promise<Tenant>((resolve, reject) => {
      const timer = setTimeout(() => {
        const at = this.#waiters.indexOf(waiter)
        if (at === -1) return
        this.#waiters.splice(at, 1)
        reject(new TenantRefusedError('tenant_capacity', { limit: this.#options.maxTenants }, BUSY_RETRY_SECONDS))
        this.#serveWaiters()
      }, this.#options.admissionWaitMs ?? DEFAULT_ADMISSION_WAIT_MS)
      const waiter: Waiter = { id, resolve, reject, timer }
      this.#waiters.push(waiter)
      this.#serveWaiters()
    })
  }

  /**
   * Serves waiting requests in arrival order while it can: a waiter whose tenant is in memory
   * (and not leaving) is routed to it, one whose tenant is not gets the room a tenant that may
   * leave now makes; when only busy tenants could leave, enough of them are drained (chosen to
   * leave once their requests end) and the rest wait. Called whenever room may have appeared.
   */
  #serveWaiters(): void {
    // @note Re-entered from a tenant leaving while this loop evicts or admits: the outer loop goes on.
    if (this.#serving) return
    this.#serving = true
    try {
      // Which tenants must leave is decided afresh: those drained for a waiter since served may stay.
      for (const entry of this.#tenants.values()) entry.draining = false
      while (this.#waiters.length > 0) {
        const waiter = this.#waiters[0]!
        const entry = this.#tenants.get(waiter.id)
        let admitted: Promise<Tenant>
        if (entry) {
          admitted = this.#claim(waiter.id, entry)
        } else {
          const room = this.#makeRoom()
          if (room === 'wait') {
            this.#drain()
            break
          }
          if (room !== true) {
            this.#waiters.shift()
            clearTimeout(waiter.timer)
            waiter.reject(room)
            continue
          }
          try {
            admitted = this.#enter(waiter.id)
          } catch (error) {
            admitted = Promise.reject(error)
          }
        }
        this.#waiters.shift()
        clearTimeout(waiter.timer)
        waiter.resolve(admitted)
      }
    } finally {
      this.#serving = false
    }
  }

  /**
   * Marks busy tenants that may leave once their requests end as leaving (their new requests
   * wait in line), least recently used first, as many as waiting requests need room (one at least).
   */
  #drain(): void {
    let needed = this.#waiters.filter((waiter) => !this.#tenants.has(waiter.id)).length || 1
    for (const entry of this.#tenants.values()) {
      if (needed <= 0) return
      if (this.#busy(entry) && this.#couldLeave(entry)) {
        entry.draining = true
        // @note Its requests waiting out a delay end now (503 `over_capacity`, nothing run), so
        // delayed requests cannot keep new keys out (attack7 K3); requests running finish.
        entry.tenant?.cutDelays(`a new key needs room among the ${this.#options.maxTenants} tenants, and this one's requests were waiting out a delay`)
        needed--
      }
    }
  }

  /**
   * The one place a tenant enters memory (room was made): its store is opened and its scenario
   * read back; the request that brought it is its first in use.
   */
  #enter(id: string): Promise<Tenant> {
    const { storage, overrides } = this.#options
    // In memory its store builds the seed (durable stores read what they hold as asked).
    const seed = storage.durable ? 0 : scenarioHeldBytes(this.#scenario)
    // The version its store seeds from: kept by a tenant a save left stale while it opened, with that seed (attack58 F2).
    const openedWith = this.#scenario
    this.#options.admit?.('grow', seed)
    const entered = this.pledge(seed)
    const store = storage.open(id)
    storage.touch(id).catch(() => undefined)
    const entry: Entry = {
      store,
      touched: monotonicNow(),
      usedAt: monotonicNow(),
      tenant: undefined,
      claims: 1,
      draining: false,
      stale: false,
      opening: store.scenario().then((name) => {
        const journal = storage.journal?.(id, overrides.journalLimit) ?? new RequestJournal(overrides.journalLimit, overrides.journalBytes)
        const answers = store.answers ?? this.#answers.of(id)
        const scenario = entry.stale && name === openedWith.name ? openedWith : this.#scenarioOf(id, name)
        const tenant = new Tenant(scenario, overrides, store, journal, Promise.resolve(), answers)
        if (scenario.name !== name) tenant.unknownScenario = name
        this.#idOfTenant.set(tenant, id)
        // Every request routed to it meanwhile is in use from now on, until it leaves.
        for (; entry.claims > 0; entry.claims--) tenant.enter()
        tenant.onIdle = () => this.#idle(id, entry)
        // @note Not while stale: its store holds the old version's seed, which a reset under way at the save laid; taken for
        // the new one, the tenant named the new version beside the old seed's categories (review48 F2).
        tenant.startScenario = () => (entry.stale ? undefined : this.#scenario)
        entry.tenant = tenant
        // An entry removed while it opened (deleted, expired) never counts.
        entered()
        if (this.#tenants.get(id) === entry) this.#count(tenant)
        return tenant
      }),
    }
    // A failed open (storage unavailable) must not stay cached: the next request tries again.
    entry.opening.catch(() => {
      entered()
      if (this.#tenants.get(id) === entry) {
        this.#remove(id)
        this.#serveWaiters()
      }
    })
    this.#tenants.set(id, entry)
    this.#lastUsed = entry
    return entry.opening
  }

  /** A tenant's last request in use ended: its idle time starts now, and a waiting key may take its place. */
  #idle(id: string, entry: Entry): void {
    entry.usedAt = monotonicNow()
    if (this.#tenants.get(id) !== entry) return
    if ((entry.draining || entry.stale) && this.#leavesWithoutLoss(entry)) this.#evict(id, false)
    // One that wrote meanwhile stays, a writer: it takes the new version's pets and orders, as writers did at the save.
    else if (entry.stale && entry.tenant?.scenario.name === this.#scenario.name) entry.tenant.follow(this.#scenario)
    entry.stale = false
    if (this.#waiters.length > 0) this.#serveWaiters()
  }

  /** Whether a request is under way on it (an opening tenant always has the one that opened it). */
  #busy(entry: Entry): boolean {
    return entry.tenant === undefined ? true : entry.tenant.busy
  }

  /** Whether a busy tenant may leave without loss once its requests end (in memory, if they write nothing). */
  #couldLeave(entry: Entry): boolean {
    return this.#options.storage.durable || !entry.store.modified
  }

  /** The scenario a stored scenario name means: that one, or the server's when it is not known (the operator is told). */
  #scenarioOf(id: string, name: string): Scenario {
    const scenario = this.#scenario
    if (name === scenario.name) return scenario
    const named = this.#options.scenarioNamed?.(name)
    if (named) return named
    this.#options.warn?.(`tenant ${displayId(id)}: its saved scenario "${name}" is not known; pets and orders come from "${scenario.name}"`)
    return scenario
  }

  /**
   * Evicts until there is room for one more tenant: true then. First any tenant not busy that
   * loses nothing by leaving ({@link #leavesWithoutLoss}), least recently used first; then, in
   * memory, the least recently used tenant not busy and idle for `evictIdleMs` (its writes go
   * with it). A tenant with a request under way never leaves: `'wait'` when one could once its
   * requests end, else the {@link TenantRefusedError} to answer (with when one may leave).
   */
  #makeRoom(): true | 'wait' | TenantRefusedError {
    const { maxTenants } = this.#options
    if (this.#tenants.size < maxTenants) return true
    for (const [id, entry] of this.#tenants) {
      if (this.#tenants.size < maxTenants) return true
      if (!this.#busy(entry) && this.#leavesWithoutLoss(entry)) this.#evict(id, false)
    }
    const idleMs = this.#options.evictIdleMs ?? DEFAULT_EVICT_IDLE_MS
    // @note Monotonic: a clock stepped forward would otherwise make every tenant idle at once.
    const now = monotonicNow()
    let retryAfterMs = Number.POSITIVE_INFINITY
    let couldLeave = false
    for (const [id, entry] of this.#tenants) {
      if (this.#tenants.size < maxTenants) return true
      if (this.#busy(entry)) {
        // Its idle time starts when its requests end.
        if (this.#couldLeave(entry)) couldLeave = true
        retryAfterMs = Math.min(retryAfterMs, idleMs)
        continue
      }
      const idle = now - entry.usedAt
      if (idleMs > 0 && idle >= idleMs) this.#evict(id, true)
      else retryAfterMs = Math.min(retryAfterMs, idleMs - idle)
    }
    if (this.#tenants.size < maxTenants) return true
    if (couldLeave) return 'wait'
    // When the least idle wait ends, a tenant can leave; without idle eviction, a short default.
    const retryAfter = idleMs > 0 && Number.isFinite(retryAfterMs) ? Math.max(1, Math.ceil(retryAfterMs / 1000)) : CAPACITY_RETRY_SECONDS
    return new TenantRefusedError('tenant_capacity', { limit: maxTenants }, retryAfter)
  }

  /**
   * Whether a live tenant can leave memory without losing its data: with a durable storage any,
   * in memory one still on its seed.
   */
  #leavesWithoutLoss(entry: Entry): entry is Entry & { tenant: Tenant } {
    const tenant = entry.tenant
    return tenant !== undefined && (this.#options.storage.durable || !tenant.store.modified)
  }

  /** Drops a tenant from memory; with `forget`, an in-memory storage forgets its writes too. */
  #evict(id: string, forget: boolean): void {
    const { storage } = this.#options
    this.#remove(id)
    // Its plans go with its writes (in memory, unused for the idle time), and stay when it only leaves memory.
    if (forget && !storage.durable) this.#answers.drop(id)
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
    if (tenant.store.meter === this.#meter || (tenant.store.meter !== undefined && this.#pledgeMeters.has(tenant.store.meter))) tenant.store.meter = undefined
    if (tenant.journal.meter === this.#meter) tenant.journal.meter = undefined
    this.#heldBytes -= tenant.heldBytes
  }

  #seedSize(): number {
    const { categories } = this.#scenario.seed
    return 'generate' in categories ? categories.generate.count : categories.length
  }
}
