/**
 * `createSandboxApp()`: the standalone sandbox. It never listens; the CLI (or a test) binds it.
 * Its `listener` hands API requests from Node's HTTP server straight to the core's pipeline (a
 * lean bridge: docs/decisions/0001), and everything else (admin API, demo page, 404s) to express;
 * `app` is the same as one express app, to mount in another. Every rule of the interface (auth,
 * bodies, validation, Prefer, faults, journal) is the core's; tenants live in the storage chosen
 * (memory, SQLite, Redis).
 */
import { monotonicNow } from '../core/clock.js'
import { existsSync } from 'node:fs'
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http'
import { join } from 'node:path'
import type { ErrorRequestHandler, Express, Request } from 'express'
import * as z from 'zod'
import {
  DEFAULT_DESCRIPTION_MAX_LENGTH,
  DEFAULT_JOURNAL_BYTES,
  DEFAULT_MAX_CATEGORIES,
  DEFAULT_NAME_MAX_LENGTH,
  unsafeListReason,
  type CategoryLimits,
} from '../core/limits.js'
import { ApiKey } from '../core/auth.js'
import { DEFAULT_MAX_BODY_BYTES } from '../pipeline/request-body.js'
import { PetstoreError } from '../errors.js'
import { MemoryStorage } from '../core/memory-storage.js'
import { seedState, type TenantStorage } from '../core/storage.js'
import { failureOf, Pipeline, UNEXPECTED } from '../pipeline/pipeline.js'
import { Latency, type Scenario } from '../scenario/scenario-format.js'
import { optionJudge, REDACT_ACCEPTED, RedactHeaders, RedactQueryParams } from '../petstore-options.js'
import { Redaction } from '../core/redaction.js'
import type { Tenant } from '../core/tenant.js'
import { loadScenario, loadScenarioFile, type ScenarioInput } from '../scenario/scenario-loader.js'
import { adminRoutes } from './admin-routes.js'
import { redisDeadlineFor, redisDelayLimit, withRedisDeadline } from './redis-connection.js'
import { apiBridge } from '../node-bridge/api-bridge.js'
import { Conversations, waitingBudgetFor } from './conversation.js'
import { cors, type CorsOrigins } from './cors.js'
import { loadExpress } from './load-express.js'
import { PACKAGE_ROOT } from './package-info.js'
import { openRedisStorage } from './redis-storage.js'
import { openSqliteStorage } from './sqlite-storage.js'
import { sendError, type AnswerSending } from '../node-bridge/http-errors.js'
import {
  createSandboxServer,
  DEFAULT_HEADERS_TIMEOUT_MS,
  DEFAULT_MAX_CONNECTIONS,
  DEFAULT_REQUEST_TIMEOUT_MS,
  type ServerLimits,
} from './http-server.js'
import { defaultMemoryBudget, MemoryBudget } from './memory-budget.js'
import { requestContext, type RequestLogEntry } from './request-context.js'
import { ScenarioCatalog } from './scenario-catalog.js'
import { ScenarioWatcher, startScenarioFile, type ScenarioReload, type WatchStatus } from './scenario-watcher.js'
import { MAX_UPSTREAM_ANSWER_BYTES, Upstream } from './upstream.js'
import { DEFAULT_EVICT_IDLE_MS, DEFAULT_MAX_TENANTS, DEV_API_KEY, TenantRegistry } from './tenant-registry.js'

/** @default 30 days without a write before a tenant is forgotten */
export const DEFAULT_TENANT_TTL_DAYS = 30
/**
 * What the tenants of a durable store (`dataDir`, `redisUrl`) may store together: 1 GiB of tenant
 * data as `stored-bytes.ts` counts it, about 760 tenants switched to `large-catalog` or 7 million
 * small categories.
 * @default 1073741824 (1 GiB)
 */
export const DEFAULT_STORE_BUDGET_BYTES = 1024 ** 3
/** How often idle tenants are looked for (or every TTL, when shorter). */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000

/** The path the API is served under. */
export const API_BASE_PATH = '/v1'
/** The path of the admin API and the demo page. */
export const ADMIN_BASE_PATH = '/__sandbox'

/** Options of {@link createSandboxApp}. */
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
   * With `redisUrl`, when Redis does not answer at start: `'refuse'` rejects (a wrong URL is said
   * at once); `'serve'` starts all the same, answering 503 `storage_unavailable` with `Retry-After`
   * (and health 503 `degraded`) until Redis answers, then serving as usual: what each worker of
   * `serve --workers` does, so that a worker started during an outage rides it out.
   * @default 'refuse'
   */
  redisUnreachableAtStart?: 'refuse' | 'serve'
  /**
   * Accept a Redis whose `maxmemory-policy` may evict keys (anything but `noeviction`): it
   * silently drops acknowledged writes when full. Without it such a Redis is refused at start.
   * @default false
   */
  redisAllowEviction?: boolean
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
   * a tenant: `stored-bytes.ts`), counted in the same step as each write (one script on Redis; not
   * enforced on a Redis Cluster, the operator is told); past it, creates, scenario switches and
   * new tenants' first writes get 503 `over_capacity` with `Retry-After`, while reads, resets and
   * deletes still work; so do writes that would take room kept for the tenants already holding
   * data (each keeps a floor of 256 KiB, or a 64th of a smaller budget, that other keys cannot
   * take). Counted again from the store at start. On Redis, journals have a budget of
   * their own of the same size. In memory, the memory budget bounds tenants' data instead. 0: no budget.
   * @note `stored-bytes.ts` is the one counting rule for every durable store, so that a Redis
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
  /** Time a client has to send its headers, in ms (then 408). Also what {@link SandboxApp.createServer} sets. @default 10000 */
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

/** What {@link createSandboxApp} returns. */
export interface SandboxApp {
  /**
   * The sandbox as a Node request listener, the fastest way to serve it: the API never goes
   * through express. Pass it to `http.createServer(listener)`.
   */
  readonly listener: RequestListener
  /**
   * The same sandbox as an express app, to mount in an app of your own or to `app.listen()`:
   * the same answers as `listener`, with express's cost on every API request. Built (and
   * express loaded) the first time it is read.
   */
  readonly app: Express
  /** The scenario new tenants start from. */
  readonly scenario: Scenario
  /** The keys accepted, or 'any'. Printed by the CLI at start; never logged per request. */
  readonly apiKeys: readonly string[] | 'any'
  readonly tenants: TenantRegistry
  /** Where tenants' state lives: in memory, or the data directory's SQLite database. */
  readonly storage: TenantStorage
  /** With `watch`: what is watched, when it last reloaded, and the edits refused; undefined without `watch`. */
  watchStatus(): WatchStatus | undefined
  /** Stops the idle-tenant sweep and the file watch, and closes the storage (releasing the data directory's lock). */
  close(): Promise<void>
  /** The limits in force, every default filled in (the CLI prints them). */
  readonly limits: SandboxLimits
  /**
   * A Node server for `listener` with the limits enforced: header and request timeouts (checked
   * often enough to hold), the connection cap, and Node's own error answers. It does not listen.
   * @example sandbox.createServer().listen(4010, '127.0.0.1')
   */
  createServer(): Server
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
    redisAllowEviction: z.boolean().default(false),
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
    headersTimeoutMs: z.int().min(1).default(DEFAULT_HEADERS_TIMEOUT_MS),
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
  .refine((options) => options.headersTimeoutMs <= options.requestTimeoutMs, {
    error: 'headersTimeoutMs must not be greater than requestTimeoutMs',
  })
  .superRefine((options, context) => {
    const unsafe = unsafeListReason(options)
    if (unsafe !== undefined) context.addIssue({ code: 'custom', message: unsafe, path: ['maxCategories'] })
  })
  .refine((options) => !(options.anyKey && options.apiKeys), { error: 'apiKeys and anyKey cannot be used together' })
  .refine((options) => !(options.adminToken && options.apiKeys?.includes(options.adminToken)), {
    error: 'adminToken must differ from every API key',
  })
  .refine((options) => !(options.dataDir && options.redisUrl), { error: 'dataDir and redisUrl cannot be used together: choose one store' })

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
  redisAllowEviction: 'true or false',
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

const parseSandboxOptions = optionJudge('sandbox', Options, ACCEPTED)

const PACKAGE_DEMO_DIR = join(PACKAGE_ROOT, 'demo')

/**
 * Builds the sandbox app. Throws {@link PetstoreError} for bad options or an unknown scenario.
 *
 * @example
 * const { listener } = await createSandboxApp({ apiKeys: ['k1', 'k2'] })
 * const server = http.createServer(listener).listen(4010, '127.0.0.1')
 */
export async function createSandboxApp(options: SandboxAppOptions = {}): Promise<SandboxApp> {
  const settings = parseSandboxOptions(options)
  const scenariosDir = settings.scenariosDir
  const input = (settings.scenario ?? 'default') as ScenarioInput
  // With `watch`, the start scenario's file is read here with the files it names, to watch them all.
  const startFile = settings.watch ? await startScenarioFile(input, scenariosDir) : undefined
  const startFiles = new Set<string>()
  const scenario = startFile === undefined ? await loadScenario(input, { scenariosDir }) : await loadScenarioFile(startFile, (path) => startFiles.add(path))
  if (settings.watch && startFile === undefined && scenariosDir === undefined) {
    throw new PetstoreError('invalid_option', `Invalid sandbox option watch: nothing to watch, the scenario ${typeof input === 'string' ? `"${input}" is built in` : 'is an object'}. Give a scenario file (scenario: './shop.json') or a scenariosDir`)
  }
  // @note In proxy mode the real service judges keys: each key has a tenant, for its journal.
  const apiKeys = settings.anyKey || settings.proxy !== undefined ? 'any' : (settings.apiKeys ?? scenario.apiKeys ?? [DEV_API_KEY])
  const catalog = new ScenarioCatalog(scenariosDir)
  if (settings.scenarioAllow !== undefined) {
    const known = await catalog.names()
    const unknown = settings.scenarioAllow.filter((name) => !known.includes(name))
    if (unknown.length > 0) {
      throw new PetstoreError('invalid_option', `Invalid sandbox option scenarioAllow: no scenario named ${unknown.map((name) => JSON.stringify(name)).join(', ')}. Known: ${known.join(', ')}`)
    }
  }
  const warn = settings.warn as SandboxAppOptions['warn']
  const seed = seedState(scenario)
  const ttlMs = settings.tenantTtlDays * 24 * 60 * 60 * 1000
  // 0 is no budget, as 0 means never for the other limits.
  const storeBudget = settings.storeBudgetBytes === 0 ? undefined : settings.storeBudgetBytes
  const storage: TenantStorage =
    settings.redisUrl !== undefined
      ? await openRedisStorage({
          url: settings.redisUrl,
          seed,
          ttlMs,
          prefix: settings.redisPrefix,
          warn,
          journalBytes: settings.journalBytes,
          unreachableAtStart: settings.redisUnreachableAtStart,
          allowEviction: settings.redisAllowEviction,
          storedBytesBudget: storeBudget,
        })
      : settings.dataDir === undefined
        ? new MemoryStorage(seed)
        : await openSqliteStorage({ dir: settings.dataDir, seed, warn, durability: settings.durability, budgetBytes: storeBudget, settleWaitMs: settings.requestTimeoutMs })
  // @note The scenarios a saved state may name are loaded now, so a tenant coming back from disk
  // finds its own (a tenant in memory only ever names one it switched to, kept in this map too).
  const known = new Map(storage.durable ? (await catalog.list()).map((entry) => [entry.name, entry]) : [])
  known.set(scenario.name, scenario)
  const limits: SandboxLimits = {
    nameMaxLength: settings.nameMaxLength,
    descriptionMaxLength: settings.descriptionMaxLength,
    maxCategories: settings.maxCategories,
    journalBytes: settings.journalBytes,
    memoryBudgetBytes: settings.memoryBudgetBytes ?? defaultMemoryBudget(),
    storeBudgetBytes: settings.storeBudgetBytes,
    maxBodyBytes: DEFAULT_MAX_BODY_BYTES,
    scenarioAllow: settings.scenarioAllow ?? 'any',
    maxConnections: settings.maxConnections,
    headersTimeoutMs: settings.headersTimeoutMs,
    requestTimeoutMs: settings.requestTimeoutMs,
  }
  // @note The budget reads the registry, which is built with the budget's check: a closure.
  const budget = new MemoryBudget({
    budgetBytes: limits.memoryBudgetBytes,
    heldBytes: () => tenants.heldBytes(),
    // Tenants still on their seed (readers) make room rather than lock every partner's writes out.
    relieve: () => tenants.relieve(limits.memoryBudgetBytes),
  })
  const admit = (work: 'grow' | 'read') => budget.admit(work)
  // Long answers made per request (a list read from SQLite or Redis, the admin state) count
  // against the budget while they are sent, each for its tenant (by id: a tenant dropped from
  // memory and opened again is still the same one), and a client that takes nothing of one for
  // the request timeout is let go (issue 20 F01, G4).
  const budgetOwner = (tenant: Tenant | undefined) => (tenant === undefined ? '' : (tenants.idOf(tenant) ?? ''))
  const reserve = (bytes: number, tenant: Tenant) => budget.reserveRead(bytes, budgetOwner(tenant))
  const sending: AnswerSending = { count: (bytes, tenant) => budget.holdAnswer(bytes, budgetOwner(tenant)), stallMs: limits.requestTimeoutMs }
  const tenants = new TenantRegistry({
    scenario,
    keys: apiKeys,
    adminToken: settings.adminToken,
    maxTenants: settings.maxTenants,
    evictIdleMs: settings.evictIdleMinutes * 60_000,
    overrides: { latency: settings.latency, journalBytes: limits.journalBytes, maxCategories: limits.maxCategories },
    storage,
    scenarioNamed: (name) => known.get(name),
    warn,
    admit,
  })
  const watcher = settings.watch
    ? new ScenarioWatcher({
        start: startFile === undefined ? undefined : { file: startFile, scenario, files: startFiles },
        scenariosDir,
        startName: scenario.name,
        apply: (reloaded) => {
          known.set(reloaded.name, reloaded)
          tenants.reload(reloaded)
        },
        report: (settings.onReload as SandboxAppOptions['onReload']) ?? ((reload) => reload.error !== undefined && warn?.(reload.message)),
      })
    : undefined
  await watcher?.start()
  const sweep = () =>
    void tenants.expireIdle(ttlMs).catch((error: unknown) => warn?.(`idle tenant sweep failed: ${error instanceof Error ? error.message : String(error)}`))
  if (ttlMs > 0) sweep()
  const sweeper = ttlMs > 0 ? setInterval(sweep, Math.min(ttlMs, SWEEP_INTERVAL_MS)) : undefined
  sweeper?.unref()
  const reportUnexpected = (error: unknown, where: string) =>
    warn?.(`unexpected error on ${where}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`)
  const redaction = new Redaction({ headers: settings.redactHeaders, queryParams: settings.redactQueryParams })
  // @note An answer of the real service is read whole (to be checked) and reserved like a list the sandbox makes.
  const upstream = settings.proxy === undefined ? undefined : new Upstream({ baseUrl: settings.proxy, maxAnswerBytes: MAX_UPSTREAM_ANSWER_BYTES })
  // On Redis, a delay leaves the request's Redis work one command timeout of its deadline.
  const maxDelayMs = settings.redisUrl === undefined ? limits.requestTimeoutMs : redisDelayLimit(limits.requestTimeoutMs)
  const pipeline = new Pipeline({
    tenants,
    redaction,
    strict: settings.strict,
    maxBodyBytes: limits.maxBodyBytes,
    limits,
    maxDelayMs,
    admit,
    reserve,
    mayGrow: () => budget.refusal('grow') === undefined,
    onUnexpectedError: (error, request) => reportUnexpected(error, `${request.method} ${request.path}`),
    proxy: upstream && { target: upstream, timeoutMs: limits.requestTimeoutMs },
  })

  // Everything but the API: the admin routes, the demo page, and Error bodies for the rest.
  // @note Built (and express loaded) on the first request that needs it, not at start: the API
  // answers without express, and loading it is most of a start's time (docs/decisions/0007).
  const startedAt = monotonicNow()
  const demoDir = settings.demoDir ?? (existsSync(PACKAGE_DEMO_DIR) ? PACKAGE_DEMO_DIR : false)
  let admin: Express | undefined
  const adminApp = (): Express => {
    if (admin !== undefined) return admin
    const express = loadExpress()
    const built = express()
    built.disable('x-powered-by')
    built.set('etag', false)
    built.use(
      ADMIN_BASE_PATH,
      adminRoutes({
        tenants,
        catalog,
        basePath: API_BASE_PATH,
        maxBodyBytes: limits.maxBodyBytes,
        startedAt,
        strict: settings.strict,
        limits,
        maxDelayMs,
        scenarioAllowed: (name) => limits.scenarioAllow === 'any' || limits.scenarioAllow.includes(name) || name === scenario.name,
        admit,
        sending,
        reserve,
        warn,
        publicUrl: settings.publicUrl,
        trustProxy: settings.trustProxy,
        proxy: settings.proxy,
        watchStatus: watcher && (() => watcher.status()),
      }),
    )
    if (demoDir !== false) {
      // `/__sandbox` is the demo page's folder: a person typing it without the slash gets there too.
      built.use((req, res, next) => {
        if (req.path !== ADMIN_BASE_PATH || (req.method !== 'GET' && req.method !== 'HEAD')) return next()
        const query = req.originalUrl.slice(req.originalUrl.indexOf('?') === -1 ? req.originalUrl.length : req.originalUrl.indexOf('?'))
        res.redirect(308, `${ADMIN_BASE_PATH}/${query}`)
      })
      built.use(ADMIN_BASE_PATH, express.static(demoDir, { index: 'index.html', redirect: false }))
    }
    built.use((req, res) => sendError(res, 'not_found', { what: `Path ${req.path}` }))
    built.use(errorHandler((error, req) => reportUnexpected(error, `${req.method} ${req.path}`)))
    admin = built
    return built
  }

  const context = requestContext(tenants, settings.log as SandboxAppOptions['log'], (error) => reportUnexpected(error, 'the request log'))
  const preflight = cors(settings.corsOrigins)
  // @note No body parser anywhere before the API: the core reads bodies itself (and judges them).
  const api = apiBridge(
    pipeline,
    API_BASE_PATH,
    (error, req) => reportUnexpected(error, `${req.method} ${redaction.url(req.url ?? '')}`),
    // The log line names the tenant the pipeline answered for, without judging the key again.
    (req, res, answer) => context.logWritten(req, res, answer?.tenant && tenants.idOf(answer.tenant)),
    sending,
  )
  /** What every request goes through first (once stamped); true when it was answered (or is being answered). */
  const front = (req: IncomingMessage, res: ServerResponse): boolean => {
    // CORS headers go on every answer; a preflight is answered at once.
    if (preflight(req, res)) {
      context.logWritten(req, res, undefined)
      return true
    }
    if (api(req, res)) return true
    context.logOnClose(req, res)
    return false
  }
  // On Redis, the Redis commands a request leads to end within its request timeout, however many
  // of them meet a failing Redis (redis-connection.ts).
  const within: <T>(task: () => T) => T =
    settings.redisUrl === undefined ? (task) => task() : (task) => withRedisDeadline(redisDeadlineFor(limits.requestTimeoutMs), task)
  // @note A request is stamped as it arrives (its log line times its wait too), then waits for
  // the requests ahead of it on its connection (conversation.ts); one whose connection is gone
  // first is logged as dropped.
  const dropped = (req: IncomingMessage, res: ServerResponse) => context.logWritten(req, res, undefined)
  // @note What waits on every connection is heap Node holds before any handler runs: it gets a
  // quarter of the memory budget (waitingBudgetFor), and the answer under way on a connection cut for pipelining
  // gets the request timeout (issue 20 attack 3 G2, G6).
  const conversations = new Conversations({ lastAnswerMs: limits.requestTimeoutMs, waitingBudgetBytes: waitingBudgetFor(limits.memoryBudgetBytes) })
  const serve = (req: IncomingMessage, res: ServerResponse) =>
    within(() => {
      if (!front(req, res)) adminApp()(req, res)
    })
  const listener: RequestListener = (req, res) => {
    if (conversations.closedForPipelining(req)) return
    context.stamp(req, res)
    conversations.inOrder(req, res, serve, dropped)
  }
  let app: Express | undefined
  const embeddable = (): Express => {
    if (app !== undefined) return app
    app = loadExpress()()
    app.disable('x-powered-by')
    app.use((req, res, next) => {
      if (conversations.closedForPipelining(req)) return
      context.stamp(req, res)
      conversations.inOrder(
        req,
        res,
        () =>
          within(() => {
            if (!front(req, res)) next()
          }),
        dropped,
      )
    })
    app.use(adminApp())
    return app
  }
  const close = async () => {
    clearInterval(sweeper)
    upstream?.close()
    watcher?.close()
    await storage.close()
  }
  // Requests the server refuses itself (too many connections, an unmet Expect, a malformed
  // request) are stamped and logged as every other.
  const createServer = () =>
    createSandboxServer(listener, limits, `${ADMIN_BASE_PATH}/health`, {
      stamp: (req, res) => {
        context.stamp(req, res)
        context.logOnClose(req, res)
      },
      logUnread: (requestId, status) => context.logUnread(requestId, status),
    })
  return {
    listener,
    get app() {
      return embeddable()
    },
    // The start scenario in its latest version (`watch`).
    get scenario() {
      return tenants.scenario
    },
    apiKeys,
    tenants,
    storage,
    watchStatus: () => watcher?.status(),
    close,
    limits,
    createServer,
  }
}

/**
 * Whatever reaches express's error path still answers an Error body, never express's HTML, and
 * never an exception's message (it may name a file path): that goes to `report`.
 */
function errorHandler(report: (error: unknown, req: Request) => void): ErrorRequestHandler {
  return (error: unknown, req, res, _next) => {
    const failed = failureOf(error)
    if (!failed.unexpected && failed.outcome.kind === 'error') {
      sendError(res, failed.outcome.code, failed.outcome.params, failed.headers)
      return
    }
    const status = typeof error === 'object' && error !== null && 'status' in error ? Number(error.status) : 500
    if (status >= 400 && status < 500) {
      sendError(res, 'not_found', { what: `Path ${req.path}` })
    } else {
      report(error, req)
      sendError(res, 'internal_error', { reason: UNEXPECTED })
    }
  }
}
