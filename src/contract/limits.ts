/**
 * The sandbox's own limits, where the interface is silent: one list of defaults that the
 * validators, the OpenAPI document, the scenario schema, the guides (docs/limits.md) and the CLI all read.
 */

/**
 * The longest category name accepted, in characters (Unicode code points, as JSON Schema's `maxLength` counts them); longer ones get 400.
 * @default 200
 */
export const DEFAULT_NAME_MAX_LENGTH = 200

/**
 * The longest category description accepted, in characters (Unicode code points, as JSON Schema's `maxLength` counts them); longer ones get 400.
 * @default 2000
 */
export const DEFAULT_DESCRIPTION_MAX_LENGTH = 2000

/**
 * How many categories one tenant may hold; a create beyond it gets 409 `category_limit`.
 * @default 20000
 */
export const DEFAULT_MAX_CATEGORIES = 20_000

/**
 * What one journal may hold, in bytes of heap (bodies, headers and URLs as kept), before its
 * oldest entries go.
 * @default 1 MiB
 */
export const DEFAULT_JOURNAL_BYTES = 1024 * 1024

/**
 * The longest string `JSON.stringify` can make in V8 is about 2^29 characters; a category list
 * must stay well below it, escapes (up to 6 characters per character) included.
 * @note Checked when a server or petstore is built, so that no list can ever fail to serialise.
 */
export const MAX_SERIALISED_LIST_CHARS = 256 * 1024 * 1024

/** The per-tenant limits a petstore or sandbox enforces. */
export interface CategoryLimits {
  readonly nameMaxLength: number
  readonly descriptionMaxLength: number
  readonly maxCategories: number
}

/** The default lengths and count, as `openapi.json` and the scenario schema publish them. */
export const DEFAULT_CATEGORY_LIMITS: CategoryLimits = {
  nameMaxLength: DEFAULT_NAME_MAX_LENGTH,
  descriptionMaxLength: DEFAULT_DESCRIPTION_MAX_LENGTH,
  maxCategories: DEFAULT_MAX_CATEGORIES,
}

/**
 * The most characters a full category list can serialise to under these limits (every
 * character escaped as `\u0000`), or a message saying why the limits are unsafe.
 */
export function unsafeListReason(limits: CategoryLimits): string | undefined {
  const perCategory = 6 * (limits.nameMaxLength + limits.descriptionMaxLength) + 64
  const worst = perCategory * limits.maxCategories
  if (worst <= MAX_SERIALISED_LIST_CHARS) return undefined
  return (
    `a full list could serialise to ${worst} characters, over the ${MAX_SERIALISED_LIST_CHARS} a response may take; ` +
    'lower the category limit or the name and description lengths'
  )
}
