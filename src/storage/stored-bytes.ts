/**
 * What tenants hold in a durable store (SQLite with `--data-dir`, Redis with `--redis-url`),
 * counted against the store budget (`--store-budget`, `storeBudgetBytes`, its default in
 * `server/sandbox-options.ts`). One rule for every durable store: **the bytes of the text the store
 * writes, plus a fixed overhead** (docs/decisions/0010-store-budget-and-health.md):
 * - a category: the text its store writes for it, plus {@link CATEGORY_OVERHEAD}. SQLite writes
 *   its name and description as they are, in UTF-8 ({@link categoryStoredBytes}); Redis writes
 *   the category as JSON, in UTF-8, where a control character takes 6 bytes (`\u0001`), counted
 *   by the script that writes it (Lua's `#` of the JSON, in `redis-storage.ts`);
 * - a tenant with saved state: its id and scenario name in UTF-8, plus {@link TENANT_OVERHEAD};
 *   its seed's categories count as any category once they are written with it.
 * The overheads stand for what a store keeps beside the text (ids, keys, an index entry): with
 * them, a count is close to what SQLite's file grows by (1.36 MB for a `large-catalog` tenant,
 * counted 1.41 MB).
 * @note A count of the characters sent, not of what is written, let a `\x01` count 1 byte that
 * Redis held as 6: Redis ran out of memory at 1.9 MB counted of a 4 MiB budget (attack2 F1).
 *
 * Each tenant holding data and in use has room kept for it: its *floor* ({@link tenantFloorBytes},
 * 256 KiB at most). The budget bounds what tenants *claim* ({@link claimedBytes}: what each holds,
 * but at least its floor while it holds one), as well as what they hold. So a tenant in use grows
 * up to its floor whatever other keys store. A floor **lapses** once its tenant is idle for
 * {@link FLOOR_IDLE_MS} (by the store's clock): a write that finds no room for its floor first
 * takes back the floors of tenants idle that long, so a flood of new keys that is not kept busy
 * locks no one out for longer than that (docs/decisions/0014-store-floors-and-the-store-clock.md).
 */
import { OverCapacityError, RETRY_AFTER_SECONDS } from '../core/capacity.js'
import type { TenantState } from './storage.js'

/** A category's id, its tenant's key in its row and in an index, and the row's own bookkeeping. */
export const CATEGORY_OVERHEAD = 96
/** A tenant's record beside its id and scenario name (the next id, the time it was last used, an index entry). */
export const TENANT_OVERHEAD = 256

/** UTF-8 bytes of a text as a store writes it (a lone surrogate as U+FFFD, three bytes). */
const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8')

/** What a category costs against the store budget where its name and description are written as they are (SQLite). */
export function categoryStoredBytes(category: { readonly name: string; readonly description?: string | undefined }): number {
  return CATEGORY_OVERHEAD + utf8(category.name) + (category.description === undefined ? 0 : utf8(category.description))
}

/** What a tenant's own record costs against the store budget (its categories apart). */
export function tenantStoredBytes(id: string, scenario: string): number {
  return TENANT_OVERHEAD + utf8(id) + utf8(scenario)
}

/** What each state's categories cost against the store budget, once counted (a seed's state is one object for every tenant on it). */
const categoriesBytes = new WeakMap<readonly unknown[], number>()

/**
 * What a tenant whose saved state is `state` costs against the store budget, categories included.
 * @note Counted once per state: counted at each switch, a switch to a scenario of 300,000 generated categories cost
 * ~70 ms of the event loop per request, refused ones included (attack48 F3).
 */
export function stateStoredBytes(id: string, state: TenantState): number {
  let categories = categoriesBytes.get(state.categories)
  if (categories === undefined) {
    categories = 0
    for (const category of state.categories) categories += categoryStoredBytes(category)
    // Only a frozen one (a seed's): another could change after.
    if (Object.isFrozen(state.categories)) categoriesBytes.set(state.categories, categories)
  }
  return tenantStoredBytes(id, state.scenario) + categories
}

/** The most room kept for each tenant holding data (see {@link tenantFloorBytes}). */
export const TENANT_FLOOR_BYTES = 256 * 1024
/** A budget keeps floors for at least this many tenants (so a small budget has small floors). */
export const FLOORED_TENANTS = 64

/**
 * The room kept for each tenant holding data under a store budget: {@link TENANT_FLOOR_BYTES},
 * or a {@link FLOORED_TENANTS}th of a smaller budget; 0 without a budget.
 * @example tenantFloorBytes(1024 ** 3) // 262144: at most 4,096 tenants hold data at once
 */
export function tenantFloorBytes(budget: number): number {
  return Number.isFinite(budget) && budget > 0 ? Math.min(TENANT_FLOOR_BYTES, Math.floor(budget / FLOORED_TENANTS)) : 0
}

/** What a tenant holding `held` bytes claims of the store budget: nothing when it holds nothing, else at least `floor` while it holds its floor (`floored`). */
export function claimedBytes(held: number, floor: number, floored = true): number {
  return held === 0 ? 0 : floored ? Math.max(held, floor) : held
}

/**
 * How long a tenant may stay idle (no request, by the store's clock: SQLite's `used_at`, Redis's
 * `TIME`) and keep its floor. Past it, the tenant claims only what it holds (its data and TTL are
 * untouched), and regains its floor with its next write that the room allows.
 */
export const FLOOR_IDLE_MS = 60 * 60 * 1000

/** The most idle floors one write takes back (the rest wait for the next write that needs room). */
export const FLOOR_LAPSES_PER_WRITE = 64

/** What {@link storeCharge} decides for a write that is not refused: whether the tenant then holds its floor, and how much the claims grow. */
export interface StoreClaim {
  readonly floored: boolean
  readonly more: number
}

/**
 * Whether a tenant going from holding `old` to `next` bytes (holding its floor before:
 * `floored`) must be refused, and why, given what all tenants hold (`total`) and claim
 * (`claimed`) now, or else whether it holds its floor after it: the one rule SQLite applies in
 * its transactions and Redis in its scripts (`charge` in `redis-storage.ts`).
 * - `full` when the data would pass the budget; a write that holds no more is never refused.
 * - A tenant holding data takes (or keeps) its floor when the claims allow it; else it writes
 *   *without* a floor, claiming what it holds, when the claims allow that (`kept` otherwise).
 * The store takes back idle floors ({@link FLOOR_IDLE_MS}) and asks again before refusing or
 * writing without a floor.
 */
export function storeCharge(old: number, floored: boolean, next: number, total: number, claimed: number, budget: number, floor: number): StoreClaim | 'full' | 'kept' {
  if (next > old && total - old + next > budget) return 'full'
  const before = claimedBytes(old, floor, floored)
  if (next === 0) return { floored: false, more: -before }
  const withFloor = claimedBytes(next, floor, true) - before
  if (withFloor <= 0 || claimed + withFloor <= budget) return { floored: true, more: withFloor }
  const without = next - before
  if (next <= old || claimed + without <= budget) return { floored: false, more: without }
  return 'kept'
}

/** Why a write is refused when the room left is kept for the tenants already holding data (their floors). */
export const STORE_KEPT_REASON = 'the room the store has left is kept for the tenants already holding data'

/** The refusal of a write that would take room kept for other tenants: 503 `over_capacity` with `Retry-After`. */
export function storeKept(): OverCapacityError {
  return new OverCapacityError(STORE_KEPT_REASON, RETRY_AFTER_SECONDS)
}

/** Why a write is refused once the store budget is spent (the Error body's reason: no figure, no path). */
export const STORE_FULL_REASON = 'the tenants hold all the data the operator allowed the store'

/**
 * The refusal of a write that would take the store past its budget: 503 `over_capacity` with
 * `Retry-After`, as the memory budget's (room comes back as tenants reset, are deleted or expire).
 */
export function storeFull(): OverCapacityError {
  return new OverCapacityError(STORE_FULL_REASON, RETRY_AFTER_SECONDS)
}
