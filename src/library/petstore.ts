/** `createPetstore()`: one isolated, stateful Petstore and the msw handlers that serve it. */
import type { HttpHandler } from 'msw'
import { apiError, type ErrorCode } from '../contract/errors.js'
import type { Category, NewCategory, Order, Pet } from '../contract/schemas.js'
import { KeyRing } from '../core/auth.js'
import type { JournalFilter, RequestJournal } from '../core/journal.js'
import type { JournalEntryOf } from '../core/journal-entry-types.js'
import type { OperationId } from '../contract/operations.js'
import { basePathOf, judgeJournalFilter } from '../core/journal-filter.js'
import { matchExtrasProblem, MATCH_FIELDS, type JournalMatch } from '../core/journal-match.js'
import { DEFAULT_WAIT_TIMEOUT, waitForEntry, type WaitForOptions } from '../core/journal-wait.js'
import { CategoryLimitError } from '../storage/memory-store.js'
import type { PetstoreStore } from '../storage/memory-store.js'
import { AnswerLimitError, type AnswerQueue, judgeAnswerPlan, type AnswerPlan, type PendingAnswer } from '../core/planned-answers.js'
import { Tenant } from '../storage/tenant.js'
import { describeValue, PetstoreError, type PetstoreErrorCode } from '../core/petstore-error.js'
import { validateNewCategory } from '../pipeline/categories.js'
import { createHandlers } from '../msw/create-handlers.js'
import { Pipeline } from '../pipeline/pipeline.js'
import { DEFAULT_MAX_DELAY_MS } from '../pipeline/prefer.js'
import { type Faults, type Latency, type Scenario, type SeedData } from '../contract/scenario-format.js'
import { checkScenarioInput, checkScenariosDir, loadScenario, seedScenario, type ScenarioInput } from '../scenario/scenario-loader.js'
import { parseOptions } from './petstore-options.js'
import { Redaction } from '../core/redaction.js'

/** Options of {@link createPetstore}. */
export interface PetstoreOptions {
  /**
   * Where the API lives: one base URL or several (production and staging). `*` matches any
   * origin, which is what tests usually want. A path (`/v1`) means the page's own origin: in a
   * browser (and jsdom) it is resolved against `location.origin`; in Node.js it is refused.
   * @default '*\/v1'
   */
  baseUrl?: string | readonly string[]
  /**
   * Accepted bearer keys, or `'any'` for every non-empty key.
   * @default the scenario's `apiKeys`, else 'any'
   */
  apiKeys?: readonly string[] | 'any'
  /**
   * A built-in scenario name (`default`, `empty`, `large-catalog`, `flaky`, `after-sunset`),
   * a name in `scenariosDir`, a path to a scenario `.json` file (Node.js only), or a scenario object.
   * @default 'default'
   */
  scenario?: ScenarioInput
  /** A directory searched for `<name>.json` before the built-in scenarios (Node.js only). */
  scenariosDir?: string
  /**
   * Delay before every answer, in ms, fixed or `{ min, max }`; wins over the scenario's.
   * @default the scenario's, which is 0 for the built-ins except `flaky`
   */
  latency?: Latency
  /** Simulated failures, or `false` to switch off the scenario's. @default the scenario's */
  faults?: Faults | false
  /** Answer 410 Gone on the deprecated pet operation. @default the scenario's, else false */
  afterSunset?: boolean
  /** Refuse unknown fields in a NewCategory with 400 instead of ignoring them. @default false */
  strict?: boolean
  /** The largest request body accepted; larger ones get 413. @default 1048576 (1 MiB) */
  maxBodyBytes?: number
  /** How many requests the journal keeps, newest last. @default 1000 */
  journalLimit?: number
  /** What the journal may hold, in heap bytes (bodies, headers, URLs), before its oldest entries go. @default 1048576 (1 MiB) */
  journalBytes?: number
  /** The longest category name accepted, in characters; longer ones get 400 `invalid_field`. @default 200 */
  nameMaxLength?: number
  /** The longest category description accepted, in characters. @default 2000 */
  descriptionMaxLength?: number
  /** Categories the store may hold; a create beyond gets 409 `category_limit`. @default no limit */
  maxCategories?: number
  /**
   * Request headers whose values the journal shows as `[redacted]`, beyond the default list and
   * pattern (`DEFAULT_REDACTED_HEADERS`, `CREDENTIAL_NAME_PATTERN`).
   * @default none beyond the defaults
   * @example createPetstore({ redactHeaders: ['x-partner-secret'] })
   */
  redactHeaders?: readonly string[]
  /**
   * Query parameters whose values the journal's URLs show as `[redacted]`, beyond the default
   * list and pattern (`DEFAULT_REDACTED_QUERY_PARAMS`, `CREDENTIAL_NAME_PATTERN`).
   * @default none beyond the defaults
   */
  redactQueryParams?: readonly string[]
}

/** Options of {@link Petstore.reset}. */
export interface ResetOptions {
  /**
   * Reseed the scenario in use (switched with `useScenario`) rather than the one the petstore
   * was created with.
   * @default false
   */
  keepScenario?: boolean
}

/** A stateful Petstore: its handlers, its data, its journal. */
export interface Petstore {
  /** msw handlers to pass to the caller's `setupServer(...)` or `setupWorker(...)`. */
  readonly handlers: HttpHandler[]
  /** Settles once the current scenario's seed is in the store. */
  readonly ready: Promise<void>
  /** The scenario in use. */
  readonly scenario: Scenario
  /** Switches scenario and reseeds from it (the journal is kept); `reset()` still returns to the baseline. */
  useScenario(scenario: ScenarioInput): Promise<void>
  /**
   * Switches scenario, as `useScenario` does, and makes it the baseline: what `reset()` returns
   * to, for the tests of one file. Resolves to a function that puts the previous baseline back
   * and resets to it; Vitest calls it after the file when `beforeAll` returns it (Jest gives each
   * file its own modules, so its files need no way back).
   *
   * @example
   * beforeAll(() => petstore.useBaseline('empty')) // the shared setup's afterEach(reset) keeps it
   */
  useBaseline(scenario: ScenarioInput): Promise<() => Promise<void>>
  /**
   * Replaces the collections named (categories, pets, orders) for this test, on the scenario in
   * use: the others stay, as do its keys, latency and faults. Records are judged as a scenario's
   * seed (ids kept or numbered from 1, a create gets the next); `reset()` undoes it. To add a
   * category to the scenario's, use `categories.create()` instead.
   *
   * @example
   * await petstore.seed({ categories: [{ name: 'Ferrets' }] }) // the list now holds only Ferrets, id 1
   */
  seed(data: SeedData): Promise<void>
  /**
   * Back to the baseline, as msw's `resetHandlers()` returns to the initial handlers: the
   * scenario the petstore was created with (or the one `useBaseline` set), its seed, ids from the
   * start, the fault sequence from its seed, and an empty journal. `reset({ keepScenario: true })`
   * reseeds the scenario in use instead. Either undoes `seed()`.
   */
  reset(options?: ResetOptions): Promise<void>
  /** The categories of the store, read and written directly. */
  readonly categories: {
    /** All categories in creation order. */
    list(): Promise<Category[]>
    /** Stores a category as `POST /categories` would; throws {@link PetstoreError} when invalid. */
    create(input: NewCategory): Promise<Category>
  }
  /** The scenario's pets (read-only). */
  readonly pets: {
    /** All pets of the scenario. */
    list(): Promise<Pet[]>
    /** The pet with this id, or undefined. */
    get(id: number): Promise<Pet | undefined>
  }
  /** The scenario's orders (read-only). */
  readonly orders: {
    /** All orders of the scenario. */
    list(): Promise<Order[]>
  }
  /**
   * Answers planned for the next requests of an operation: an error status (the contract's Error
   * body), a dropped connection, a delay. A request with an accepted key takes the oldest plan of
   * its operation before `Prefer` and faults; `reset()` drops what is left.
   * @example petstore.answers.next({ operation: 'listCategories', status: 401, times: 2 })
   */
  readonly answers: {
    /**
     * Plans the answer of the next request (or the next `times`) of `answer.operation`. Throws
     * {@link PetstoreError} `invalid_option`, naming what is allowed, for an unknown operation, a
     * status the operation cannot answer, a bad `times` or `delayMs`, an unknown field, or past
     * 100 plans pending.
     */
    next(answer: AnswerPlan): void
    /** The plans not used up yet, oldest first, each with the `times` it has left. */
    pending(): PendingAnswer[]
    /** Drops every plan not used up. */
    clear(): void
  }
  /** The journal of requests that reached the handlers (the Authorization value is never kept). */
  readonly requests: {
    /**
     * Entries oldest first, optionally filtered by method, path (a trailing `*` matches a prefix),
     * operation or status. The entries are the journal's own: copy one before changing it.
     */
    all<O extends OperationId | undefined = undefined>(filter?: JournalFilter & { readonly operation?: O }): JournalEntryOf<O>[]
    /** Empties the journal. */
    clear(): void
    /**
     * The oldest entry matching `match` (a filter, plus the request's `body`, `headers`, `query` as
     * `toMatchObject` compares them), already in the journal or arriving within `timeout` ms.
     * Rejects with a {@link WaitForTimeoutError} listing what arrived meanwhile, or with a
     * `PetstoreError` `invalid_option` for a match that can never hold. Call `clear()` first to
     * wait for a new request only.
     * @example
     * const entry = await petstore.requests.waitFor({ operation: 'createCategory', body: { name: 'Ferrets' } })
     */
    waitFor<O extends OperationId | undefined = undefined>(match?: JournalMatch & { readonly operation?: O }, options?: WaitForOptions): Promise<JournalEntryOf<O>>
  }
}

/**
 * Creates an isolated Petstore. Two petstores never share data.
 *
 * @example
 * const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
 * const server = setupServer(...petstore.handlers)
 * await petstore.categories.create({ name: 'Ferret' })
 */
export function createPetstore(options: PetstoreOptions = {}): Petstore {
  const settings = parseOptions(options)
  if (settings.scenariosDir !== undefined) checkScenariosDir(settings.scenariosDir)
  const input = (settings.scenario ?? 'default') as ScenarioInput
  const loadOptions = { scenariosDir: settings.scenariosDir }
  const overrides = {
    latency: settings.latency,
    faults: settings.faults,
    afterSunset: settings.afterSunset,
    journalLimit: settings.journalLimit,
    journalBytes: settings.journalBytes,
    maxCategories: settings.maxCategories,
  }
  const limits = {
    nameMaxLength: settings.nameMaxLength,
    descriptionMaxLength: settings.descriptionMaxLength,
    maxCategories: settings.maxCategories ?? Number.POSITIVE_INFINITY,
  }

  // A built-in name or an object can be judged now, so misuse throws here rather than later.
  const initial = checkScenarioInput(input, loadOptions)
  const tenant = Tenant.inMemory(initial ?? EMPTY_SCENARIO, overrides)
  let keys = keyRing(settings.apiKeys, tenant.scenario)
  // What `reset()` returns to: the scenario of creation (once loaded: a file loads later) or the
  // one `useBaseline` set. `inUse` is the one switched to last, under any `seed()`.
  let baseline: Scenario | undefined = initial
  let inUse: Scenario | undefined = initial
  let ready: Promise<void> = initial ? tenant.ready : switchTo(input).then(() => void (baseline = inUse))
  // The handlers report a failed load too, so a caller who never awaits `ready` still sees it.
  ready.catch(() => undefined)

  async function switchTo(next: ScenarioInput): Promise<Scenario> {
    const scenario = await loadScenario(next, loadOptions)
    await apply(scenario)
    inUse = scenario
    return scenario
  }

  /** Runs `step` after what is under way; a step that fails leaves the scenario and its data in place. */
  function queue<T>(step: () => Promise<T>): Promise<T> {
    const attempt = ready.catch(() => undefined).then(step)
    ready = attempt.then(() => undefined, () => undefined)
    return attempt
  }

  /** The misuse `checkScenarioInput` finds, as a rejection (so `.catch()` sees it too), or undefined. */
  function misuse(next: ScenarioInput): Promise<never> | undefined {
    try {
      checkScenarioInput(next, loadOptions)
      return undefined
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)))
    }
  }

  async function resetTo(keepScenario: boolean): Promise<void> {
    await ready
    const target = (keepScenario ? inUse : baseline) ?? tenant.scenario
    // @note Reseeding the scenario in use was the old default, and a `useScenario('empty')` in
    // one test then leaked into the next through the usual `afterEach(() => petstore.reset())`.
    if (target === tenant.scenario) {
      await tenant.reset()
      return
    }
    tenant.journal.clear()
    tenant.answers.clear()
    await queue(() => apply(target))
  }

  async function apply(scenario: Scenario): Promise<void> {
    await tenant.useScenario(scenario)
    keys = keyRing(settings.apiKeys, scenario)
  }

  const redaction = new Redaction({ headers: settings.redactHeaders, queryParams: settings.redactQueryParams })
  const pipeline = new Pipeline({
    strict: settings.strict,
    maxBodyBytes: settings.maxBodyBytes,
    limits,
    redaction,
    // @note The 500 a handler answers never carries the exception's message; in a test run the console is the log.
    onUnexpectedError: (error, request) =>
      console.error(`petstore-sandbox: unexpected error on ${request.method} ${redaction.url(request.url)}:`, error),
    tenants: {
      // Entered for the request, as the pipeline expects (the library's one tenant never leaves).
      resolve: (token) => (keys.accepts(token) ? (tenant.enter(), tenant) : undefined),
      anonymousJournal: tenant.journal,
      ready: () => ready,
    },
  })
  const baseUrls = typeof settings.baseUrl === 'string' ? [settings.baseUrl] : settings.baseUrl
  const basePaths = baseUrls.map(basePathOf)
  const afterReady = async <T>(read: () => Promise<T>): Promise<T> => {
    await ready
    return read()
  }

  const petstore: Petstore = {
    handlers: createHandlers(pipeline, baseUrls),
    get ready() {
      return ready
    },
    get scenario() {
      return tenant.scenario
    },
    // @note Queued at once, not after a check's tick: a request or read sent without awaiting
    // the switch still waits for it.
    useScenario(next) {
      return misuse(next) ?? queue(async () => void (await switchTo(next)))
    },
    useBaseline(next) {
      return (
        misuse(next) ??
        queue(async () => {
          const previous = baseline
          baseline = await switchTo(next)
          return async () => {
            baseline = previous
            await resetTo(false)
          }
        })
      )
    },
    seed(data) {
      return queue(async () => tenant.useScenario(await seedScenario(tenant.scenario, data)))
    },
    async reset(options = {}) {
      const keep: unknown = typeof options === 'object' && options !== null ? options.keepScenario : options
      if (keep !== undefined && typeof keep !== 'boolean') {
        throw new PetstoreError('invalid_option', `Invalid reset option keepScenario: expected true or false, received ${JSON.stringify(keep) ?? typeof keep}`)
      }
      await resetTo(keep === true)
    },
    categories: {
      list: () => afterReady(() => tenant.store.listCategories()),
      create: (category) =>
        afterReady(() => {
          const input: unknown = category
          if (typeof input !== 'object' || input === null || Array.isArray(input)) {
            throw new PetstoreError('invalid_body', 'Cannot create category: expected an object such as { name: "Ferrets" }')
          }
          // The same judgement as `POST /categories`: unknown fields ignored, or refused with `strict`.
          const judged = validateNewCategory(input as Record<string, unknown>, settings.strict, limits)
          // The code and message `POST /categories` would answer with (missing_field, invalid_field, unknown_field).
          if ('kind' in judged) throw new PetstoreError(libraryCode(judged.code), `Cannot create category: ${apiError(judged.code, judged.params).message}`)
          return tenant.createCategory(judged).catch((error: unknown) => {
            if (!(error instanceof CategoryLimitError)) throw error
            throw new PetstoreError('category_limit', `Cannot create category: ${apiError('category_limit', { max: error.limit }).message} (petstore.reset())`)
          })
        }),
    },
    pets: {
      list: () => afterReady(() => Promise.resolve(tenant.listPets())),
      get: (id) => afterReady(() => Promise.resolve(tenant.findPet(id))),
    },
    orders: { list: () => afterReady(() => Promise.resolve(tenant.listOrders())) },
    answers: {
      next(answer) {
        const judged = judgeAnswerPlan(answer, DEFAULT_MAX_DELAY_MS)
        if (!judged.ok) throw new PetstoreError('invalid_option', `Cannot plan answer: ${judged.reason}`)
        try {
          tenant.answers.plan(judged.value)
        } catch (error) {
          if (!(error instanceof AnswerLimitError)) throw error
          throw new PetstoreError('invalid_option', `Cannot plan answer: the petstore has ${error.limit} planned answers pending, the most it may hold; let them be used, or drop them with petstore.answers.clear()`)
        }
      },
      pending: () => tenant.answers.pending(),
      clear: () => tenant.answers.clear(),
    },
    requests: {
      // @note Typed by operation: the journal's entries hold what the operations answered.
      all: <O extends OperationId | undefined>(filter?: JournalFilter) => tenant.journal.all(parseFilter(filter, basePaths)) as JournalEntryOf<O>[],
      clear: () => tenant.journal.clear(),
      waitFor: <O extends OperationId | undefined>(match: JournalMatch = {}, options: WaitForOptions = {}) => {
        // @note A misuse rejects rather than throws, so that `await expect(...).rejects` sees it.
        try {
          const judged = parseMatch(match, basePaths)
          return waitForEntry(tenant.journal, judged, waitTimeout(options)) as Promise<JournalEntryOf<O>>
        } catch (error) {
          return Promise.reject(error instanceof Error ? error : new Error(String(error)))
        }
      },
    },
  }
  TENANTS.set(petstore, tenant)
  return petstore
}

/** The library's code for a 400 code of `POST /categories`. */
function libraryCode(code: ErrorCode): PetstoreErrorCode {
  return code === 'missing_field' || code === 'invalid_field' || code === 'unknown_field' ? code : 'invalid_body'
}

/**
 * A journal filter as given, judged by the journal's one rule against the base URLs: a filter that
 * cannot match is a mistake, never an empty list.
 */
function parseFilter(filter: JournalFilter | undefined, basePaths: readonly (string | undefined)[]): JournalFilter {
  const judged = judgeJournalFilter(filter, basePaths)
  if (!judged.ok) throw new PetstoreError('invalid_option', `Invalid requests filter ${judged.problem.field}: expected ${judged.problem.reason}`)
  return judged.filter
}

/** A match for `waitFor()` as given, judged: the filter's rule, and objects for `headers` and `query`. */
function parseMatch(match: JournalMatch, basePaths: readonly (string | undefined)[]): JournalMatch {
  const judged = judgeJournalFilter(match, basePaths, MATCH_FIELDS)
  const problem = judged.ok ? matchExtrasProblem(match) : judged.problem
  if (problem) throw new PetstoreError('invalid_option', `Invalid requests.waitFor() match ${problem.field}: expected ${problem.reason}`)
  return match
}

function waitTimeout(options: WaitForOptions): number {
  const timeout: unknown = typeof options === 'object' && options !== null ? options.timeout : options
  if (timeout === undefined) return DEFAULT_WAIT_TIMEOUT
  if (typeof timeout !== 'number' || !(timeout >= 0) || !Number.isFinite(timeout)) {
    throw new PetstoreError('invalid_option', `Invalid requests.waitFor() option timeout: expected a number of milliseconds (1000), received ${describeValue(timeout)}`)
  }
  return timeout
}

const TENANTS = new WeakMap<Petstore, Tenant<PetstoreStore, RequestJournal, AnswerQueue>>()

/**
 * The tenant behind a petstore, for this package's runtimes (the browser's persistence); not
 * part of the public API, so the index does not export it.
 */
export function tenantOf(petstore: Petstore): Tenant<PetstoreStore, RequestJournal, AnswerQueue> {
  const tenant = TENANTS.get(petstore)
  if (!tenant) throw new PetstoreError('invalid_option', 'Expected a petstore made by createPetstore().')
  return tenant
}

const EMPTY_SCENARIO: Scenario = {
  name: 'loading',
  version: '0.0.0',
  description: 'Placeholder while a scenario file loads',
  seed: { categories: [], pets: [], orders: [] },
  latency: 0,
}

function keyRing(apiKeys: readonly string[] | 'any' | undefined, scenario: Scenario): KeyRing {
  return new KeyRing(apiKeys ?? scenario.apiKeys ?? 'any')
}
