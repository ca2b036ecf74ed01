/**
 * The options of `createSandboxApp()` (as `library/petstore-options.ts` is for `createPetstore()`):
 * their types and defaults, and how they are judged: each bad option is refused with a
 * `PetstoreError` naming what it accepts.
 */
import * as z from 'zod'
import {
  DEFAULT_DESCRIPTION_MAX_LENGTH,
  DEFAULT_JOURNAL_BYTES,
  DEFAULT_MAX_CATEGORIES,
  DEFAULT_NAME_MAX_LENGTH,
  unsafeListReason,
  type CategoryLimits,
} from '../contract/limits.js'
import { Latency } from '../contract/scenario-format.js'
import { ApiKey } from '../contract/schemas.js'
import { optionJudge, REDACT_ACCEPTED, RedactHeaders, RedactQueryParams } from '../library/petstore-options.js'
import { DEFAULT_MAX_BODY_BYTES } from '../pipeline/request-body.js'
import type { ScenarioInput } from '../scenario/scenario-loader.js'
import type { RedisEpoch } from '../storage/redis-connection.js'
import type { CorsOrigins } from './cors.js'
import { DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT_MS, type ServerLimits } from './http-server.js'
import { defaultMemoryBudget } from './memory-budget.js'
import type { RequestLogEntry } from './request-context.js'
import type { ScenarioReload } from './scenario-watcher.js'
import { DEFAULT_EVICT_IDLE_MS, DEFAULT_MAX_TENANTS } from './tenant-registry.js'

/** @default 30 days without a write before a tenant is forgotten */
export const DEFAULT_TENANT_TTL_DAYS = 30
/**
 * What the tenants of a durable store (`dataDir`, `redisUrl`) may store together: 1 GiB of tenant
 * data as `storage/stored-bytes.ts` counts it, about 760 tenants switched to `large-catalog` or 7 million
 * small categories.
 * @default 1073741824 (1 GiB)
 */
export const DEFAULT_STORE_BUDGET_BYTES = 1024 ** 3

/** Options of `createSandboxApp()`. */
export interface SandboxAppOptions {
  /**
   * The scenario every tenant starts from: a built-in name, a name in `scenariosDir`, a path to
   * a `.json` file, or a scenario object.
   * @default 'default'
   */
  scenario?: ScenarioInput
  /** A directory of `<name>.json` scenarios, searched before the built-ins (also for `PUT /__sandbox/scenario`). */
  scenariosDir?: string
  /**
   * Accepted API keys; each key is its own tenant.
   * @default the scenario's `apiKeys`, else ['sandbox-dev-key']
   */
  apiKeys?: readonly string[]
  /** Accept every non-empty key, each with its own store (at most `maxTenants`). @default false */
  anyKey?: boolean
  /** Tenants kept with `anyKey` before the least recently used is evicted. @default 1000 */
  maxTenants?: number
  /**
   * In memory: when the server holds `maxTenants` and none is still on its seed, a tenant unused
   * for this many minutes is evicted with its writes, so keys that wrote once cannot keep new
   * partners out for good; 0 never evicts a tenant holding writes (new keys wait). @default 60
   */
  evictIdleMinutes?: number
  /** A token for the admin API that acts on every tenant (with `?tenant=<id>`). @default none */
  adminToken?: string
  /** Refuse unknown fields in a NewCategory with 400 `unknown_field` instead of ignoring them. @default false */
  strict?: boolean
  /** Delay before every API answer, in ms or `{ min, max }`; wins over the scenario's. @default the scenario's */
  latency?: Latency
  /** Origins allowed by CORS, or '*' for any. @default '*' */
  corsOrigins?: CorsOrigins
  /** Called once per request, after it ends. The key is never part of the entry. @default none */
  log?: (entry: RequestLogEntry) => void
  /**
   * Keep each tenant's state in a SQLite database in this directory across restarts (needs the
   * optional dependency better-sqlite3): a create is committed before it is answered, and reset
   * and scenario switches are one transaction. One server per directory.
   * @default none: state lives in memory only
   */
  dataDir?: string
  /**
   * With `dataDir`: `power-loss` answers a write once the database's log is fsynced (it survives
   * `kill -9` and a power cut); `process-crash` once it is committed to the operating system (it
   * survives `kill -9`, not a power cut; faster on a slow disk).
   * @default 'power-loss'
   */
  durability?: 'power-loss' | 'process-crash'
  /**
   * Keep every tenant (categories, ids, scenario, journal, the tenant list) in Redis, so that
   * several sandbox processes behind a load balancer serve every tenant identically (needs the
   * optional dependency redis): `redis://host:port`, `rediss://` for TLS, a password in the URL,
   * `redis-cluster://host:port,host:port` (or a comma-separated list of nodes) for a cluster.
   * @default none: state lives in memory only
   */
  redisUrl?: string
  /** Prefix of every Redis key, to share one Redis between sandboxes. @default 'petstore-sandbox:' */
  redisPrefix?: string
  /**
   * With `redisUrl`, when Redis does not answer at start, or its `maxmemory-policy` may evict keys:
   * `'refuse'` rejects (a wrong URL is said at once); `'serve'` starts all the same, answering 503
   * `storage_unavailable` with `Retry-After` (and health 503 `degraded`) until Redis answers (or is
   * set to `noeviction`), then serving as usual: what each worker of `serve --workers` does, so that
   * a worker started during an outage, or in place of one that died, rides it out.
   * @default 'refuse'
   */
  redisUnreachableAtStart?: 'refuse' | 'serve'
  /**
   * With `redisUrl`: the epoch (the token of the sandbox's keys in Redis, and the beat Redis must
   * hold at least) that a sandbox this one replaces last knew, as its `onRedisEpoch` told it. This
   * sandbox starts from it: a Redis that lost its keys or went back to an older snapshot before it
   * started is refused from the first command (503 storage_unavailable, it starts all the same,
   * until restarted without this epoch: on what Redis holds then), rather
   * than served as new. With `lost` (the sandbox it replaces had taken storage for lost: keys evicted,
   * or gone), it starts lost, refusing as that one did. What `serve --workers` gives a worker it starts
   * in place of one that died; a supervisor restarting a sandbox in place can do the same. Not to be passed to a
   * sandbox the operator restarts after fixing Redis: with `lost`, it would refuse the fixed Redis too.
   */
  redisEpoch?: RedisEpoch
  /** With `redisUrl`: called with the epoch each time this sandbox knows a newer one (at most once a second), and once with `lost` when it takes storage for lost, for a `redisEpoch` later. */
  onRedisEpoch?: (epoch: RedisEpoch) => void
  /**
   * With `redisUrl` and `redisUnreachableAtStart: 'serve'`: this sandbox starts in place of (or beside) one that serves,
   * so a Redis that refuses it as it would refuse a running one (an evicting policy, a replica, an ACL that refuses its
   * user a command) is served as a running sandbox serves it, `503` until fixed, not refused at start. What `serve
   * --workers` gives every worker it starts once the first serves; a `redisEpoch` handed implies it.
   * @default false
   */
  redisReplacing?: boolean
  /**
   * Accept a Redis whose `maxmemory-policy` may evict keys (anything but `noeviction`): it
   * silently drops acknowledged writes when full. Without it such a Redis is refused at start.
   * @default false
   */
  redisAllowEviction?: boolean
  /**
   * With {@link redisUrl}: answer a write (create, switch, reset, journal clear, planned answer) once its Redis master has it, without
   * waiting for one of the master's replicas to confirm it. A failover to a replica that lagged then
   * loses writes answered as applied and hands their ids out again. Without it, where a master has
   * replicas online, such a write is answered once every one of them has it, and `503
   * write_outcome_unknown` when none does within the request's time.
   * @default false
   */
  redisAllowFailoverLoss?: boolean
  /**
   * With {@link redisUrl}: how many replicas each Redis master has. A write is answered once that
   * many (and every replica online) have it; with fewer online, `503 write_outcome_unknown` at once
   * (a failover to one missing would lose it). Default: the most seen online at once since the
   * master's replication history began (kept in Redis for every process), on a Cluster the replicas
   * `CLUSTER NODES` lists; set it after removing a replica for good.
   */
  redisReplicas?: number
  /**
   * Forget a tenant that has not been used (read or written) for this many days (checked at
   * start and hourly; with Redis, the TTL of its keys); 0 keeps tenants forever. Bounds what a
   * flood of keys leaves behind.
   * @default 30
   */
  tenantTtlDays?: number
  /** Told about storage failures and recoveries, with paths (the operator's log). @default none */
  warn?: (message: string) => void
  /** The demo page directory served at `/__sandbox/`, or false for none. @default the package's `demo/`, when present */
  demoDir?: string | false
  /** The longest category name accepted, in characters; longer ones get 400 `invalid_field`. @default 200 */
  nameMaxLength?: number
  /** The longest category description accepted, in characters. @default 2000 */
  descriptionMaxLength?: number
  /** Categories one tenant may hold; a create beyond gets 409 `category_limit`. @default 20000 */
  maxCategories?: number
  /** What each tenant's journal may hold, in heap bytes, before its oldest entries go. @default 1048576 (1 MiB) */
  journalBytes?: number
  /**
   * What all tenants may hold together (data and journals), in heap bytes; over it, new tenants,
   * creates and scenario switches get 503 `over_capacity` with `Retry-After`.
   * @default half of V8's heap limit
   */
  memoryBudgetBytes?: number
  /**
   * With `dataDir` or `redisUrl`: what all tenants may store together, in bytes (names and
   * descriptions in UTF-8, tenant ids and scenario names, plus a fixed 96 bytes a category and 256
   * a tenant: `storage/stored-bytes.ts`), counted in the same step as each write (one script on Redis; not
   * enforced on a Redis Cluster, the operator is told); past it, creates, scenario switches and
   * new tenants' first writes get 503 `over_capacity` with `Retry-After`, while reads, resets and
   * deletes still work; so do writes that would take room kept for the tenants already holding
   * data (each keeps a floor of 256 KiB, or a 64th of a smaller budget, that other keys cannot
   * take). Counted again from the store at start. On Redis, journals have a budget of
   * their own of the same size. In memory, the memory budget bounds tenants' data instead. 0: no budget.
   * @note `storage/stored-bytes.ts` is the one counting rule for every durable store, so that a Redis
   * store bounded by it means the same figure.
   * @default 1073741824 (1 GiB)
   */
  storeBudgetBytes?: number
  /**
   * The scenarios `PUT /__sandbox/scenario` may switch a tenant to; others get 403. The start
   * scenario is always allowed, so a tenant can always go back to it. Each name must be one the
   * sandbox knows. @default every scenario the sandbox knows
   */
  scenarioAllow?: readonly string[]
  /** Open connections served by {@link SandboxApp.createServer}; past it, 503 except health checks. @default 1000 */
  maxConnections?: number
  /** Time a client has to send its headers, in ms (then 408). Also what {@link SandboxApp.createServer} sets. @default 10000, or requestTimeoutMs when that is shorter */
  headersTimeoutMs?: number
  /** Time a client has to send its whole request, in ms (then 408); `Prefer: delay` and latency are capped at it. @default 30000 */
  requestTimeoutMs?: number
  /**
   * The URL clients reach the sandbox at (`https://sandbox.example.com`, a path allowed), listed
   * as the first server of `/__sandbox/openapi.json` whoever asks; a URL ending with the base
   * path (`https://x/v1`) is taken as the API's base.
   * @default none: the address and port the client's connection reached (see `trustProxy`)
   */
  publicUrl?: string
  /**
   * Request headers whose values the journal shows as `[redacted]`, beyond the default list and
   * pattern (`DEFAULT_REDACTED_HEADERS`, `CREDENTIAL_NAME_PATTERN`). @default none beyond the defaults
   */
  redactHeaders?: readonly string[]
  /**
   * Query parameters whose values journaled URLs (and the operator's warnings) show as
   * `[redacted]`, beyond the defaults (`DEFAULT_REDACTED_QUERY_PARAMS`). @default none beyond the defaults
   */
  redactQueryParams?: readonly string[]
  /**
   * Without `publicUrl`: believe `X-Forwarded-Host` and `X-Forwarded-Proto` for the served
   * document's first server. Only behind a proxy that sets them (and drops a client's own).
   * @default false
   */
  trustProxy?: boolean
  /**
   * Proxy mode: the real service's base URL (`https://staging.shop.test/v1`). Every API request is
   * passed on to it (the client's key included; the service judges keys, so every key has a
   * tenant here, as with `anyKey`), its answer passed back within the request timeout, and
   * where the exchange departs from the contract named in the `Sandbox-Violations` answer
   * header, the tenant's journal (`violations`) and `GET /__sandbox/violations`. The service
   * unreachable: 502 `upstream_unavailable`; too slow: 504 `upstream_timeout`.
   * @default none: the sandbox answers from its own data
   */
  proxy?: string
  /**
   * Live reload for scenario authors: watch the start scenario's file, the fixtures it names, and
   * the files of `scenariosDir`; an edit is validated whole and taken up within a second. Tenants
   * that never wrote (or were reset since) see the new seed at once, the others at their next
   * reset; a broken edit keeps the last good version serving, and says why (`onReload`, else
   * `warn`, and `GET /__sandbox/health`). A built-in scenario is not watched.
   * @default false
   * @example await createSandboxApp({ scenario: './shop.json', watch: true })
   */
  watch?: boolean
  /** With `watch`: told of every reload, taken up or refused (each with its one log line). @default refused ones go to `warn` */
  onReload?: (reload: ScenarioReload) => void
}

/** Every limit of a sandbox, defaults filled in. */
export interface SandboxLimits extends CategoryLimits, ServerLimits {
  readonly journalBytes: number
  readonly memoryBudgetBytes: number
  /** What the tenants of a durable store may store together (see {@link SandboxAppOptions.storeBudgetBytes}). */
  readonly storeBudgetBytes: number
  readonly maxBodyBytes: number
  /** The scenarios tenants may switch to, or 'any'. */
  readonly scenarioAllow: readonly string[] | 'any'
}

const Key = ApiKey

/** `publicUrl`: an http(s) URL without credentials, query or fragment, kept without its trailing slash. */
const PublicUrl = z
  .string()
  .refine(isPublicUrl, 'an http:// or https:// URL without credentials, query or fragment')
  .transform((text) => {
    const url = new URL(text)
    return `${url.origin}${url.pathname.replace(/\/+$/, '')}`
  })

function isPublicUrl(text: string): boolean {
  if (!URL.canParse(text) || text.includes('?') || text.includes('#')) return false
  const url = new URL(text)
  return (url.protocol === 'http:' || url.protocol === 'https:') && url.username === '' && url.password === ''
}

const Options = z
  .object({
    scenario: z.unknown().optional(),
    scenariosDir: z.string().optional(),
    apiKeys: z.array(Key).min(1).optional(),
    anyKey: z.boolean().default(false),
    maxTenants: z.int().min(1).default(DEFAULT_MAX_TENANTS),
    evictIdleMinutes: z.int().min(0).default(DEFAULT_EVICT_IDLE_MS / 60_000),
    adminToken: Key.optional(),
    strict: z.boolean().default(false),
    latency: Latency.optional(),
    corsOrigins: z.union([z.literal('*'), z.array(z.string().min(1))]).default('*'),
    log: z.function().optional(),
    demoDir: z.union([z.string(), z.literal(false)]).optional(),
    dataDir: z.string().min(1).optional(),
    redisUrl: z.string().min(1).optional(),
    redisPrefix: z.string().optional(),
    redisUnreachableAtStart: z.enum(['refuse', 'serve']).default('refuse'),
    redisEpoch: z.object({ token: z.string().min(1), beat: z.int().min(0).max(Number.MAX_SAFE_INTEGER), lost: z.string().min(1).optional() }).strict().optional(),
    onRedisEpoch: z.function().optional(),
    redisReplacing: z.boolean().default(false),
    redisAllowEviction: z.boolean().default(false),
    redisAllowFailoverLoss: z.boolean().default(false),
    redisReplicas: z.int().min(0).max(1000).optional(),
    tenantTtlDays: z.number().min(0).default(DEFAULT_TENANT_TTL_DAYS),
    durability: z.enum(['power-loss', 'process-crash']).default('power-loss'),
    warn: z.function().optional(),
    nameMaxLength: z.int().min(1).default(DEFAULT_NAME_MAX_LENGTH),
    descriptionMaxLength: z.int().min(0).default(DEFAULT_DESCRIPTION_MAX_LENGTH),
    maxCategories: z.int().min(0).default(DEFAULT_MAX_CATEGORIES),
    journalBytes: z.int().min(0).default(DEFAULT_JOURNAL_BYTES),
    memoryBudgetBytes: z.int().min(0).optional(),
    storeBudgetBytes: z.int().min(0).default(DEFAULT_STORE_BUDGET_BYTES),
    scenarioAllow: z.array(z.string().min(1)).optional(),
    maxConnections: z.int().min(1).default(DEFAULT_MAX_CONNECTIONS),
    headersTimeoutMs: z.int().min(1).optional(),
    requestTimeoutMs: z.int().min(1).default(DEFAULT_REQUEST_TIMEOUT_MS),
    publicUrl: PublicUrl.optional(),
    trustProxy: z.boolean().default(false),
    proxy: PublicUrl.optional(),
    redactHeaders: RedactHeaders.optional(),
    redactQueryParams: RedactQueryParams.optional(),
    watch: z.boolean().default(false),
    onReload: z.function().optional(),
  })
  .strict()
  .superRefine((options, context) => {
    const unsafe = unsafeListReason(options)
    if (unsafe !== undefined) context.addIssue({ code: 'custom', message: unsafe, path: ['maxCategories'] })
  })
  .refine((options) => !(options.adminToken && options.apiKeys?.includes(options.adminToken)), {
    error: 'adminToken must differ from every API key',
  })
  .superRefine((options, context) => {
    const broken = brokenOptionRule(options, (option) => option)
    if (broken !== undefined) context.addIssue({ code: 'custom', message: broken })
  })

/** The options a rule between options reads, as the library takes them and as `serve`'s flags hold them. */
type RuledOptions = Pick<
  SandboxAppOptions,
  'apiKeys' | 'anyKey' | 'dataDir' | 'redisUrl' | 'redisReplicas' | 'redisAllowEviction' | 'redisAllowFailoverLoss' | 'durability' | 'storeBudgetBytes' | 'headersTimeoutMs' | 'requestTimeoutMs'
>
type RuledOption = keyof RuledOptions
/** How a rule names an option: `redisUrl` in the library, `--redis-url` in `serve`. */
type OptionNamer = (option: keyof SandboxAppOptions) => string

/**
 * A rule between options: `option` (when `given`) needs one of `needs`, or cannot go with
 * `excludes`, or must not be greater than `atMost`.
 */
interface OptionRule {
  readonly option: RuledOption
  readonly given: (options: RuledOptions) => boolean
  /** How the option is named when given: `durability process-crash`, the option's name followed by its value. */
  readonly value?: string
  readonly needs?: readonly RuledOption[]
  readonly excludes?: RuledOption
  readonly atMost?: RuledOption
  /** Why, in words that name options through `name`; `where` the store: `in memory`, `in Redis`, `in SQLite (dataDir)`. */
  readonly why?: (name: OptionNamer, where: string) => string
}

const aboutRedis = (_name: OptionNamer, where: string) => `it is about the Redis store, and this sandbox keeps its tenants ${where}`

/**
 * The rules between the sandbox's options: the one list the library's judge and `serve`'s flag
 * checks both say, each naming options its own way (`redisUrl`, `--redis-url`).
 * @note A store's option without its store was accepted and did nothing (trial5 P9): a
 * deployment that meant to use the store ran on memory without a word.
 */
const OPTION_RULES: readonly OptionRule[] = [
  { option: 'apiKeys', given: (o) => o.apiKeys !== undefined, excludes: 'anyKey' },
  { option: 'redisUrl', given: (o) => o.redisUrl !== undefined, excludes: 'dataDir', why: () => 'choose one store' },
  { option: 'redisReplicas', given: (o) => o.redisReplicas !== undefined, needs: ['redisUrl'], why: () => 'it is the number of replicas of each Redis master' },
  { option: 'redisAllowEviction', given: (o) => o.redisAllowEviction === true, needs: ['redisUrl'], why: aboutRedis },
  { option: 'redisAllowFailoverLoss', given: (o) => o.redisAllowFailoverLoss === true, needs: ['redisUrl'], why: aboutRedis },
  { option: 'durability', given: (o) => o.durability === 'process-crash', value: 'process-crash', needs: ['dataDir'], why: (_name, where) => `it is when a SQLite write is answered, and this sandbox keeps its tenants ${where}` },
  {
    option: 'storeBudgetBytes',
    given: (o) => o.storeBudgetBytes !== undefined && o.storeBudgetBytes !== DEFAULT_STORE_BUDGET_BYTES,
    needs: ['dataDir', 'redisUrl'],
    why: (name) => `it bounds what a store keeps; in memory, ${name('memoryBudgetBytes')} bounds the tenants`,
  },
  {
    option: 'redisReplicas',
    given: (o) => o.redisReplicas !== undefined && o.redisAllowFailoverLoss === true,
    excludes: 'redisAllowFailoverLoss',
    why: () => 'the first waits for that many replicas, the second for none',
  },
  { option: 'headersTimeoutMs', given: (o) => o.headersTimeoutMs !== undefined && o.headersTimeoutMs > (o.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS), atMost: 'requestTimeoutMs' },
]

/**
 * The first rule between options these break, in words that name each option through `name`
 * (`redisAllowEviction needs redisUrl: it is about the Redis store`); undefined when none is.
 */
export function brokenOptionRule(options: RuledOptions, name: OptionNamer): string | undefined {
  const where = options.redisUrl !== undefined ? 'in Redis' : options.dataDir !== undefined ? `in SQLite (${name('dataDir')})` : 'in memory'
  for (const rule of OPTION_RULES) {
    if (!rule.given(options)) continue
    const subject = rule.value === undefined ? name(rule.option) : `${name(rule.option)} ${rule.value}`
    const why = rule.why?.(name, where)
    if (rule.needs !== undefined && rule.needs.every((other) => options[other] === undefined)) {
      return `${subject} needs ${rule.needs.map(name).join(' or ')}${why === undefined ? '' : `: ${why}`}`
    }
    if (rule.excludes !== undefined && options[rule.excludes] !== undefined && options[rule.excludes] !== false) {
      return `${subject} and ${name(rule.excludes)} cannot be used together${why === undefined ? '' : `: ${why}`}`
    }
    if (rule.atMost !== undefined) return `${subject} must not be greater than ${name(rule.atMost)}`
  }
  return undefined
}

/** What each sandbox option accepts, in words (see `optionJudge`). */
const ACCEPTED: Readonly<Record<string, string>> = {
  '': `an object of options such as { apiKeys: ['k1'], adminToken: 'root' }`,
  scenario: 'a built-in scenario name, a name in scenariosDir, a path to a .json file, or a scenario object',
  scenariosDir: 'the path of a directory',
  apiKeys: `a non-empty array of keys (['k1', 'k2'])`,
  'apiKeys[]': 'a non-empty key without spaces (k1)',
  anyKey: 'true or false',
  maxTenants: 'a whole number of tenants, 1 or more',
  evictIdleMinutes: 'a whole number of minutes, 0 or more (0: never)',
  adminToken: 'a non-empty token without spaces',
  strict: 'true or false',
  latency: 'whole milliseconds from 0 to 60000 (50) or a range ({ min: 20, max: 200 })',
  'latency.min': 'whole milliseconds from 0 to 60000',
  'latency.max': 'whole milliseconds from 0 to 60000',
  corsOrigins: `'*' or an array of origins (['https://app.example'])`,
  'corsOrigins[]': 'an origin (https://app.example)',
  log: 'a function called with each request log entry',
  demoDir: 'the path of a directory, or false for no demo page',
  dataDir: 'the path of a directory',
  redisUrl: 'a Redis URL (redis://127.0.0.1:6379)',
  redisPrefix: 'a key prefix (petstore-sandbox)',
  redisUnreachableAtStart: `'refuse' or 'serve'`,
  redisEpoch: 'the { token, beat, lost? } an onRedisEpoch call gave',
  onRedisEpoch: 'a function called with each newer epoch',
  redisReplacing: 'true or false',
  redisAllowEviction: 'true or false',
  redisAllowFailoverLoss: 'true or false',
  redisReplicas: 'a whole number of replicas of each Redis master, from 0 to 1000',
  tenantTtlDays: 'a number of days, 0 or more (0: never expire)',
  durability: `'power-loss' or 'process-crash'`,
  warn: 'a function called with each warning',
  nameMaxLength: 'a whole number of characters, 1 or more',
  descriptionMaxLength: 'a whole number of characters, 0 or more',
  maxCategories: 'a whole number of categories, 0 or more',
  journalBytes: 'a whole number of bytes, 0 or more',
  memoryBudgetBytes: 'a whole number of bytes, 0 or more',
  storeBudgetBytes: 'a whole number of bytes, 0 or more',
  scenarioAllow: `an array of scenario names (['default', 'empty'])`,
  'scenarioAllow[]': 'a scenario name',
  maxConnections: 'a whole number of connections, 1 or more',
  headersTimeoutMs: 'whole milliseconds, 1 or more, at most requestTimeoutMs',
  requestTimeoutMs: 'whole milliseconds, 1 or more',
  publicUrl: 'an http:// or https:// URL without credentials, query or fragment (https://sandbox.example.com)',
  proxy: "the real service's base URL: an http:// or https:// URL without credentials, query or fragment (https://staging.shop.test/v1)",
  trustProxy: 'true or false',
  ...REDACT_ACCEPTED,
  watch: 'true or false',
  onReload: 'a function called with each scenario reload',
}

/** The sandbox's options judged, every default filled in; throws `PetstoreError` `invalid_option` naming what each bad one accepts. */
export const parseSandboxOptions = optionJudge('sandbox', Options, ACCEPTED)

/** The options as {@link parseSandboxOptions} gives them back. */
export type SandboxSettings = ReturnType<typeof parseSandboxOptions>

/** Every limit of a sandbox with these settings, defaults filled in. */
export function sandboxLimits(settings: SandboxSettings): SandboxLimits {
  return {
    nameMaxLength: settings.nameMaxLength,
    descriptionMaxLength: settings.descriptionMaxLength,
    maxCategories: settings.maxCategories,
    journalBytes: settings.journalBytes,
    memoryBudgetBytes: settings.memoryBudgetBytes ?? defaultMemoryBudget(),
    storeBudgetBytes: settings.storeBudgetBytes,
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
    scenarioAllow: settings.scenarioAllow ?? 'any',
    maxConnections: settings.maxConnections,
    // @note Not past the request timeout unless asked: `serve --request-timeout 2000` alone was refused for a default the user never set (new-user trial).
    headersTimeoutMs: settings.headersTimeoutMs ?? Math.min(DEFAULT_HEADERS_TIMEOUT_MS, settings.requestTimeoutMs),
    requestTimeoutMs: settings.requestTimeoutMs,
  }
}
