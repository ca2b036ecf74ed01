/**
 * The shapes of the published interface, written once. Request validation, the @msw/data
 * collections, the exported TypeScript types and the OpenAPI document all derive from here.
 */
import * as z from 'zod'
import { DEFAULT_CATEGORY_LIMITS, type CategoryLimits } from './limits.js'

/** Messages double as the `message` of the 400 Error a client sees, so they name the field. */
const nonEmptyString = (field: string) =>
  z
    .string({ error: `${field} must be a non-empty string` })
    // @note A pattern, not a refinement, so that the OpenAPI document and the scenario JSON
    // Schema state the rule too. `\S` is what `trim()` leaves: one character that is not white space.
    .regex(/\S/, { error: `${field} must be a non-empty string` })

/**
 * A lone UTF-16 surrogate: what a JSON `\ud800` escape can put in a string, and what no UTF-8
 * text (the interface's JSON, SQLite, Redis) can hold.
 * @note With the `u` flag a surrogate pair is one code point, so only an unpaired half matches.
 */
const LONE_SURROGATE = /\p{Cs}/u

/**
 * A string field's text must be well-formed UTF-16: a store that writes UTF-8 would otherwise
 * replace a lone surrogate with U+FFFD (and SQLite with three of them), answering a 201 for a
 * value it then lists altered. Refused alike on every store, in the library and over HTTP.
 */
const wellFormed = <T extends z.ZodString>(schema: T, field: string): T =>
  schema.refine((text) => !LONE_SURROGATE.test(text), {
    error: `${field} must be well-formed Unicode text (it holds an unpaired UTF-16 surrogate)`,
  })

/** An int64 id that JavaScript can represent exactly. */
export const Id = z
  .int({ error: 'id must be a safe integer' })
  .min(1, { error: 'id must be at least 1' })
  .meta({ format: 'int64' })

type LengthLimits = Pick<CategoryLimits, 'nameMaxLength' | 'descriptionMaxLength'>

/**
 * NewCategory and Category under these length limits: the server builds them from its options,
 * and the defaults below are what `openapi.json` and the scenario schema publish. Lengths count
 * Unicode code points (zod's `max`, as JSON Schema's `maxLength`): a surrogate pair is one character.
 */
export function categorySchemas(limits: LengthLimits, { judgeText = true }: { readonly judgeText?: boolean } = {}) {
  const judged = (schema: z.ZodString, field: string) => (judgeText ? wellFormed(schema, field) : schema)
  const newCategory = z
    .object({
      name: judged(nonEmptyString('name'), 'name')
        .max(limits.nameMaxLength, { error: `name must be at most ${limits.nameMaxLength} characters` })
        .meta({ description: 'Category name' }),
      description: judged(z.string({ error: 'description must be a string' }), 'description')
        .max(limits.descriptionMaxLength, { error: `description must be at most ${limits.descriptionMaxLength} characters` })
        .optional()
        .meta({ description: 'Short description of the category' }),
    })
    .meta({ id: 'NewCategory' })
  const category = z
    .object({
      id: Id.meta({ description: 'Unique identifier, assigned by the service on creation' }),
      name: newCategory.shape.name,
      description: newCategory.shape.description,
    })
    .meta({ id: 'Category' })
  return { NewCategory: newCategory, Category: category }
}

const defaults = categorySchemas(DEFAULT_CATEGORY_LIMITS)

/** Request body of `createCategory` (under the default length limits). */
export const NewCategory = defaults.NewCategory

/** A stored category, as the service returns it. */
export const Category = defaults.Category

/**
 * A category as storage accepts it: lengths and well-formed text are judged when a category is
 * created, never on data already held (saved under other limits or by an older version, or
 * seeded), so reloading it can never fail on them.
 */
export const StoredCategory = categorySchemas(
  { nameMaxLength: Number.MAX_SAFE_INTEGER, descriptionMaxLength: Number.MAX_SAFE_INTEGER },
  { judgeText: false },
).Category

/** The body of every error response. */
export const ApiError = z
  .object({
    code: z.string().meta({ description: 'Machine-readable error code' }),
    message: z.string().meta({ description: 'Human-readable description' }),
    status: z.int().meta({ description: 'The HTTP status code' }),
  })
  .meta({ id: 'Error' })

/**
 * Pets: fields are not published. The sandbox serves what a scenario supplies and requires only
 * an integer `id`; every other field is passed through as written in the scenario.
 */
export const Pet = z.looseObject({ id: Id }).meta({ id: 'Pet' })

/** Orders: fields are not published; as for pets, only an integer `id` is required. */
export const Order = z.looseObject({ id: Id }).meta({ id: 'Order' })

/** An API key as options and scenarios give it: non-empty, without white space (a bearer token cannot hold one). */
export const ApiKey = z.string({ error: 'keys must be strings' }).regex(/^\S+$/, { error: 'keys must be non-empty, without spaces' })

export type NewCategory = z.infer<typeof NewCategory>
export type Category = z.infer<typeof Category>
export type ApiError = z.infer<typeof ApiError>
export type Pet = z.infer<typeof Pet>
export type Order = z.infer<typeof Order>
