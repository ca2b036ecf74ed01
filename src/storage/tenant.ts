/**
 * A tenant: one isolated sandbox (store, journal, scenario, fault generators). The library has
 * one per `createPetstore()`; the standalone server has one per API key.
 */
import type { Category, NewCategory, Order, Pet } from '../contract/schemas.js'
import type { Faults, Latency, Scenario } from '../contract/scenario-format.js'
import { faultSettings, FaultInjector } from '../core/faults.js'
import { RequestJournal, type TenantJournal } from '../core/journal.js'
import { AnswerQueue, type TenantAnswers } from '../core/planned-answers.js'
import { seedState, StorageUnavailableError, WriteOutcomeUnknownError, type TenantStore } from './storage.js'
import { PetstoreStore } from './memory-store.js'

/** Settings that, when given, win over the scenario's. */
export interface TenantOverrides {
  readonly latency?: Latency | undefined
  readonly faults?: Faults | false | undefined
  readonly afterSunset?: boolean | undefined
  readonly journalLimit?: number | undefined
  /** What the journal may hold, in heap bytes. @default 1 MiB */
  readonly journalBytes?: number | undefined
  /** Creates beyond this many categories answer 409 `category_limit`. @default no limit */
  readonly maxCategories?: number | undefined
}

export class Tenant<S extends TenantStore = TenantStore, J extends TenantJournal = TenantJournal, A extends TenantAnswers = TenantAnswers> {
  /** Its writable state (categories, ids, scenario name). */
  readonly store: S
  /** What reached it and what it answered: in memory by default, or the storage's (Redis). */
  readonly journal: J
  /** Answers planned for its next requests (`petstore.answers`, `POST /__sandbox/answers`): in memory by default, or the storage's (Redis). */
  readonly answers: A
  readonly #overrides: TenantOverrides
  #scenario: Scenario
  #faults: FaultInjector
  #ready!: Promise<void>
  #settled = false
  #busy = 0

  /**
   * A tenant on `scenario` whose `store` holds that scenario's state (or will, once `ready`
   * settles), journaling to `journal`, its planned answers in `answers`. {@link Tenant.inMemory}
   * makes one with a fresh in-memory store and journal.
   */
  constructor(scenario: Scenario, overrides: TenantOverrides, store: S, journal: J, ready: Promise<void>, answers: A) {
    this.#overrides = overrides
    this.journal = journal
    this.answers = answers
    this.#scenario = scenario
    this.#faults = new FaultInjector(faultSettings(scenario, overrides))
    this.store = store
    this.ready = ready
  }

  /** Settles when the store holds the current scenario's state. */
  get ready(): Promise<void> {
    return this.#ready
  }

  set ready(ready: Promise<void>) {
    this.#ready = ready
    this.#settled = false
    ready.then(
      () => {
        if (this.#ready === ready) this.#settled = true
      },
      () => undefined,
    )
  }

  /**
   * The scenario its store holds when the server does not know it (its file broken or gone when it was read back): it is
   * served the start scenario's pets and orders meanwhile, and a reset without a body looks that name up again.
   * @default none
   */
  unknownScenario: string | undefined

  /**
   * The start scenario as it is now (a --watch save may have replaced it), whose seed is its store's default; undefined
   * while the store holds an older version's seed for it (a tenant left stale by a save). @default none
   */
  startScenario: (() => Scenario | undefined) | undefined

  /** Told when its last request under way ends ({@link leave} brings {@link busy} back to false). @default none */
  onIdle: (() => void) | undefined

  /** Marks a request of its own under way (until {@link leave}): a busy tenant is not dropped to make room. */
  enter(): void {
    this.#busy++
  }

  /** Ends what {@link enter} began. */
  leave(): void {
    if (--this.#busy === 0) this.onIdle?.()
  }

  /** Its requests waiting out a delay, each with what ends the wait (answered 503 `over_capacity`, nothing run). */
  readonly delays = new Set<(reason: string) => void>()

  /**
   * Ends every request of its own waiting out a delay (`Prefer: delay`, latency, a planned
   * answer's `delayMs`), so that it can leave for a new key at the tenant cap (attack7 K3).
   */
  cutDelays(reason: string): void {
    for (const cut of [...this.delays]) cut(reason)
  }

  /** Whether a request of its own is under way. */
  get busy(): boolean {
    return this.#busy > 0
  }

  /** Whether {@link ready} has settled: a request need not wait for it. */
  get settled(): boolean {
    return this.#settled
  }

  /** A tenant with its own in-memory store, seeded from `scenario`: the library's. */
  static inMemory(scenario: Scenario, overrides: TenantOverrides = {}): Tenant<PetstoreStore, RequestJournal, AnswerQueue> {
    const store = new PetstoreStore(seedState(scenario))
    return new Tenant(scenario, overrides, store, new RequestJournal(overrides.journalLimit, overrides.journalBytes), store.seeded, new AnswerQueue())
  }

  get scenario(): Scenario {
    return this.#scenario
  }

  /** What the tenant holds on the heap, estimated: its data and its journal (the server counts planned answers apart: they outlive a tenant leaving memory). */
  get heldBytes(): number {
    return this.store.heldBytes + this.journal.bytes
  }

  /**
   * Stores a valid NewCategory under the next id, within the tenant's category limit: rejects
   * with `CategoryLimitError` past it, and `IdSpaceExhaustedError` past the safe integers.
   */
  createCategory(input: NewCategory): Promise<Category> {
    return this.store.createCategory(input, this.maxCategories)
  }

  /** The most categories a create may leave the tenant with. @default no limit */
  get maxCategories(): number {
    return this.#overrides.maxCategories ?? Number.POSITIVE_INFINITY
  }

  get faults(): FaultInjector {
    return this.#faults
  }

  /** Whether the deprecated pet operation answers 410 Gone. */
  get afterSunset(): boolean {
    return this.#overrides.afterSunset ?? this.#scenario.deprecation?.afterSunset ?? false
  }

  get sunset(): string | undefined {
    return this.#scenario.deprecation?.sunset
  }

  /**
   * Takes up the scenario another process switched this tenant to (its store already holds that
   * scenario's state): pets, orders and faults follow, nothing is written.
   */
  follow(scenario: Scenario): void {
    if (scenario === this.#scenario) return
    // @note Only by its own: a save of the start scenario it stands in for cleared it, and the next reset wiped the
    // tenant onto the start scenario after all (review44 F4).
    if (scenario.name === this.unknownScenario) this.unknownScenario = undefined
    this.#scenario = scenario
    this.#faults = new FaultInjector(faultSettings(scenario, this.#overrides))
  }

  /**
   * Switches to another scenario and reseeds from it in one store write. The journal is kept.
   * When the write fails (a storage failure), the tenant stays on its current scenario and data;
   * when its outcome is unknown, it takes the scenario its store now holds (attack6 S1).
   */
  useScenario(scenario: Scenario): Promise<void> {
    /** Takes the scenario; `seeded`: whether the store says it is on its default seed (unknown after an unknown outcome). */
    const take = (seeded: boolean | undefined) => {
      // @note A store back on its default seed holds the start scenario's as it is now: a reset decided on a former
      // version (a --watch save landed while it was under way) took that version's pets, orders and faults beside the
      // new version's categories (review45 F5). After an unknown outcome, by the name alone: durable stores lay any
      // version of the start seed as the current one (review46 N1: `modified` is the handle's from before the write).
      const start = seeded === false ? undefined : this.startScenario?.()
      const taken = start?.name === scenario.name ? start : scenario
      this.unknownScenario = undefined
      this.#scenario = taken
      this.#faults = new FaultInjector(faultSettings(taken, this.#overrides))
    }
    const write = this.store.replace(seedState(scenario)).then(() => take(!this.store.modified), async (error: unknown) => {
      // @note The store may hold the new state (its undo failed): the name shown must be the one stored.
      if (error instanceof WriteOutcomeUnknownError && (await this.store.scenario().catch(() => undefined)) === scenario.name) take(undefined)
      throw error
    })
    // @note A store that holds reads until its writes settle bounds that wait; `ready` would not (attack6 S2).
    if (this.store.holdsUntilSettled !== true) this.ready = write.catch(() => undefined)
    return write
  }

  /** Back to the current scenario's seed: data, ids, fault sequence, an empty journal and no planned answers. */
  reset(): Promise<void> {
    return this.resetTo(this.#scenario)
  }

  /** Onto `scenario`'s seed (switching to it), with an empty journal and no planned answers: one call for a partner's test isolation. */
  async resetTo(scenario: Scenario): Promise<void> {
    await this.useScenario(scenario)
    // @note Three writes (the store's, the journal's, the planned answers'; on Redis each its own
    // script): once the data is reset, a later one that fails leaves the reset partly applied, so
    // the answer is "outcome unknown", never "not applied" (storage_unavailable).
    try {
      await this.journal.clear()
      await this.answers.clear()
    } catch (error) {
      if (!(error instanceof StorageUnavailableError) || error instanceof WriteOutcomeUnknownError) throw error
      throw new WriteOutcomeUnknownError(`the tenant's data was reset to scenario ${JSON.stringify(scenario.name)}, but clearing its journal and planned answers failed: ${error.message}`, { cause: error })
    }
  }

  /** The scenario's pets (read-only), as copies. */
  listPets(): Pet[] {
    return this.#scenario.seed.pets.map((pet) => structuredClone(pet))
  }

  /** The scenario's pet with this id, as a copy, or undefined. */
  findPet(id: number): Pet | undefined {
    const pet = this.#scenario.seed.pets.find((candidate) => candidate.id === id)
    return pet ? structuredClone(pet) : undefined
  }

  /** The scenario's orders (read-only), as copies. */
  listOrders(): Order[] {
    return this.#scenario.seed.orders.map((order) => structuredClone(order))
  }
}

/**
 * A new tenant refused for now (the server is full): clients get this code's Error body with a
 * `Retry-After` header. One class for every admission refusal, whatever its reason.
 */
export class TenantRefusedError extends Error {
  override readonly name = 'TenantRefusedError'
  readonly code: 'tenant_capacity'
  readonly params: Readonly<Record<string, string | number>>
  /** Seconds after which a retry may succeed. */
  readonly retryAfterSeconds: number

  constructor(code: 'tenant_capacity', params: Readonly<Record<string, string | number>>, retryAfterSeconds: number) {
    super(`new tenant refused: ${code}`)
    this.code = code
    this.params = params
    this.retryAfterSeconds = retryAfterSeconds
  }
}
