/**
 * The storage seam: one tenant's writable state ({@link TenantStore}) and the set of tenants
 * ({@link TenantStorage}). Two implementations today: in memory (`memory-storage.ts`, @msw/data,
 * the library's and the browser's) and SQLite (`sqlite-storage.ts`, `--data-dir`).
 *
 * Written so that a store shared by several processes (Redis, a later issue) can implement it
 * unchanged:
 * - every method is async and may fail with {@link StorageUnavailableError};
 * - a create assigns its id inside the store (an atomic increment per tenant, `INCR`), never
 *   from a counter the caller holds, so two processes never hand out the same id;
 * - {@link TenantStore.replace} (a reset or a scenario switch) replaces the categories, the
 *   next id and the scenario name at once (one transaction, `MULTI`/`EXEC`): a reader sees the
 *   old state or the new one, never a mix;
 * - a write resolves only once it is durable to the store's own promise (in memory: applied;
 *   SQLite: committed), and a write that rejects left nothing behind (no phantom rows);
 * - nothing is cached by the caller: every read asks the store (a store that is the only writer
 *   of its tenants may keep its own answers ready, as the in-memory one keeps its list's text).
 */
import type { STORAGE_UNAVAILABLE_UNTIL, WRITE_OUTCOME_UNKNOWN_WHY } from '../contract/errors.js'
import type { HeldBytesMeter } from '../core/heap-weight.js'
import type { Category, NewCategory } from '../contract/schemas.js'
import type { CategorySeed, Scenario } from '../contract/scenario-format.js'
import type { TenantJournal } from '../core/journal.js'
import type { TenantAnswers } from '../core/planned-answers.js'

/** A tenant's whole writable state: pets and orders are read-only and come from the scenario. */
export interface TenantState {
  /** The name of the scenario the tenant is on. */
  readonly scenario: string
  /** Categories in creation order. */
  readonly categories: readonly Category[]
  /** The id the next created category gets. */
  readonly nextCategoryId: number
}

/** One tenant's writable state. */
export interface TenantStore {
  /** The scenario the tenant is on: its saved one, or the storage's default for a tenant that never wrote. */
  scenario(): Promise<string>
  /** All categories in creation order, as plain objects. */
  listCategories(): Promise<Category[]>
  /**
   * The same list as the JSON text of its answer, for a store that keeps it ready between writes.
   * @note Only a store that is its tenant's only writer may offer it (in memory): a text kept by
   * one of several processes sharing a tenant (Redis) would miss the others' writes.
   * @default none: the list is serialised per request
   */
  listCategoriesJson?(): Promise<string>
  /**
   * The list as pages read as a client takes them, for a store whose list is made per request
   * (SQLite): every page shows the state of the moment this resolved, whatever is written after.
   * @default none: the list is read whole ({@link listCategories})
   */
  streamCategories?(): Promise<CategoryPages>
  /** How many categories the tenant holds. */
  countCategories(): Promise<number>
  /**
   * For a store whose list read also holds the categories' texts as stored (Redis: JSON), the
   * UTF-8 bytes of those texts, at least, or undefined when it cannot tell (the worst case by
   * the limits is then counted): what a list read reserves beside the categories.
   * @default none: the read holds only the categories
   */
  listTextBytes?(): Promise<number | undefined>
  /**
   * Stores a valid NewCategory under the tenant's next id, assigned atomically by the store.
   * Rejects with {@link IdSpaceExhaustedError} when that id is no longer a safe integer, and
   * with {@link CategoryLimitError} when the tenant already holds `maxCategories` (checked in
   * the same atomic step as the insert, so concurrent creates cannot pass the limit together).
   */
  createCategory(input: NewCategory, maxCategories?: number): Promise<Category>
  /** Replaces the whole state in one step (a reset, a scenario switch). */
  replace(state: TenantState): Promise<void>
  /**
   * Takes `seed` as its default and lays it, unless it holds writes when its turn in its queue comes (writes queued
   * before it are never wiped): resolves to whether it laid it. For a new version of the start seed (`--watch`).
   * @default none: the storage lays a new default seed itself (durable stores: a tenant without data reads it)
   */
  reseed?(seed: TenantState): Promise<boolean>
  /**
   * Whether the store itself holds the tenant's reads and writes until its writes under way have
   * settled, for a bounded time (SQLite: their fsync), so that the tenant need not hold its
   * requests (unbounded) while a switch is under way.
   * @default false
   */
  readonly holdsUntilSettled?: boolean | undefined
  /**
   * Whether the tenant holds anything beyond the storage's default seed, as far as this handle
   * has seen: false until its first create or scenario switch, and again after a reset to the
   * default seed. A tenant that is not modified can be dropped and recreated without loss.
   */
  readonly modified: boolean
  /**
   * What this handle holds on this process's heap, estimated in bytes (for the server's memory
   * budget): the categories of an in-memory store, 0 for a store that keeps them elsewhere.
   */
  readonly heldBytes: number
  /**
   * What the store would hold on this process's heap once seeded with `scenario` (as
   * {@link heldBytes} counts it), for the memory budget to judge a switch before it is made.
   * @default none: a store that keeps its categories elsewhere holds none of them on the heap
   */
  heldBytesFor?(scenario: Scenario): number
  /** Told of every change to {@link heldBytes}, when it can change at all. */
  meter?: HeldBytesMeter | undefined
  /**
   * The tenant's planned answers, when the store keeps them itself (Redis: replicas serving one
   * tenant take from one queue, and {@link scenario} also reads whether any are planned, so that
   * a tenant without plans costs no round trip for them); without it, the server keeps them in memory.
   * @default none
   */
  readonly answers?: TenantAnswers | undefined
}

/**
 * A tenant's categories read a page at a time ({@link TenantStore.streamCategories}): one state of
 * the tenant, the one it had when the pages were opened, in creation order.
 */
export interface CategoryPages {
  /**
   * The next categories, as many as fit in about `chars` characters of names and descriptions
   * (at least one), or none once every one was given (the pages are then closed). Throws
   * {@link StorageUnavailableError} when the store fails, or when the pages were ended early
   * (a store that cannot keep their state any longer).
   */
  next(chars: number): Category[]
  /** True once every category was given (by the last call of {@link next}), or the pages were closed; never for pages ended early. */
  readonly done: boolean
  /** Lets go of what the pages keep (the state they show) before their end; calling it again does nothing. */
  close(): void
}

/** What the tenant list shows about a stored tenant. */
export interface TenantSummary {
  readonly id: string
  readonly scenario: string
  readonly categories: number
  /** When it last wrote or was touched (ms since the epoch). */
  readonly updatedAt: number
}

/** Whether the storage can serve reads and writes now. */
export interface StorageHealth {
  readonly ok: boolean
  /** What failed, for the operator (may name paths: never sent to API clients). */
  readonly detail?: string | undefined
}

/** The set of tenants. */
export interface TenantStorage {
  /** `memory` keeps tenants while the process runs; any other kind keeps them across restarts. */
  readonly kind: 'memory' | 'sqlite' | 'redis'
  /** Whether a tenant's state survives the process (so any tenant may be dropped from memory). */
  readonly durable: boolean
  /**
   * The store budget this storage holds tenants' data to, when it is not the one it was given
   * (SQLite: less where its disk has not the room for it).
   * @default the one given
   */
  readonly storeBudgetBytes?: number | undefined
  /**
   * Whether other processes serve the same tenants (Redis): a tenant's scenario is then read back
   * on every request, since another replica may have switched it.
   * @default false
   */
  readonly shared?: boolean | undefined
  /**
   * The journal of a tenant, when the storage keeps journals itself (Redis, so that every replica
   * sees every request); without it, each tenant journals in memory. `limit` is the entry cap.
   */
  journal?(id: string, limit: number | undefined): TenantJournal
  /** The store of one tenant, created empty (on the default seed) when it has none. No I/O until used. */
  open(id: string): TenantStore
  /**
   * Tells the storage the caller no longer keeps this tenant in memory (it was evicted). An
   * in-memory storage may then let go of a tenant still on its seed; a durable one ignores it.
   */
  release(id: string): void
  /** Whether a tenant has saved state (it has written). */
  has(id: string): Promise<boolean>
  /** Every tenant with saved state. */
  list(): Promise<TenantSummary[]>
  /** Forgets a tenant's state; true when there was some. */
  delete(id: string): Promise<boolean>
  /** Records that a tenant was used now, for {@link expire}; a tenant without saved state is left alone. */
  touch(id: string): Promise<void>
  /**
   * Forgets every tenant neither written nor touched for `idleMs`, by the storage's own clock
   * (Redis's for Redis: replicas' clocks may differ); returns their ids.
   */
  expire(idleMs: number): Promise<string[]>
  health(): Promise<StorageHealth>
  /**
   * A new version of the default seed (the start scenario's file was reloaded, same name): a
   * tenant that never wrote, or was reset since, reads it from now on; one holding writes keeps them.
   * In memory, the tenants `later` names (on the seed, with a request under way) take it once they leave memory.
   */
  setSeed(seed: TenantState, later?: ReadonlySet<string>): void
  /** Finishes pending writes and lets go of files and locks. */
  close(): Promise<void>
}

/**
 * A storage failure (disk full, read-only, I/O error, a lock held elsewhere). Clients get
 * `503 storage_unavailable`; the message, which may name paths, goes to the operator only.
 */
export class StorageUnavailableError extends Error {
  override readonly name: string = 'StorageUnavailableError'
  /** How long it lasts, as the partner is told (see `STORAGE_UNAVAILABLE_UNTIL`). */
  readonly until: keyof typeof STORAGE_UNAVAILABLE_UNTIL
  constructor(message: string, options?: ErrorOptions & { readonly until?: keyof typeof STORAGE_UNAVAILABLE_UNTIL }) {
    super(message, options)
    this.until = options?.until ?? 'brief'
  }
}

/**
 * Thrown when a write was sent to the storage and its outcome could not be learnt in time (Redis
 * did not answer, nor answer the question asked after): it may or may not have been applied, and
 * the answer says so (`503 write_outcome_unknown`).
 */
export class WriteOutcomeUnknownError extends StorageUnavailableError {
  override readonly name = 'WriteOutcomeUnknownError'
  /** Why, as the partner is told (see `WRITE_OUTCOME_UNKNOWN_WHY`). */
  readonly why: keyof typeof WRITE_OUTCOME_UNKNOWN_WHY
  constructor(message: string, options?: ErrorOptions & { readonly why?: keyof typeof WRITE_OUTCOME_UNKNOWN_WHY }) {
    super(message, options)
    this.why = options?.why ?? 'late'
  }
}

/** Thrown when a create would take a tenant past its category limit. */
export class CategoryLimitError extends Error {
  override readonly name = 'CategoryLimitError'
  constructor(readonly limit: number) {
    super(`the tenant holds the most categories allowed (${limit})`)
  }
}

/** Thrown when the next id would no longer be a safe integer. */
export class IdSpaceExhaustedError extends Error {
  override readonly name = 'IdSpaceExhaustedError'
}

const SEEDS = new WeakMap<Scenario, TenantState>()

/**
 * The state a scenario seeds: explicit ids kept, missing ones numbered after the highest
 * explicit id, the next id after the highest. Computed once per scenario object and frozen,
 * since every tenant on that scenario shares it.
 */
export function seedState(scenario: Scenario): TenantState {
  let seed = SEEDS.get(scenario)
  if (!seed) {
    const categories = Object.freeze(expandCategories(scenario.seed.categories).map((category) => Object.freeze(category)))
    const nextCategoryId = categories.reduce((max, category) => Math.max(max, category.id), 0) + 1
    seed = Object.freeze({ scenario: scenario.name, categories, nextCategoryId })
    SEEDS.set(scenario, seed)
  }
  return seed
}

function expandCategories(source: Scenario['seed']['categories']): Category[] {
  if ('generate' in source) {
    const { count, name, description } = source.generate
    return Array.from({ length: count }, (_, index) => {
      const n = String(index + 1)
      const category: Category = { id: index + 1, name: name.replaceAll('{n}', n) }
      if (description !== undefined) category.description = description.replaceAll('{n}', n)
      return category
    })
  }
  let next = source.reduce((max, seed) => Math.max(max, seed.id ?? 0), 0)
  return source.map((seed: CategorySeed) => {
    const category: Category = { id: seed.id ?? ++next, name: seed.name }
    if (seed.description !== undefined) category.description = seed.description
    return category
  })
}

/** @note Copies only the contract's fields, so nothing a store attaches ever leaks out. */
export function toCategory(record: Category): Category {
  return record.description === undefined
    ? { id: record.id, name: record.name }
    : { id: record.id, name: record.name, description: record.description }
}
