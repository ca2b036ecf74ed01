/**
 * The scenario file format, written once: the loader validates with it and the published JSON
 * Schema (`schema/scenario.schema.json`) is generated from it.
 */
import * as z from 'zod'
import { ApiKey, Id, NewCategory, Order, Pet } from './schemas.js'

/** Names are also file names, so they are kept to a safe alphabet (no `/`, no `..`). */
export const ScenarioName = z
  .string()
  // @note No `i` flag: a JSON Schema `pattern` has no flags, and the schema is generated from this.
  .regex(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, {
    error: 'must be 1-64 letters, digits, "-" or "_", starting with a letter or digit',
  })

const MILLISECONDS = { error: 'must be whole milliseconds from 0 to 60000' }
const Milliseconds = z.int(MILLISECONDS).min(0, MILLISECONDS).max(60_000, MILLISECONDS)

/** A fixed delay in milliseconds, or a range drawn from uniformly per request. */
export const Latency = z.union([
  Milliseconds,
  z
    .object({ min: Milliseconds, max: Milliseconds })
    .strict()
    .refine((range) => range.min <= range.max, { error: 'min must not be greater than max' })
    .meta({ description: 'A range drawn from per request; min must not be greater than max (a JSON Schema cannot say so: the loader checks it)' }),
], { error: 'must be milliseconds from 0 to 60000 (50) or a range ({ "min": 20, "max": 200 })' })

const RATE = { error: 'must be a number from 0 to 1 (the share of requests that fail)' }

/** Simulated failures, reproducible from `seed`. */
export const Faults = z
  .object({
    rate: z.number(RATE).min(0, RATE).max(1, RATE).meta({ description: 'Share of requests that fail, 0 to 1' }),
    outcomes: z
      .array(z.enum(['500', '503', 'network'], { error: 'must be "500", "503" or "network"' }), { error: 'must be an array of outcomes' })
      .min(1, { error: 'must list at least one of "500", "503", "network"' })
      .default(['500', '503'])
      .meta({ description: 'What a failing request gets, drawn evenly: an Error body or a network error' }),
    seed: z.int({ error: 'must be a whole number' }).default(1).meta({ description: 'Seed of the pseudo-random draw' }),
  })
  .strict()

/**
 * When `GET /pets/{petId}` was deprecated, unless a scenario says: the interface marks it
 * deprecated without a date, so this is the sandbox's documented choice.
 */
export const DEFAULT_DEPRECATED_AT = '2026-01-01T00:00:00Z'

const HttpUrl = z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' })

/** The deprecated `GET /pets/{petId}`: when it was deprecated, its sunset, and whether that is past. */
export const Deprecation = z
  .object({
    deprecatedAt: z.iso
      .datetime({ offset: true })
      .optional()
      .meta({ description: `When the operation was deprecated, sent as the Deprecation header (RFC 9745, \`@<epoch seconds>\`); default ${DEFAULT_DEPRECATED_AT}` }),
    link: HttpUrl.optional().meta({ description: 'A page about the deprecation, sent as a Link with rel="deprecation"' }),
    sunset: z.iso.datetime({ offset: true }).optional().meta({ description: 'Sent as the Sunset header' }),
    sunsetLink: HttpUrl.optional().meta({ description: 'A page about the sunset, sent as a Link with rel="sunset" (RFC 8594)' }),
    afterSunset: z.boolean().default(false).meta({ description: 'Answer 410 Gone instead of the pet' }),
  })
  .strict()

export const CategorySeed = NewCategory.extend({ id: Id.optional() }).strict()

/** Categories made on the fly: `name` and `description` may hold `{n}`, the 1-based index. */
export const CategoryGenerator = z
  .object({
    generate: z
      .object({
        count: z.int().min(0).max(1_000_000),
        name: z.string().regex(/\{n\}/, { error: 'must contain {n} so that names differ' }),
        description: z.string().optional(),
      })
      .strict(),
  })
  .strict()

/** A path to a JSON file holding an array of records, relative to the scenario file. */
export const FixtureRef = z.object({ fixture: z.string().min(1) }).strict()

const uniqueIds = <T extends { id?: number | undefined }>(records: readonly T[], ctx: z.RefinementCtx) => {
  const seen = new Set<number>()
  records.forEach((record, index) => {
    if (record.id === undefined) return
    if (seen.has(record.id)) {
      ctx.addIssue({ code: 'custom', path: [index, 'id'], message: `duplicate id ${record.id}` })
    }
    seen.add(record.id)
  })
}

const UNIQUE_IDS = { description: 'Ids must be unique (a JSON Schema cannot say so: the loader checks it)' }
export const CategorySeeds = z.array(CategorySeed).superRefine(uniqueIds).meta(UNIQUE_IDS)
export const PetSeeds = z.array(Pet).superRefine(uniqueIds).meta(UNIQUE_IDS)
export const OrderSeeds = z.array(Order).superRefine(uniqueIds).meta(UNIQUE_IDS)

const SeedCategories = z.union([CategorySeeds, FixtureRef, CategoryGenerator])
const SeedPets = z.union([PetSeeds, FixtureRef])
const SeedOrders = z.union([OrderSeeds, FixtureRef])

/**
 * The data of one test (`petstore.seed()`): a scenario's `seed` with every collection optional,
 * judged by the same rules. A collection named replaces the scenario's; one left out stays.
 */
export const SeedData = z
  .object({ categories: SeedCategories.optional(), pets: SeedPets.optional(), orders: SeedOrders.optional() })
  .strict()

/** What a scenario file holds. */
export const ScenarioFile = z
  .object({
    $schema: z.string().optional(),
    name: ScenarioName,
    version: z.string().regex(/^\d+\.\d+\.\d+$/, { error: 'must be a version like 1.0.0' }),
    description: z.string(),
    apiKeys: z
      .array(ApiKey)
      .min(1)
      .optional()
      .meta({
        description:
          'Accepted bearer keys. Without them the library accepts every non-empty key and the server its development key (or its --api-key flags)',
      }),
    seed: z
      .object({
        categories: SeedCategories.default([]),
        pets: SeedPets.default([]),
        orders: SeedOrders.default([]),
      })
      .strict()
      .default({ categories: [], pets: [], orders: [] }),
    latency: Latency.default(0),
    faults: Faults.optional(),
    deprecation: Deprecation.optional(),
  })
  .strict()
  .meta({ title: 'petstore-sandbox scenario' })

export type ScenarioFile = z.input<typeof ScenarioFile>
/** The data of one test, as `petstore.seed()` takes it. */
export type SeedData = z.input<typeof SeedData>
export type Latency = z.infer<typeof Latency>
export type Faults = z.input<typeof Faults>
export type CategorySeed = z.infer<typeof CategorySeed>
export type CategoryGenerator = z.infer<typeof CategoryGenerator>

/** A scenario with its fixtures read in: everything needed to seed a store, no file system. */
export interface Scenario {
  /** 1-64 letters, digits, `-` or `_`; the file's name without `.json`. */
  readonly name: string
  /** The data's version, `MAJOR.MINOR.PATCH`. */
  readonly version: string
  /** One line, shown by `scenarios list` and the demo page. */
  readonly description: string
  /** Accepted keys; without them the library accepts any key. */
  readonly apiKeys?: readonly string[] | undefined
  /** What the store starts with, fixtures already read. */
  readonly seed: {
    readonly categories: readonly CategorySeed[] | CategoryGenerator
    readonly pets: readonly z.infer<typeof Pet>[]
    readonly orders: readonly z.infer<typeof Order>[]
  }
  /** Delay before every answer, in ms or a range. */
  readonly latency: Latency
  /** Simulated failures, reproducible from their seed. */
  readonly faults?: z.infer<typeof Faults> | undefined
  /** The sunset of the deprecated `GET /pets/{petId}`, and whether it is past. */
  readonly deprecation?: z.infer<typeof Deprecation> | undefined
}

/** Formats zod issues as `path: problem` lines, paths written as `seed.categories[3].name`. */
export function describeIssues(error: z.ZodError, prefix = ''): string {
  return error.issues
    .flatMap((issue) => unionBranch(issue))
    .map((issue) => {
      const path = formatPath(prefix, issue.path)
      // A field left out reads as such, not as zod's "Invalid input: expected string, received undefined".
      if (issue.code === 'invalid_type' && / received undefined$/.test(issue.message)) {
        return `${path || '(root)'}: missing (${article(issue.expected)} is required)`
      }
      return `${path || '(root)'}: ${issue.message}`
    })
    .join('; ')
}

/**
 * The issues of the one union branch the value was meant for, so that `[{ "description": "x" }]`
 * reads `categories[0].name: …` rather than `categories: Invalid input`: branches of another
 * shape (an object where an array was given) or with other keys are set aside. The union's own
 * issue when no single branch is left.
 */
function unionBranch(issue: z.core.$ZodIssue): z.core.$ZodIssue[] {
  if (issue.code !== 'invalid_union' || issue.errors.length === 0) return [issue]
  const wrongShape = (branch: readonly z.core.$ZodIssue[], code: string) =>
    branch.some((inner) => inner.code === code && inner.path.length === 0)
  let branches = issue.errors.filter((branch) => !wrongShape(branch, 'invalid_type'))
  if (branches.length > 1) branches = branches.filter((branch) => !wrongShape(branch, 'unrecognized_keys'))
  const [only] = branches
  if (branches.length !== 1 || !only) return [issue]
  return only.flatMap((inner) => unionBranch({ ...inner, path: [...issue.path, ...inner.path] }))
}

/** `a string`, `an object`, `an array`. */
function article(type: string): string {
  return /^[aeiou]/.test(type) ? `an ${type}` : `a ${type}`
}

function formatPath(prefix: string, path: readonly PropertyKey[]): string {
  return path.reduce<string>(
    (text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)),
    prefix,
  )
}
