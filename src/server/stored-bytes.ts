/**
 * What tenants hold in a durable store (SQLite with `--data-dir`, Redis with `--redis-url`),
 * counted against the store budget (`--store-budget`, `storeBudgetBytes`, its default in
 * `create-sandbox-app.ts`). One rule for every
 * durable store, so that a budget means the same on each (docs/decisions/0009-store-budget.md):
 * - a category: its name and description in UTF-8, plus {@link CATEGORY_OVERHEAD};
 * - a tenant with saved state: its id and scenario name in UTF-8, plus {@link TENANT_OVERHEAD};
 *   its seed's categories count as any category once they are written with it.
 * The overheads stand for what a store keeps beside the text (ids, keys, an index entry): with
 * them, a count is close to what SQLite's file grows by (1.36 MB for a `large-catalog` tenant,
 * counted 1.41 MB).
 */
import { OverCapacityError } from '../core/capacity.js'
import type { TenantState } from '../core/storage.js'
import { RETRY_AFTER_SECONDS } from './memory-budget.js'

/** A category's id, its tenant's key in its row and in an index, and the row's own bookkeeping. */
export const CATEGORY_OVERHEAD = 96
/** A tenant's record beside its id and scenario name (the next id, the time it was last used, an index entry). */
export const TENANT_OVERHEAD = 256

/** UTF-8 bytes of a text as a store writes it (a lone surrogate as U+FFFD, three bytes). */
const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8')

/** What a category costs against the store budget. */
export function categoryStoredBytes(category: { readonly name: string; readonly description?: string | undefined }): number {
  return CATEGORY_OVERHEAD + utf8(category.name) + (category.description === undefined ? 0 : utf8(category.description))
}

/** What a tenant's own record costs against the store budget (its categories apart). */
export function tenantStoredBytes(id: string, scenario: string): number {
  return TENANT_OVERHEAD + utf8(id) + utf8(scenario)
}

/** What a tenant whose saved state is `state` costs against the store budget, categories included. */
export function stateStoredBytes(id: string, state: TenantState): number {
  let total = tenantStoredBytes(id, state.scenario)
  for (const category of state.categories) total += categoryStoredBytes(category)
  return total
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
