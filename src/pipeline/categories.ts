/** listCategories and createCategory: the operations the interface specifies in full. */
import { contractOf } from '../contract/operations.js'
import { categorySchemas, NewCategory } from '../contract/schemas.js'
import { DEFAULT_CATEGORY_LIMITS, type CategoryLimits } from '../core/limits.js'
import { parseJsonObject } from './request-body.js'
import { CategoryLimitError, IdSpaceExhaustedError } from '../core/store.js'
import { failure, json, jsonText, type ErrorOutcome, type Operation } from './operation.js'

export const listCategories: Operation = {
  ...contractOf('listCategories'),
  async run({ tenant, limits, reserve }) {
    // A store that keeps its list's text ready (in memory) answers it as it is.
    const text = await tenant.store.listCategoriesJson?.()
    if (text !== undefined) return jsonText(200, text)
    // @note A list made per request (SQLite, Redis) can take tens of MB while it is read: its
    // worst case is reserved before the read, so that reads at once cannot together take more
    // than the memory budget (issue 20 F01). It is let go once the answer is counted as it is sent.
    const release = reserve?.(listReadBytes(await tenant.store.countCategories(), limits))
    try {
      return { kind: 'json', status: 200, body: await tenant.store.listCategories(), release }
    } catch (error) {
      release?.()
      throw error
    }
  },
}

/**
 * What reading `count` categories and serialising them may take at most, in bytes: each name
 * and description at its longest, in two-byte characters, once as read and once as JSON text.
 */
export function listReadBytes(count: number, limits: CategoryLimits): number {
  return count * (4 * (limits.nameMaxLength + limits.descriptionMaxLength) + 160)
}

export const createCategory: Operation = {
  ...contractOf('createCategory'),
  async run({ request, tenant, bodyText, strict, limits }) {
    const body = parseJsonObject(bodyText, request.headers.get('content-type'))
    if (!body.ok) return failure(body.code, body.params)
    const input = validateNewCategory(body.value, strict, limits)
    if (!('name' in input)) return input
    try {
      return json(201, await tenant.createCategory(input))
    } catch (error) {
      if (error instanceof IdSpaceExhaustedError) return failure('internal_error', { reason: error.message })
      if (error instanceof CategoryLimitError) return failure('category_limit', { max: error.limit })
      throw error
    }
  },
}

const DECLARED_FIELDS = new Set(Object.keys(NewCategory.shape))
/** Fields whose schema refuses `undefined`: today only `name`. */
const REQUIRED_FIELDS = Object.entries(NewCategory.shape)
  .filter(([, schema]) => !schema.safeParse(undefined).success)
  .map(([field]) => field)

/** The NewCategory schema of each set of limits in use (usually one). */
const SCHEMAS = new WeakMap<CategoryLimits, typeof NewCategory>([[DEFAULT_CATEGORY_LIMITS, NewCategory]])

function newCategoryUnder(limits: CategoryLimits): typeof NewCategory {
  let schema = SCHEMAS.get(limits)
  if (!schema) {
    schema = categorySchemas(limits).NewCategory
    SCHEMAS.set(limits, schema)
  }
  return schema
}

/**
 * Judges a NewCategory against the contract's schema under `limits` (name and description
 * lengths). Unknown fields (and `id`) are dropped, or refused in strict mode.
 */
export function validateNewCategory(
  value: Record<string, unknown>,
  strict: boolean,
  limits: CategoryLimits = DEFAULT_CATEGORY_LIMITS,
): NewCategory | ErrorOutcome {
  const missing = REQUIRED_FIELDS.find((field) => !Object.hasOwn(value, field))
  if (missing !== undefined) return failure('missing_field', { field: missing })
  const parsed = newCategoryUnder(limits).safeParse(value)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    return failure('invalid_field', { reason: issue?.message ?? 'the body is not a valid NewCategory' })
  }
  if (strict) {
    const unknown = Object.keys(value).find((field) => !DECLARED_FIELDS.has(field))
    if (unknown !== undefined) return failure('unknown_field', { field: JSON.stringify(unknown) })
  }
  return parsed.data.description === undefined
    ? { name: parsed.data.name }
    : { name: parsed.data.name, description: parsed.data.description }
}
