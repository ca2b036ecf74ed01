/**
 * The admin API under `/__sandbox/`. A caller acts on its own tenant with its API key, or on
 * any tenant with the admin token and `?tenant=<id>`. Errors are the error table's Error bodies.
 */
import { monotonicNow } from '../core/clock.js'
import * as z from 'zod'
import type { Request, Response, Router } from 'express'
import { buildOpenApiDocument } from '../contract/openapi.js'
import { authError, NOT_ACCEPTED, readBearer } from '../core/auth.js'
import type { JournalEntry, JournalFilter } from '../core/journal.js'
import { judgeJournalFilter, type FilterJudgement } from '../core/journal-filter.js'
import type { Work } from '../core/capacity.js'
import type { CategoryLimits } from '../contract/limits.js'
import { AnswerLimitError, judgeAnswerPlan, PlanBookFullError, type PendingAnswer } from '../core/planned-answers.js'
import type { Tenant } from '../storage/tenant.js'
import { seedState } from '../storage/storage.js'
import type { Scenario } from '../contract/scenario-format.js'
import { PetstoreError } from '../core/petstore-error.js'
import { jsonArrayPieces, readListCounted } from '../pipeline/categories.js'
import { sendError, writeJson, writePieces, type AnswerSending } from '../node-bridge/http-errors.js'
import { loadExpress } from './load-express.js'
import { PACKAGE } from './package-info.js'
import { PLAIN_HOST } from '../node-bridge/node-request.js'
import { readJsonObject } from '../node-bridge/read-json-body.js'
import { readNodeBody } from '../node-bridge/node-request.js'
import { bodyReservation } from '../pipeline/request-body.js'
import type { AnswerPieces } from '../pipeline/api-request.js'
import type { ErrorCode, ErrorParams } from '../contract/errors.js'
import { withoutPaths } from '../scenario/scenario-loader.js'
import { sameScenario, summarize, type ScenarioCatalog } from './scenario-catalog.js'
import type { WatchStatus } from './scenario-watcher.js'
import { DISPLAY_ID_LENGTH, tenantId, type TenantRegistry } from './tenant-registry.js'

export interface AdminRoutesOptions {
  readonly tenants: TenantRegistry
  readonly catalog: ScenarioCatalog
  /** Where the API lives, relative to the origin the caller used (`/v1`). */
  readonly basePath: string
  readonly maxBodyBytes: number
  /** When the server started, on the monotonic clock ({@link monotonicNow}): uptime never jumps with the machine's clock. */
  readonly startedAt: number
  /** Unknown fields of a NewCategory are refused (`--strict`): the served document says so. */
  readonly strict: boolean
  /** The lengths and counts the served OpenAPI document states. */
  readonly limits: CategoryLimits
  /** The longest delay a planned answer may ask for (ms): the API's longest `Prefer: delay`. */
  readonly maxDelayMs: number
  /** Whether tenants may switch to the scenario with this name. */
  readonly scenarioAllowed: (name: string) => boolean
  /** Throws `OverCapacityError` when there is no room for the work; `growth`: what it adds to what the tenants hold on the heap, when known (a scenario switch). */
  readonly admit: (work: Work, growth?: number) => void
  /** How a long answer (a tenant's state, its journal) is sent: counted, and for how long a client may take nothing of it. @default not counted, no limit */
  readonly sending?: AnswerSending | undefined
  /** Reserves what reading a tenant's whole list may take, before it is read (see `PipelineOptions.reserve`). @default not counted */
  readonly reserve?: ((bytes: number, tenant: Tenant | undefined) => () => void) | undefined
  /** Told what went wrong when a scenario cannot be loaded (the client is not: it may name a path). */
  readonly warn?: ((message: string) => void) | undefined
  /** Where the served document says the sandbox is (`https://sandbox.example/petstore`, no trailing slash), whoever asks. */
  readonly publicUrl?: string | undefined
  /** `X-Forwarded-Host` and `X-Forwarded-Proto` name the origin a client used (a proxy the operator trusts sets them). */
  readonly trustProxy: boolean
  /** Proxy mode: the real service's base URL. @default none */
  readonly proxy?: string | undefined
  /** With `watch`: the scenario files' state, shown by health. @default not watching */
  readonly watchStatus?: (() => WatchStatus) | undefined
  /** Under --watch: the last good version of a `--scenarios-dir` scenario the watch read (see ScenarioWatcher.lastGood). */
  readonly lastGood?: ((name: string) => Scenario | undefined) | undefined
}

/** Who called: a tenant through its own key, or the admin (optionally naming a tenant). */
type Caller = { readonly kind: 'tenant'; readonly id: string } | { readonly kind: 'admin'; readonly tenant: string | undefined }

type Handler = (req: Request, res: Response) => Promise<void> | void

/** What `Retry-After` says when the plan book is full: plans free up as requests use them. */
const PLAN_BOOK_RETRY_SECONDS = 1

/** `pieces` with `head` before them and `tail` after (an answer sent in pieces: see `writePieces`). */
function around(head: string, pieces: AnswerPieces, tail: string): AnswerPieces {
  let at: 'head' | 'pieces' | 'tail' | 'done' = 'head'
  return {
    next() {
      if (at === 'head') {
        at = 'pieces'
        return head
      }
      if (at === 'pieces') {
        const piece = pieces.next()
        if (piece !== undefined) return piece
        at = 'tail'
      }
      if (at === 'tail') {
        at = 'done'
        return tail
      }
      return undefined
    },
    close() {
      at = 'done'
      pieces.close()
    },
  }
}

/** Whether the client of `req` is gone (its connection reset, or closed both ways): an answer made now would go to nobody. */
const clientGone = (req: Request): boolean => req.socket.destroyed

/** The body of `PUT /__sandbox/scenario`: a scenario's name (other fields are ignored). */
const ScenarioSwitch = z.object({
  name: z.string({ error: 'name must be a non-empty string' }).regex(/\S/, { error: 'name must be a non-empty string' }),
})

/**
 * The body of `POST /__sandbox/reset`, when one is sent: `{ "scenario": "empty" }` resets onto
 * that scenario, `{ "initial": true }` onto the one the sandbox started with; `{}` reseeds the
 * scenario in use, as no body does.
 */
const ResetBody = z.strictObject(
  {
    scenario: z.string({ error: 'scenario must be a scenario name' }).regex(/\S/, { error: 'scenario must be a non-empty string' }).optional(),
    initial: z.literal(true, { error: 'initial must be true (back to the scenario the sandbox started with)' }).optional(),
  },
  { error: (issue) => (issue.code === 'unrecognized_keys' ? `${issue.keys.map((key) => JSON.stringify(key)).join(', ')} is not a field of the reset body; fields: scenario, initial` : undefined) },
)

type ResetBody = z.infer<typeof ResetBody>

/** A request body judged: what its route keeps of it, or the Error to answer. */
type Judged<T> = { readonly ok: true; readonly value: T } | { readonly ok: false; readonly code: ErrorCode; readonly params: ErrorParams }

/**
 * What switching `tenant` to `scenario` adds to what the tenants hold on the heap (below 0: it
 * gives memory back), for a store that holds its categories there; 0 for one that does not.
 */
function growthOf(tenant: Tenant, scenario: Scenario): number {
  const { store } = tenant
  return store.heldBytesFor === undefined ? 0 : store.heldBytesFor(scenario) - store.heldBytes
}

/** Whether a request carries a body (a length above 0, or a chunked one). */
function hasBody(req: Request): boolean {
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0')
}

/** The methods the admin routes answer (CORS preflights allow them). */
export const ADMIN_METHODS = ['GET', 'PUT', 'POST', 'DELETE'] as const
type AdminMethod = (typeof ADMIN_METHODS)[number]

/** The admin router: mount it at `/__sandbox`. */
export function adminRoutes(options: AdminRoutesOptions): Router {
  const { tenants, catalog } = options
  const router = loadExpress().Router({ strict: true })
  const openApi = buildOpenApiDocument({ strictBodies: options.strict, limits: options.limits })
  /** `res.json(value)`, a long answer sent in pieces and counted while it is (`writeJson`). */
  const sendCounted = (res: Response, value: unknown, tenant: Tenant | undefined) =>
    writeJson(res, 200, { 'content-type': 'application/json; charset=utf-8' }, JSON.stringify(value), options.sending, tenant)

  /** Runs a switch or reset admitted with `growth`, counted in what the tenants hold until it is done ({@link TenantRegistry.pledge}). */
  async function counted(growth: number, tenant: Tenant, write: () => Promise<unknown>): Promise<void> {
    const release = tenants.pledge(Math.max(0, growth), tenant)
    try {
      await write()
    } finally {
      release()
    }
  }

  /** Authenticates the caller; answers the error itself and returns undefined when it fails. */
  function authenticate(req: Request, res: Response): Caller | undefined {
    const auth = readBearer(req.headers.authorization ?? null)
    const requested = typeof req.query['tenant'] === 'string' ? req.query['tenant'] : undefined
    if (auth.ok && tenants.isAdminToken(auth.token)) return { kind: 'admin', tenant: requested }
    if (!auth.ok || !tenants.accepts(auth.token)) {
      const { code, params } = authError(auth.ok ? NOT_ACCEPTED : auth)
      sendError(res, code, params)
      return undefined
    }
    const id = tenantId(auth.token)
    if (req.query['tenant'] !== undefined && !(requested !== undefined && requested.length >= DISPLAY_ID_LENGTH && id.startsWith(requested))) {
      sendError(res, 'forbidden', { reason: '?tenant= names another tenant; only the admin token may do that' })
      return undefined
    }
    return { kind: 'tenant', id }
  }

  /**
   * The tenant a tenant route acts on, admitted when needed (a key's very first call may be an
   * admin one); answers the error itself when there is none.
   */
  async function tenantOf(caller: Caller, req: Request, res: Response): Promise<{ id: string; tenant: Tenant } | undefined> {
    const id = caller.kind === 'tenant' ? caller.id : await adminTarget(caller, req, res)
    if (id === undefined) return undefined
    const tenant = await tenants.open(id)
    // In use until its answer is written (or its client gone): it is not evicted meanwhile.
    if (res.closed) tenant.leave()
    else res.once('close', () => tenant.leave())
    return { id, tenant }
  }

  /** The full id the admin token names with `?tenant=` (a full id or a unique prefix); answers the error itself when none. */
  async function adminTarget(caller: Caller & { kind: 'admin' }, req: Request, res: Response): Promise<string | undefined> {
    if (caller.tenant === undefined) {
      if (req.query['tenant'] === undefined) sendError(res, 'tenant_required')
      else sendError(res, 'unknown_tenant', { tenant: JSON.stringify(req.query['tenant']) })
      return undefined
    }
    const id = await tenants.lookup(caller.tenant)
    if (id === undefined) sendError(res, 'unknown_tenant', { tenant: JSON.stringify(caller.tenant) })
    return id
  }

  /** A route acting on one tenant. */
  /**
   * Reads `req`'s body as a JSON object, the room it takes reserved for `payer` until its answer is
   * out, as the API's bodies are (twice its Content-Length, else twice the largest allowed): past
   * the memory budget it is read and dropped, and the budget's `OverCapacityError` thrown (503).
   * @note Bodies of `PUT /__sandbox/scenario`, `POST /__sandbox/reset` and `POST /__sandbox/answers`
   * were held whole, outside every budget: 600 keyed 1 MiB bodies took a sandbox capped at 1.4 GB
   * of address space down (attack21 B1).
   */
  async function readBody<T>(req: Request, res: Response, payer: Tenant | undefined, judge: (value: Record<string, unknown>) => Judged<T>): Promise<Judged<T>> {
    const reserve = options.reserve
    if (reserve !== undefined) {
      let release: () => void
      try {
        release = reserve(bodyReservation(req.headers['content-length'], options.maxBodyBytes), payer)
      } catch (error) {
        await readNodeBody(req, 0)
        throw error
      }
      if (res.closed) release()
      else res.once('close', release)
    }
    // @note Judged here, so that only what `judge` keeps outlives this call: a caller's local
    // holding the parsed body stayed reachable across its awaits (a scenario switch waiting on a
    // Redis replica), 1 MiB bodies of `[{},{},...]` each ~22 MB of heap (attack22 B2).
    const body = await readJsonObject(req, options.maxBodyBytes, payer)
    return body.ok ? judge(body.value) : body
  }

  const onTenant =
    (handle: (target: { id: string; tenant: Tenant; payer: Tenant | undefined }, req: Request, res: Response) => Promise<void> | void): Handler =>
    async (req, res) => {
      const caller = authenticate(req, res)
      const target = caller && (await tenantOf(caller, req, res))
      // A read is charged to who asked: the admin's to no tenant, never to the tenant it reads (attack8 B3).
      if (target) await handle({ ...target, payer: caller.kind === 'admin' ? undefined : target.tenant }, req, res)
    }

  /** Registers `methods` on `path`; other methods get 405 with `Allow`. */
  function route(path: string, methods: Partial<Record<Lowercase<AdminMethod>, Handler>>): void {
    const entry = router.route(path)
    for (const [method, handler] of Object.entries(methods)) entry[method as 'get'](handler)
    const allow = Object.keys(methods)
      .map((method) => method.toUpperCase())
      .join(', ')
    entry.all((req, res) =>
      sendError(res, 'method_not_allowed', { method: req.method, path: req.originalUrl.split('?', 1)[0]!, allow }, { Allow: allow }),
    )
  }

  route('/health', {
    get: async (_req, res) => {
      const storage = await tenants.storage.health()
      // @note Only whether storage works: its detail names paths, which stay in the operator's log.
      res.status(storage.ok ? 200 : 503).json({
        status: storage.ok ? 'ok' : 'degraded',
        version: PACKAGE.version,
        uptimeSeconds: Math.floor((monotonicNow() - options.startedAt) / 1000),
        storage: { kind: tenants.storage.kind, ok: storage.ok },
        // @note A refused edit is the scenario author's to fix, and the last good version serves:
        // it is said here, and the status stays 200 `ok` (a balancer must not drop a sandbox that serves).
        ...(options.watchStatus ? { watch: options.watchStatus() } : {}),
      })
    },
  })

  route('/openapi.json', {
    get: (req, res) => {
      const serverUrl = documentServerUrl(req, res, options)
      res.json({ ...openApi, servers: [{ url: serverUrl, description: 'petstore-sandbox' }] })
    },
  })

  route('/scenarios', {
    get: async (req, res) => {
      const caller = authenticate(req, res)
      if (!caller) return
      let active = tenants.scenario.name
      if (caller.kind === 'tenant' || caller.tenant !== undefined) {
        const target = await tenantOf(caller, req, res)
        if (!target) return
        active = target.tenant.scenario.name
      }
      const scenarios = await catalog.summaries()
      res.json(
        scenarios.map((scenario) => ({
          ...scenario,
          active: scenario.name === active,
          switchable: options.scenarioAllowed(scenario.name),
        })),
      )
    },
  })

  /** The names tenants may switch to, for an error's message: "none" when there is none. */
  async function allowedNames(): Promise<string> {
    return (await catalog.names()).filter(options.scenarioAllowed).join(', ') || 'none'
  }

  /** The scenario named `name`, when tenants may switch to it; answers the error itself when not. */
  async function switchable(name: string, where: string, res: Response): Promise<Scenario | undefined> {
    if (!options.scenarioAllowed(name)) {
      sendError(res, 'scenario_not_allowed', { name: JSON.stringify(name), allowed: await allowedNames() })
      return undefined
    }
    // @note Under --watch, the start scenario by its name is the one the watcher holds: read from its file here, a switch
    // made while the file was being saved took a version the watcher had not (yet, or any more), and the tenant kept
    // its own copy of that seed for good (attack59 F5: 30 of 30 tenants on Redis).
    if (options.watchStatus !== undefined && name === tenants.scenario.name) return tenants.scenario
    const scenario = await loaded(name, where, res)
    if (scenario === null) sendError(res, 'unknown_scenario', { name: JSON.stringify(name), known: await allowedNames() })
    return scenario ? sameScenario(scenario, tenants.scenario) : undefined
  }

  /** The scenario named `name` as its files are now; null when there is none, undefined when it is broken (answered). */
  async function loaded(name: string, where: string, res: Response): Promise<Scenario | null | undefined> {
    try {
      return (await catalog.load(name)) ?? null
    } catch (error) {
      if (!(error instanceof PetstoreError)) throw error
      // @note Under --watch a broken file serves its last good version, as a broken save promises: read while an editor
      // saved it in place (truncated, then written), a switch or reset answered 500 invalid_scenario (attack65 F2: 45
      // of 1,262 on SQLite, 97 of 1,981 in memory). The watch has said the save's error (log, health) if it lasts.
      const kept = options.lastGood?.(name)
      if (kept !== undefined) return kept
      // @note The loader's message names the file by its path: the operator gets it, the client
      // gets the file's name alone.
      // @note Answered `internal_error` ("Internal error: …"), a user's broken file read as a fault
      // of the sandbox (trial41 R3).
      options.warn?.(`${where}: ${error.message}`)
      sendError(res, 'invalid_scenario', { reason: withoutPaths(error.message, error.paths) })
      return undefined
    }
  }

  route('/scenario', {
    put: onTenant(async ({ tenant, payer }, req, res) => {
      const body = await readBody(req, res, payer, (value): Judged<string> => {
        if (!Object.hasOwn(value, 'name')) return { ok: false, code: 'missing_field', params: { field: 'name' } }
        const parsed = ScenarioSwitch.safeParse(value)
        if (!parsed.success) return { ok: false, code: 'invalid_field', params: { reason: parsed.error.issues[0]?.message ?? 'name must be a non-empty string' } }
        return { ok: true, value: parsed.data.name }
      })
      if (!body.ok) return sendError(res, body.code, body.params)
      const scenario = await switchable(body.value, 'PUT /__sandbox/scenario', res)
      if (!scenario) return
      const growth = growthOf(tenant, scenario)
      options.admit('grow', growth)
      await counted(growth, tenant, () => tenant.useScenario(scenario))
      res.json({ scenario: summarize(scenario) })
    }),
  })

  route('/reset', {
    post: onTenant(async ({ tenant, payer }, req, res) => {
      // @note No body (as before): the scenario in use, reseeded as its files are now. A body may name another, or the initial one.
      // @note Its own scenario as it is now: the start one's latest version for a tenant on it (one a --watch save left
      // stale keeps the old version until its next request; reset onto that, it became a writer of the old seed).
      const current = () => (tenant.scenario.name === tenants.scenario.name ? tenants.scenario : tenant.scenario)
      let scenario = current()
      let growth = 0
      // @note Its store holds a scenario not known when it was read back (its file broken or gone at a restart): looked
      // up again by that name. Reset onto the start scenario it stood in for, its data and chosen scenario were wiped
      // onto `default`, and kept there once the file was fixed (attack50 F4).
      const own = async (): Promise<Scenario | undefined> => {
        const unknown = tenant.unknownScenario!
        const read = await loaded(unknown, 'POST /__sandbox/reset', res)
        if (read === undefined) return undefined
        if (read === null) {
          sendError(res, 'unknown_scenario', { name: `${JSON.stringify(unknown)} (the tenant's own, whose file is gone; reset onto another with {"scenario": …} or {"initial": true})`, known: await allowedNames() })
          return undefined
        }
        return sameScenario(read, tenants.scenario)
      }
      if (!hasBody(req) && tenant.unknownScenario !== undefined) {
        const found = await own()
        if (found === undefined) return
        scenario = found
        growth = growthOf(tenant, scenario)
        options.admit('grow', growth)
      } else if (!hasBody(req) && scenario !== tenants.scenario) {
        // @note Reseeded from the version loaded at the last switch, an edit of the scenario's file or
        // fixture was not picked up by a reset, only by a switch (trial41 R2). A scenario no longer
        // listed (its file deleted) is reseeded as the tenant holds it.
        const read = await loaded(scenario.name, 'POST /__sandbox/reset', res)
        if (read === undefined) return
        const now = read && sameScenario(read, tenants.scenario)
        if (now !== null && now !== scenario) {
          growth = growthOf(tenant, now)
          options.admit('grow', growth)
          scenario = now
        }
      }
      if (hasBody(req)) {
        const body = await readBody(req, res, payer, (value): Judged<ResetBody> => {
          const parsed = ResetBody.safeParse(value)
          // Each message names its field.
          if (!parsed.success) return { ok: false, code: 'invalid_field', params: { reason: parsed.error.issues.map((issue) => issue.message).join('; ') } }
          return { ok: true, value: parsed.data }
        })
        if (!body.ok) return sendError(res, body.code, body.params)
        // @note Read again once the body is in: the one read before it, a --watch edit landing while the body came put a
        // tenant that never wrote back on the old version, taken for a writer for good (attack53 F1).
        scenario = current()
        const { scenario: name, initial } = body.value
        if (name !== undefined && initial === true) return sendError(res, 'invalid_field', { reason: 'give scenario or initial, not both' })
        if (initial === true) scenario = tenants.scenario
        // A body naming nothing (`{}`) resets onto its own, as no body does (review44 F4).
        if (name === undefined && initial !== true && tenant.unknownScenario !== undefined) {
          const found = await own()
          if (found === undefined) return
          scenario = found
        }
        if (name !== undefined) {
          const named = await switchable(name, 'POST /__sandbox/reset', res)
          if (!named) return
          scenario = named
        }
        if (scenario !== tenant.scenario) {
          growth = growthOf(tenant, scenario)
          options.admit('grow', growth)
        }
      }
      // @note Onto its own scenario, what the seed holds more than the tenant now: after a --watch edit made the start
      // seed larger, writers' resets built it unadmitted (review43 R4).
      // (Its own scenario's latest version too: a stale tenant's, review47/attack58.)
      if (growth === 0 && growthOf(tenant, scenario) > 0) {
        growth = growthOf(tenant, scenario)
        options.admit('grow', growth)
      }
      await counted(growth, tenant, () => tenant.resetTo(scenario))
      // @note Applied: the answer says so whatever the count's read meets. Read after the reset, a read that failed (Redis
      // refusing for a second, paused) answered 503 storage_unavailable, "not applied", for a reset applied: the client
      // kept believing in categories gone, their ids handed out again (attack66 F1). It is then what the reset made.
      const categories = await tenant.store.countCategories().catch(() => seedState(tenant.scenario).categories.length)
      res.json({ scenario: summarize(tenant.scenario), categories })
    }),
  })

  route('/answers', {
    get: onTenant(async ({ tenant }, _req, res) => {
      res.json(await tenant.answers.pending())
    }),
    post: onTenant(async ({ tenant, payer }, req, res) => {
      const judged = await readBody(req, res, payer, (value): Judged<PendingAnswer> => {
        const plan = judgeAnswerPlan(value, options.maxDelayMs)
        return plan.ok ? plan : { ok: false, code: 'invalid_field', params: { reason: plan.reason } }
      })
      if (!judged.ok) return sendError(res, judged.code, judged.params)
      // New state, refused over the memory budget as other growth; plans themselves are bounded by the plan book, not counted in it.
      options.admit('grow')
      try {
        await tenant.answers.plan(judged.value)
      } catch (error) {
        if (error instanceof PlanBookFullError) {
          res.setHeader('Retry-After', String(PLAN_BOOK_RETRY_SECONDS))
          return sendError(res, 'plan_book_full', { max: error.limit, retryAfter: PLAN_BOOK_RETRY_SECONDS })
        }
        if (!(error instanceof AnswerLimitError)) throw error
        return sendError(res, 'answer_limit', { max: error.limit })
      }
      res.status(201).json(judged.value)
    }),
    delete: onTenant(async ({ tenant }, _req, res) => {
      await tenant.answers.clear()
      res.status(204).end()
    }),
  })

  route('/requests', {
    get: onTenant(async ({ tenant, payer }, req, res) => {
      const judged = filterFromQuery(req.query, options.basePath)
      if (!judged.ok) return sendError(res, 'invalid_query', { name: judged.problem.field, reason: judged.problem.reason })
      const filter = judged.filter as JournalFilter
      sendCounted(res, await tenant.journal.all(filter), payer)
    }),
    delete: onTenant(async ({ tenant }, _req, res) => {
      await tenant.journal.clear()
      res.status(204).end()
    }),
  })

  route('/violations', {
    get: onTenant(async ({ tenant, payer }, _req, res) => {
      sendCounted(res, violationSummary(await tenant.journal.all(), options.proxy), payer)
    }),
  })

  route('/state', {
    get: onTenant(async ({ id, tenant, payer }, req, res) => {
      await tenant.ready
      // @note Not made for a client gone (its connection reset or closed), looked at once the event loop has read what
      // came meanwhile (a reset waiting behind the states made before): made whole for nobody, one after another, a key's
      // clients sending and resetting at once left the server dark 45-55 s (attack80 F1).
      await new Promise((resolve) => setImmediate(resolve))
      if (clientGone(req)) return
      // @note The state holds the tenant's whole list, read per request: as the API's list, its
      // worst case is reserved before it is read (issue 20 F01).
      options.admit('read')
      const journalSize = await tenant.journal.count()
      // @note A store that reads its list in pages (SQLite) has the state sent as its client takes it, as its list is:
      // made whole, a state of 7.8 MB held the event loop 0.5-1 s (44.5 MB: ~3 s), and one key's clients reading theirs
      // in a loop held every other key's requests 45-250 times as long (attack80 F2).
      if (tenant.store.streamCategories !== undefined) {
        const categories = jsonArrayPieces(await tenant.store.streamCategories())
        if (clientGone(req)) return categories.close()
        // @note Its scenario, pets and orders read as the categories' read begins, as the state made whole reads them
        // once its categories are read: read before that read's wait, a switch under way meanwhile showed `empty`
        // with 10,000 categories (attack83 F1: 9 of 30 states mixed).
        const head = `${JSON.stringify({ tenant: id, scenario: summarize(tenant.scenario) }).slice(0, -1)},"categories":`
        const tail = `,${JSON.stringify({ pets: tenant.listPets(), orders: tenant.listOrders(), journalSize }).slice(1)}`
        writePieces(res, 200, { 'content-type': 'application/json; charset=utf-8' }, around(head, categories, tail), options.sending?.stallMs, payer ?? tenant)
        return
      }
      const reserve = options.reserve
      const { categories, release } = await readListCounted(tenant.store, options.limits, reserve && ((bytes) => reserve(bytes, payer)))
      try {
        if (clientGone(req)) return
        // Made and counted as it is sent before the reservation goes: no uncounted gap.
        sendCounted(res, { tenant: id, scenario: summarize(tenant.scenario), categories, pets: tenant.listPets(), orders: tenant.listOrders(), journalSize }, payer)
      } finally {
        release?.()
      }
    }),
  })

  route('/tenants', {
    get: async (req, res) => {
      const caller = authenticate(req, res)
      if (!caller) return
      if (caller.kind !== 'admin') {
        return sendError(res, 'forbidden', { reason: 'listing tenants needs the admin token' })
      }
      res.json(await tenants.list())
    },
  })

  route('/tenants/:id', {
    delete: async (req, res) => {
      const caller = authenticate(req, res)
      if (!caller) return
      if (caller.kind !== 'admin') {
        return sendError(res, 'forbidden', { reason: 'deleting a tenant needs the admin token' })
      }
      const given = String(req.params['id'])
      const id = await tenants.lookup(given)
      if (id === undefined || !(await tenants.delete(id))) return sendError(res, 'unknown_tenant', { tenant: JSON.stringify(given) })
      res.status(204).end()
    },
  })

  return router
}

/**
 * The served document's first server, the API's base URL: the configured public URL when there
 * is one (taken as the API's base when it already ends with the base path, `https://x/v1`, else
 * as the sandbox's root); behind a proxy the operator trusts, the origin the proxy says the client
 * used (`X-Forwarded-Proto`, `X-Forwarded-Host`); else the address and port the client's
 * connection reached, which no header can change (issue 22: a `Host: evil.example:9999` was
 * served as the document's server).
 * @note A document built from the connection or a proxy's headers can differ per client:
 * `Cache-Control: private` keeps a shared cache from handing one client's document to another
 * (issue 20 F14), and `Vary` names the headers it was built from.
 * @note Behind a proxy that is not trusted, or in a container whose port is mapped, the address
 * reached is the proxy's or the container's own: `--public-url` is the way to name the outside one.
 */
function documentServerUrl(req: Request, res: Response, { publicUrl, trustProxy, basePath }: Pick<AdminRoutesOptions, 'publicUrl' | 'trustProxy' | 'basePath'>): string {
  if (publicUrl !== undefined) {
    res.setHeader('Cache-Control', 'no-cache')
    return publicUrl.endsWith(basePath) ? publicUrl : `${publicUrl}${basePath}`
  }
  res.setHeader('Cache-Control', 'private, no-cache')
  const socket = req.socket as Request['socket'] & { encrypted?: boolean }
  let protocol = socket.encrypted === true ? 'https' : 'http'
  if (trustProxy) {
    res.vary('X-Forwarded-Host')
    res.vary('X-Forwarded-Proto')
    const forwardedProto = lastValue(req.headers['x-forwarded-proto'])?.toLowerCase()
    const forwardedHost = lastValue(req.headers['x-forwarded-host'])
    if (forwardedProto === 'https' || forwardedProto === 'http') protocol = forwardedProto
    if (forwardedHost !== undefined && PLAIN_HOST.test(forwardedHost)) return `${protocol}://${forwardedHost}${basePath}`
  }
  return `${protocol}://${addressInUrl(socket.localAddress)}:${socket.localPort ?? 80}${basePath}`
}

/**
 * The last value of a header a proxy may have appended to: the one the nearest proxy, the one the
 * operator trusts, wrote (a client's own value comes first).
 */
function lastValue(header: string | string[] | undefined): string | undefined {
  const value = Array.isArray(header) ? header.at(-1) : header
  return value?.split(',').at(-1)?.trim()
}

/** An IP address as a URL's host: IPv4 (also when mapped into IPv6) as is, IPv6 in brackets, its zone escaped. */
function addressInUrl(address: string | undefined): string {
  if (address === undefined) return 'localhost'
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return mapped[1]!
  return address.includes(':') ? `[${address.replace('%', '%25')}]` : address
}

/**
 * The journal filter of `GET /__sandbox/requests`' query, judged by the journal's rule: one value
 * per parameter, `status` as digits, `tenant` the admin's (every other name is refused).
 */
function filterFromQuery(query: Request['query'], basePath: string): FilterJudgement<Record<string, unknown>> {
  // @note No prototype: `?__proto__=x` set `{}`'s prototype, no field, and the whole journal was answered where any other
  // unknown name is 400 (attack73 F2).
  const fields: Record<string, unknown> = Object.create(null) as Record<string, unknown>
  for (const [name, value] of Object.entries(query)) {
    if (name === 'tenant') continue
    if (typeof value !== 'string') return { ok: false, problem: { field: name, reason: 'one value' } }
    fields[name] = name === 'status' && /^\d{1,3}$/.test(value) ? Number(value) : value
  }
  const judged = judgeJournalFilter(fields, [basePath])
  if (!judged.ok && judged.problem.field === 'status' && typeof fields['status'] === 'string') {
    return { ok: false, problem: { field: 'status', reason: `an HTTP status (100-599), got ${JSON.stringify(fields['status'].slice(0, 50))}` } }
  }
  return judged
}

/** What `GET /__sandbox/violations` answers: the tenant's journal, summed up by violation. */
interface ViolationSummary {
  /** The real service's base URL in proxy mode; null when the sandbox answers from its own data. */
  readonly proxy: string | null
  /** Requests in the journal (what was checked, as far as the journal still holds). */
  readonly exchanges: number
  /** Those whose exchange departed from the contract. */
  readonly violating: number
  /** Each violation once, most frequent first: where, how often, and the newest request it was seen in. */
  readonly violations: readonly { operation: string | null; violation: string; count: number; lastSeen: string; lastRequestId?: string }[]
}

/**
 * Sums a journal up by violation: the same sentence on the same operation is one row. Read from
 * the journal, so every replica sharing a journal (Redis) shows the same summary, and clearing
 * the journal clears it.
 */
function violationSummary(entries: readonly JournalEntry[], proxy: string | undefined): ViolationSummary {
  const rows = new Map<string, { operation: string | null; violation: string; count: number; lastSeen: string; lastRequestId?: string }>()
  let violating = 0
  for (const entry of entries) {
    if (entry.violations === undefined || entry.violations.length === 0) continue
    violating++
    for (const violation of entry.violations) {
      const key = `${entry.operation ?? ''}\n${violation}`
      const row = rows.get(key) ?? { operation: entry.operation, violation, count: 0, lastSeen: entry.time }
      row.count++
      row.lastSeen = entry.time
      if (entry.requestId !== undefined) row.lastRequestId = entry.requestId
      rows.set(key, row)
    }
  }
  const violations = [...rows.values()].sort((a, b) => b.count - a.count || (a.lastSeen < b.lastSeen ? 1 : -1))
  return { proxy: proxy ?? null, exchanges: entries.length, violating, violations }
}
