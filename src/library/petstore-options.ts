/**
 * The options of `createPetstore()`, judged: one schema for what is accepted, and one table that
 * says it in words, so every bad option is answered with its name, what was received and what
 * is accepted (never a bare zod message such as "Too small: expected number to be >=0").
 */
import * as z from 'zod'
import { ApiKey } from '../contract/schemas.js'
import { DEFAULT_DESCRIPTION_MAX_LENGTH, DEFAULT_NAME_MAX_LENGTH, unsafeListReason } from '../contract/limits.js'
import { PetstoreError, describeValue } from '../core/petstore-error.js'
import { DEFAULT_MAX_BODY_BYTES } from '../pipeline/request-body.js'
import { Faults, Latency } from '../contract/scenario-format.js'

const ABSOLUTE = 'an absolute URL (https://api.shop.test/v1) or one starting with * (*/v1)'

const BaseUrl = z
  .string()
  // A path (`/v1`) is the page's own API: resolved against the page, as `fetch('/v1')` is.
  .transform((url) => {
    const trimmed = url.replace(/\/+$/, '')
    const origin = isPath(trimmed) ? pageOrigin() : undefined
    return origin === undefined ? trimmed : `${origin}${trimmed}`
  })
  .superRefine((url, context) => {
    if (url.startsWith('*') || URL.canParse(url)) return
    context.addIssue({
      code: 'custom',
      message: isPath(url)
        ? `expected ${ABSOLUTE}: a path is resolved against the page, and there is none here (only in a browser)`
        : `expected ${ABSOLUTE}, or a path on this page (/v1, in a browser)`,
    })
  })

const isPath = (url: string) => url.startsWith('/') && !url.startsWith('//')

/** The page's origin in a browser (or jsdom); undefined in Node.js, Deno and workers without a page. */
function pageOrigin(): string | undefined {
  const origin = (globalThis as { location?: { origin?: unknown } }).location?.origin
  return typeof origin === 'string' && origin !== 'null' && URL.canParse(origin) ? origin : undefined
}

/** `redactHeaders`: header names (HTTP tokens), compared ignoring case. */
export const RedactHeaders = z.array(z.string().regex(/^[!#$%&'*+.^_`|~\w-]+$/))
/** `redactQueryParams`: query parameter names, compared ignoring case once decoded. */
export const RedactQueryParams = z.array(z.string().min(1))
/** What {@link RedactHeaders} and {@link RedactQueryParams} accept, in words. */
export const REDACT_ACCEPTED: Readonly<Record<string, string>> = {
  redactHeaders: `an array of header names (['x-partner-secret'])`,
  'redactHeaders[]': 'a header name (x-partner-secret)',
  redactQueryParams: `an array of query parameter names (['sid'])`,
  'redactQueryParams[]': 'a non-empty query parameter name (sid)',
}

const Options = z
  .object({
    baseUrl: z.union([BaseUrl, z.array(BaseUrl).min(1)]).default('*/v1'),
    apiKeys: z.union([z.literal('any'), z.array(ApiKey).min(1)]).optional(),
    scenario: z.union([z.string(), z.looseObject({})]).optional(),
    scenariosDir: z.string().optional(),
    latency: Latency.optional(),
    faults: z.union([Faults, z.literal(false)]).optional(),
    afterSunset: z.boolean().optional(),
    strict: z.boolean().default(false),
    maxBodyBytes: z.int().min(1).default(DEFAULT_MAX_BODY_BYTES),
    journalLimit: z.int().min(0).optional(),
    journalBytes: z.int().min(0).optional(),
    nameMaxLength: z.int().min(1).default(DEFAULT_NAME_MAX_LENGTH),
    descriptionMaxLength: z.int().min(0).default(DEFAULT_DESCRIPTION_MAX_LENGTH),
    maxCategories: z.int().min(0).optional(),
    redactHeaders: RedactHeaders.optional(),
    redactQueryParams: RedactQueryParams.optional(),
  })
  .strict()
  .superRefine((options, context) => {
    if (options.maxCategories === undefined) return
    const unsafe = unsafeListReason({ ...options, maxCategories: options.maxCategories })
    if (unsafe !== undefined) context.addIssue({ code: 'custom', message: unsafe, path: ['maxCategories'] })
  })

/** The options as {@link parseOptions} returns them, defaults filled in. */
export type ParsedOptions = z.output<typeof Options>

const OUTCOMES = '"500", "503" or "network"'

/**
 * What each option (and each part of one) accepts, in words; `[]` stands for any index. The
 * schema above decides; this says it.
 * @note A path missing here falls back to its option's line, so a new check never goes unexplained.
 */
const ACCEPTED: Readonly<Record<string, string>> = {
  '': `an object of options such as { baseUrl: '*/v1', scenario: 'default' }`,
  baseUrl: `a base URL ('https://api.shop.test/v1', '*/v1', or '/v1' in a browser) or a non-empty array of them`,
  'baseUrl[]': `a base URL ('https://api.shop.test/v1', '*/v1', or '/v1' in a browser)`,
  apiKeys: `'any' or a non-empty array of keys (['t0ken'])`,
  'apiKeys[]': 'a non-empty key without spaces (t0ken)',
  scenario: 'a built-in scenario name, a name in scenariosDir, a path to a .json file, or a scenario object',
  scenariosDir: 'the path of a directory',
  latency: 'whole milliseconds from 0 to 60000 (50) or a range ({ min: 20, max: 200 })',
  'latency.min': 'whole milliseconds from 0 to 60000',
  'latency.max': 'whole milliseconds from 0 to 60000',
  faults: '{ rate, outcomes?, seed? } or false',
  'faults.rate': 'the share of requests that fail, a number from 0 to 1 (0.1)',
  'faults.outcomes': `a non-empty array of ${OUTCOMES}`,
  'faults.outcomes[]': OUTCOMES,
  'faults.seed': 'a whole number',
  afterSunset: 'true or false',
  strict: 'true or false',
  maxBodyBytes: 'a whole number of bytes, 1 or more',
  journalLimit: 'a whole number of entries, 0 or more',
  journalBytes: 'a whole number of bytes, 0 or more',
  nameMaxLength: 'a whole number of characters, 1 or more',
  descriptionMaxLength: 'a whole number of characters, 0 or more',
  maxCategories: 'a whole number of categories, 0 or more',
  ...REDACT_ACCEPTED,
}

/**
 * A judge of options: `schema` decides, `accepted` says in words what each option (and each part
 * of one, `[]` for any index) accepts, and a bad one throws {@link PetstoreError} `invalid_option`
 * naming it, what was received and what is accepted. `kind` names whose options they are.
 */
export function optionJudge<T extends z.ZodType>(
  kind: string,
  schema: T,
  accepted: Readonly<Record<string, string>>,
): (options: unknown) => z.output<T> {
  const names = Object.keys(accepted).filter((key) => key !== '' && !/[.[]/.test(key))
  return (options) => {
    const parsed = schema.safeParse(options)
    if (parsed.success) return parsed.data
    const { issue, path } = innermost(parsed.error.issues[0]!, [])
    throw new PetstoreError('invalid_option', describeOptionIssue({ kind, accepted, names }, issue, path, options))
  }
}

/** Validates options; a bad one throws {@link PetstoreError} `invalid_option` naming it, what came and what is accepted. */
export const parseOptions: (options: unknown) => ParsedOptions = optionJudge('petstore', Options, ACCEPTED)

type Issue = z.core.$ZodIssue

/**
 * The issue to report: through a union, the one branch whose type matched (a Faults object with
 * a bad `outcomes`, not "expected false"); the union itself when none or several did.
 */
function innermost(issue: Issue, prefix: readonly PropertyKey[]): { issue: Issue; path: PropertyKey[] } {
  const path = [...prefix, ...issue.path]
  if (issue.code !== 'invalid_union') return { issue, path }
  const typed = issue.errors.filter(
    (branch) => !branch.every((inner) => inner.path.length === 0 && (inner.code === 'invalid_type' || inner.code === 'invalid_value')),
  )
  return typed.length === 1 && typed[0]![0] ? innermost(typed[0]![0], path) : { issue, path }
}

interface Wording {
  readonly kind: string
  readonly accepted: Readonly<Record<string, string>>
  readonly names: readonly string[]
}

function describeOptionIssue({ kind, accepted, names }: Wording, issue: Issue, path: readonly PropertyKey[], options: unknown): string {
  const name = formatPath(path)
  const received = describeValue(valueAt(options, path))
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys.map((key) => `"${key}"`).join(', ')
    if (path.length === 0) return `Invalid ${kind} option ${keys}: no such option. Known: ${names.join(', ')}`
    return `Invalid ${kind} option ${name}: expected ${acceptedAt(accepted, path)}, received unknown field ${keys}`
  }
  // A rule between options (`apiKeys and anyKey cannot be used together`) says itself.
  if (path.length === 0 && issue.code === 'custom') return `Invalid ${kind} options: ${issue.message}`
  if (path.length === 0) return `Invalid ${kind} options: expected ${accepted['']}, received ${received}`
  // A refinement says what is wrong in its own words (a relative URL without a page, min over max).
  if (issue.code === 'custom') return `Invalid ${kind} option ${name}: ${issue.message}, received ${received}`
  return `Invalid ${kind} option ${name}: expected ${acceptedAt(accepted, path)}, received ${received}`
}

function acceptedAt(accepted: Readonly<Record<string, string>>, path: readonly PropertyKey[]): string {
  const key = path.map((part) => (typeof part === 'number' ? '[]' : `.${String(part)}`)).join('').replace(/^\./, '')
  return accepted[key] ?? accepted[String(path[0])] ?? 'a valid value'
}

function valueAt(value: unknown, path: readonly PropertyKey[]): unknown {
  return path.reduce<unknown>((inner, key) => (typeof inner === 'object' && inner !== null ? (inner as Record<PropertyKey, unknown>)[key] : undefined), value)
}

/** `faults.outcomes[0]`, `apiKeys[1]`. */
function formatPath(path: readonly PropertyKey[]): string {
  return path.reduce<string>((text, key) => (typeof key === 'number' ? `${text}[${key}]` : text ? `${text}.${String(key)}` : String(key)), '')
}
