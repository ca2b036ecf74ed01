/**
 * A tenant: one isolated sandbox (store, journal, scenario, fault generators). The library has
 * one per `createPetstore()`; the standalone server has one per API key.
 */
import type { Faults, Latency, Scenario } from '../scenario/scenario-format.js'
import { faultSettings, FaultInjector } from './faults.js'
import { RequestJournal } from './journal.js'
import { PetstoreStore, type DurableWrite, type StoreSnapshot } from './store.js'

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

/** How a durable runtime starts a tenant: from its saved state, recording every later write. */
export interface TenantDurability {
  /** The categories and next id to start from instead of the scenario's seed. */
  readonly saved?: StoreSnapshot | undefined
  /** Awaited before each write is answered; gets the tenant's scenario name at that moment. */
  readonly onWrite: (write: DurableWrite, scenarioName: string) => Promise<void> | undefined
}

export class Tenant {
  readonly store = new PetstoreStore()
  readonly journal: RequestJournal
  readonly #overrides: TenantOverrides
  #scenario: Scenario
  #faults: FaultInjector
  /** Settles when the current scenario's seed is in the store. */
  ready: Promise<void>

  constructor(scenario: Scenario, overrides: TenantOverrides = {}, durability?: TenantDurability) {
    this.#overrides = overrides
    this.journal = new RequestJournal(overrides.journalLimit, overrides.journalBytes)
    if (overrides.maxCategories !== undefined) this.store.maxCategories = overrides.maxCategories
    this.#scenario = scenario
    this.#faults = new FaultInjector(faultSettings(scenario, overrides))
    if (durability) this.store.onDurableWrite = (write) => durability.onWrite(write, this.#scenario.name)
    this.ready = this.store.seed(scenario, durability?.saved)
  }

  get scenario(): Scenario {
    return this.#scenario
  }

  /** What the tenant holds on the heap, estimated: its data and its journal. */
  get heldBytes(): number {
    return this.store.heldBytes + this.journal.bytes
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

  /** Switches to another scenario and reseeds from it. The journal is kept. */
  useScenario(scenario: Scenario): Promise<void> {
    this.#scenario = scenario
    this.#faults = new FaultInjector(faultSettings(scenario, this.#overrides))
    this.ready = this.store.seed(scenario)
    return this.ready
  }

  /** Back to the current scenario's seed: data, ids, fault sequence, and an empty journal. */
  reset(): Promise<void> {
    this.journal.clear()
    return this.useScenario(this.#scenario)
  }
}
