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
import { PetstoreError } from '../core/petstore-error.js'
import { MemoryStorage } from '../storage/memory-storage.js'
import { seedState, type TenantState, type TenantStorage } from '../storage/storage.js'
import { failureOf, Pipeline, UNEXPECTED } from '../pipeline/pipeline.js'
import type { Scenario } from '../contract/scenario-format.js'
import { Redaction } from '../core/redaction.js'
import type { Tenant } from '../storage/tenant.js'
import { checkScenariosDir, loadScenario, loadScenarioFile, type ScenarioInput } from '../scenario/scenario-loader.js'
import { adminRoutes } from './admin-routes.js'
import { redisDeadlineFor, redisDelayLimit, withRedisDeadline, type RedisEpoch } from '../storage/redis-connection.js'
import { apiBridge } from '../node-bridge/api-bridge.js'
import { Conversations, waitingBudgetFor } from './conversation.js'
import { cors, corsHeaders, corsHeadersFor, isPreflight } from './cors.js'
import { loadExpress } from './load-express.js'
import { PACKAGE_ROOT } from './package-info.js'
import { openRedisStorage } from '../storage/redis-storage.js'
import { openSqliteStorage } from '../storage/sqlite-storage.js'
import { sendError, type AnswerSending } from '../node-bridge/http-errors.js'
import { clientAddress, turnTickets } from '../node-bridge/node-request.js'
import { createSandboxServer } from './http-server.js'
import { MemoryBudget } from './memory-budget.js'
import { requestContext } from './request-context.js'
import { ScenarioCatalog } from './scenario-catalog.js'
import { parseSandboxOptions, sandboxLimits, type SandboxAppOptions, type SandboxLimits, type SandboxSettings } from './sandbox-options.js'
import { ScenarioWatcher, startScenarioFile, type WatchStatus } from './scenario-watcher.js'
import { MAX_UPSTREAM_ANSWER_BYTES } from '../pipeline/proxy.js'
import { Upstream } from './upstream.js'
import { DEV_API_KEY, TenantRegistry } from './tenant-registry.js'

/** How often idle tenants are looked for (or every TTL, when shorter). */
const SWEEP_INTERVAL_MS = 60 * 60 * 1000

/** The path the API is served under. */
export const API_BASE_PATH = '/v1'
/** The path of the admin API and the demo page. */
export const ADMIN_BASE_PATH = '/__sandbox'

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
  /** Stops the idle-tenant sweep and the file watch, and closes the storage (releasing the data directory's lock; on Redis, once the commands in flight are answered). */
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
  // A mistyped directory is refused at once, as the library does, not served from the built-ins.
  if (settings.scenariosDir !== undefined) checkScenariosDir(settings.scenariosDir)
  const start = await loadStartScenario(settings)
  const { scenario } = start
  // @note In proxy mode the real service judges keys: each key has a tenant, for its journal.
  const apiKeys = settings.anyKey || settings.proxy !== undefined ? 'any' : (settings.apiKeys ?? scenario.apiKeys ?? [DEV_API_KEY])
  const catalog = new ScenarioCatalog(settings.scenariosDir)
  await checkScenarioAllow(settings.scenarioAllow, catalog)
  const warn = settings.warn as SandboxAppOptions['warn']
  const ttlMs = settings.tenantTtlDays * 24 * 60 * 60 * 1000
  const storage = await openStorage(settings, seedState(scenario), ttlMs, warn)
  // @note The scenarios a saved state may name are loaded now, so a tenant coming back from disk
  // finds its own (a tenant in memory only ever names one it switched to, kept in this map too).
  const known = new Map(storage.durable ? (await catalog.list()).map((entry) => [entry.name, entry]) : [])
  known.set(scenario.name, scenario)
  // @note A tenant the store brings back into memory (evicted, or on Redis) takes its scenario by
  // name from here: kept as at start, one switched or reset onto an edited version came back with
  // the start's version (its pets, orders, latency and faults; trial41 R2's reset on Redis).
  if (storage.durable) catalog.onLoad = (loaded) => known.set(loaded.name, loaded)
  // The store budget the storage holds to (SQLite: less where its disk has not the room for the one given).
  const limits = { ...sandboxLimits(settings), storeBudgetBytes: storage.storeBudgetBytes ?? settings.storeBudgetBytes }
  const { tenants, admit, reserve, sending, mayGrow } = tenancy({ settings, scenario, apiKeys, storage, known, limits, warn })
  const watcher = scenarioWatcher(settings, start, known, tenants, warn)
  await watcher?.start()
  const sweeper = sweepIdleTenants(tenants, ttlMs, warn)
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
    // Lists of a store that reads them in pages (SQLite) go out as their clients take them.
    streams: true,
    mayGrow,
    onUnexpectedError: (error, request) => reportUnexpected(error, `${request.method} ${request.path}`),
    proxy: upstream && { target: upstream, timeoutMs: limits.requestTimeoutMs },
  })
  const adminApp = adminAppBuilder({
    settings,
    tenants,
    catalog,
    limits,
    maxDelayMs,
    startScenario: scenario.name,
    admit,
    sending,
    reserve,
    warn,
    watcher,
    reportUnexpected,
  })
  const { listener, context, embeddable } = requestHandling({ settings, tenants, pipeline, redaction, limits, sending, adminApp, reportUnexpected })
  const close = async () => {
    clearInterval(sweeper)
    upstream?.close()
    watcher?.close()
    await storage.close()
  }
  // Requests the server refuses itself (too many connections, an unmet Expect, a malformed
  // request) are stamped and logged as every other.
  const refusalCors = corsHeaders(settings.corsOrigins)
  const accepted = apiKeys === 'any' ? undefined : new Set([...apiKeys, ...(settings.adminToken === undefined ? [] : [settings.adminToken])])
  const createServer = () =>
    createSandboxServer(listener, limits, `${ADMIN_BASE_PATH}/health`, {
      accepts: accepted === undefined ? undefined : (token) => accepted.has(token),
      pastCap: isPreflight,
      warn,
      // With the CORS headers every answer has: a browser script can read the refusal (503, Retry-After).
      stamp: (req, res) => {
        context.stamp(req, res)
        refusalCors(req, res)
        context.logOnClose(req, res)
      },
      logUnread: (requestId, status) => context.logUnread(requestId, status),
      // Any origin allowed: the refusal allows it whether or not the bytes read hold the request's.
      corsOf: (origin) => corsHeadersFor(settings.corsOrigins, origin ?? (settings.corsOrigins === '*' ? '*' : undefined)),
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

/** The start scenario, and with `watch` the file it was read from and the files it names (to watch them all). */
interface StartScenario {
  readonly scenario: Scenario
  readonly file: string | undefined
  readonly files: Set<string>
}

/** Loads the scenario every tenant starts from; with `watch`, refuses one that has no file to watch. */
async function loadStartScenario(settings: SandboxSettings): Promise<StartScenario> {
  const scenariosDir = settings.scenariosDir
  const input = (settings.scenario ?? 'default') as ScenarioInput
  // With `watch`, the start scenario's file is read here with the files it names, to watch them all.
  const file = settings.watch ? await startScenarioFile(input, scenariosDir) : undefined
  const files = new Set<string>()
  const scenario = file === undefined ? await loadScenario(input, { scenariosDir }) : await loadScenarioFile(file, (path) => files.add(path))
  if (settings.watch && file === undefined && scenariosDir === undefined) {
    throw new PetstoreError('invalid_option', `Invalid sandbox option watch: nothing to watch, the scenario ${typeof input === 'string' ? `"${input}" is built in` : 'is an object'}. Give a scenario file (scenario: './shop.json') or a scenariosDir`)
  }
  return { scenario, file, files }
}

/** Refuses a `scenarioAllow` naming a scenario the sandbox does not know. */
async function checkScenarioAllow(allow: readonly string[] | undefined, catalog: ScenarioCatalog): Promise<void> {
  if (allow === undefined) return
  const known = await catalog.names()
  const unknown = allow.filter((name) => !known.includes(name))
  if (unknown.length > 0) {
    throw new PetstoreError('invalid_option', `Invalid sandbox option scenarioAllow: no scenario named ${unknown.map((name) => JSON.stringify(name)).join(', ')}. Known: ${known.join(', ')}`)
  }
}

/** Where the tenants live: Redis with `redisUrl`, SQLite with `dataDir`, else memory. */
async function openStorage(settings: SandboxSettings, seed: TenantState, ttlMs: number, warn: SandboxAppOptions['warn']): Promise<TenantStorage> {
  // 0 is no budget, as 0 means never for the other limits.
  const storeBudget = settings.storeBudgetBytes === 0 ? undefined : settings.storeBudgetBytes
  return settings.redisUrl !== undefined
    ? await openRedisStorage({
        url: settings.redisUrl,
        seed,
        ttlMs,
        prefix: settings.redisPrefix,
        warn,
        journalBytes: settings.journalBytes,
        unreachableAtStart: settings.redisUnreachableAtStart,
        allowEviction: settings.redisAllowEviction,
        allowFailoverLoss: settings.redisAllowFailoverLoss,
        replicas: settings.redisReplicas,
        epoch: settings.redisEpoch,
        replacing: settings.redisReplacing,
        onEpoch: settings.onRedisEpoch as ((epoch: RedisEpoch) => void) | undefined,
        storedBytesBudget: storeBudget,
      })
    : settings.dataDir === undefined
      ? new MemoryStorage(seed)
      : await openSqliteStorage({ dir: settings.dataDir, seed, warn, durability: settings.durability, budgetBytes: storeBudget, settleWaitMs: settings.requestTimeoutMs })
}

/** The tenants (one per key) and the memory budget they are held to, with what the request path asks of that budget. */
function tenancy(parts: {
  settings: SandboxSettings
  scenario: Scenario
  apiKeys: readonly string[] | 'any'
  storage: TenantStorage
  known: Map<string, Scenario>
  limits: SandboxLimits
  warn: SandboxAppOptions['warn']
}) {
  const { settings, limits } = parts
  // @note The budget reads the registry, which is built with the budget's check: a closure.
  const budget = new MemoryBudget({
    budgetBytes: limits.memoryBudgetBytes,
    heldBytes: () => tenants.heldBytes(),
    // Tenants still on their seed (readers) make room rather than lock every partner's writes out.
    relieve: (room) => tenants.relieve(limits.memoryBudgetBytes - room),
  })
  const admit = (work: 'grow' | 'read', growth?: number) => budget.admit(work, growth)
  // Long answers made per request (a list read from SQLite or Redis, the admin state) count
  // against the budget while they are sent, each for its tenant (by id: a tenant dropped from
  // memory and opened again is still the same one), and a client that takes nothing of one for
  // the request timeout is let go (issue 20 F01, G4). The admin's reads count for no tenant (''):
  // charged to a partner, an admin's unread read locked it out of its own lists (attack8 B3).
  const budgetOwner = (tenant: Tenant | undefined) => (tenant === undefined ? '' : (tenants.idOf(tenant) ?? ''))
  const reserve = (bytes: number, tenant: Tenant | undefined) => budget.reserveRead(bytes, budgetOwner(tenant))
  const sending: AnswerSending = { count: (bytes, tenant, progress) => budget.holdAnswer(bytes, budgetOwner(tenant), progress), stallMs: limits.requestTimeoutMs }
  const tenants = new TenantRegistry({
    scenario: parts.scenario,
    keys: parts.apiKeys,
    adminToken: settings.adminToken,
    maxTenants: settings.maxTenants,
    evictIdleMs: settings.evictIdleMinutes * 60_000,
    overrides: { latency: settings.latency, journalBytes: limits.journalBytes, maxCategories: limits.maxCategories },
    storage: parts.storage,
    scenarioNamed: (name) => parts.known.get(name),
    warn: parts.warn,
    admit,
  })
  return { tenants, admit, reserve, sending, mayGrow: () => budget.refusal('grow') === undefined }
}

/** With `watch`: the watcher that reloads the start scenario and `scenariosDir` into the tenants. */
function scenarioWatcher(
  settings: SandboxSettings,
  start: StartScenario,
  known: Map<string, Scenario>,
  tenants: TenantRegistry,
  warn: SandboxAppOptions['warn'],
): ScenarioWatcher | undefined {
  if (!settings.watch) return undefined
  return new ScenarioWatcher({
    start: start.file === undefined ? undefined : { file: start.file, scenario: start.scenario, files: start.files },
    scenariosDir: settings.scenariosDir,
    startName: start.scenario.name,
    apply: (reloaded) => {
      // @note In memory a tenant holds its scenario itself and is only ever read back on the start one: every file ever
      // saved in the directory kept here (fixtures and all), deleted ones too, filled the heap (attack47 F4).
      if (tenants.storage.durable || reloaded.name === start.scenario.name) known.set(reloaded.name, reloaded)
      tenants.reload(reloaded)
    },
    report: (settings.onReload as SandboxAppOptions['onReload']) ?? ((reload) => reload.error !== undefined && warn?.(reload.message)),
  })
}

/** Forgets tenants unused for `ttlMs`, now and then hourly (or every TTL, when shorter); none with 0. */
function sweepIdleTenants(tenants: TenantRegistry, ttlMs: number, warn: SandboxAppOptions['warn']): NodeJS.Timeout | undefined {
  if (ttlMs <= 0) return undefined
  const sweep = () =>
    void tenants.expireIdle(ttlMs).catch((error: unknown) => warn?.(`idle tenant sweep failed: ${error instanceof Error ? error.message : String(error)}`))
  sweep()
  const sweeper = setInterval(sweep, Math.min(ttlMs, SWEEP_INTERVAL_MS))
  sweeper.unref()
  return sweeper
}

/**
 * Everything but the API, as one express app: the admin routes, the demo page, and Error bodies
 * for the rest.
 * @note Built (and express loaded) on the first request that needs it, not at start: the API
 * answers without express, and loading it is most of a start's time (docs/decisions/0007).
 */
function adminAppBuilder(parts: {
  settings: SandboxSettings
  tenants: TenantRegistry
  catalog: ScenarioCatalog
  limits: SandboxLimits
  maxDelayMs: number
  startScenario: string
  admit: (work: 'grow' | 'read', growth?: number) => void
  sending: AnswerSending
  reserve: (bytes: number, tenant: Tenant | undefined) => () => void
  warn: SandboxAppOptions['warn']
  watcher: ScenarioWatcher | undefined
  reportUnexpected: (error: unknown, where: string) => void
}): () => Express {
  const { settings, limits, watcher, reportUnexpected } = parts
  const startedAt = monotonicNow()
  const demoDir = settings.demoDir ?? (existsSync(PACKAGE_DEMO_DIR) ? PACKAGE_DEMO_DIR : false)
  let admin: Express | undefined
  return (): Express => {
    if (admin !== undefined) return admin
    const express = loadExpress()
    const built = express()
    built.disable('x-powered-by')
    built.set('etag', false)
    built.use(
      ADMIN_BASE_PATH,
      adminRoutes({
        tenants: parts.tenants,
        catalog: parts.catalog,
        basePath: API_BASE_PATH,
        maxBodyBytes: limits.maxBodyBytes,
        startedAt,
        strict: settings.strict,
        limits,
        maxDelayMs: parts.maxDelayMs,
        scenarioAllowed: (name) => limits.scenarioAllow === 'any' || limits.scenarioAllow.includes(name) || name === parts.startScenario,
        admit: parts.admit,
        sending: parts.sending,
        reserve: parts.reserve,
        warn: parts.warn,
        publicUrl: settings.publicUrl,
        trustProxy: settings.trustProxy,
        proxy: settings.proxy,
        watchStatus: watcher && (() => watcher.status()),
        lastGood: watcher && ((name) => watcher.lastGood(name)),
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
    // @note A bare 404 for `GET /` left a new user guessing where the API is (trial38).
    built.use((req, res) => {
      const lost = !req.path.startsWith(`${API_BASE_PATH}/`) && !req.path.startsWith(`${ADMIN_BASE_PATH}/`)
      sendError(res, 'not_found', { what: `Path ${req.path}` }, {}, lost ? `the API is under ${API_BASE_PATH}/, the admin API and demo page under ${ADMIN_BASE_PATH}/` : undefined)
    })
    built.use(errorHandler((error, req) => reportUnexpected(error, `${req.method} ${req.path}`)))
    admin = built
    return built
  }
}

/**
 * The way in of every request: stamped and logged, answered in order on its connection, CORS
 * first, the API straight to the pipeline (no express, no body parser: the core reads bodies
 * itself), the rest to the admin app. As a Node listener, and as an express app to mount.
 */
function requestHandling(parts: {
  settings: SandboxSettings
  tenants: TenantRegistry
  pipeline: Pipeline
  redaction: Redaction
  limits: SandboxLimits
  sending: AnswerSending
  adminApp: () => Express
  reportUnexpected: (error: unknown, where: string) => void
}) {
  const { settings, tenants, limits, adminApp, reportUnexpected } = parts
  const context = requestContext(tenants, settings.log as SandboxAppOptions['log'], (error) => reportUnexpected(error, 'the request log'))
  const preflight = cors(settings.corsOrigins)
  // @note No body parser anywhere before the API: the core reads bodies itself (and judges them).
  const api = apiBridge(
    parts.pipeline,
    API_BASE_PATH,
    (error, req) => reportUnexpected(error, `${req.method} ${parts.redaction.url(req.url ?? '')}`),
    // The log line names the tenant the pipeline answered for, without judging the key again.
    (req, res, answer) => context.logWritten(req, res, answer?.tenant && tenants.idOf(answer.tenant)),
    parts.sending,
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
  // A body waits for its turn (event-loop-turns.ts) at most half the request timeout from here,
  // leaving the rest to its store: past it, 503 over_capacity, nothing handled. Turns go by the
  // client's address first (behind a trusted proxy, the one it saw).
  const turnWaitMs = limits.requestTimeoutMs / 2
  const serve = (req: IncomingMessage, res: ServerResponse) =>
    within(() => {
      turnTickets.set(req, { deadline: performance.now() + turnWaitMs, client: clientAddress(req, settings.trustProxy) })
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
  return { listener, context, embeddable }
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
