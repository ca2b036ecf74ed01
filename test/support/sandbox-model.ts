/**
 * A sequential model of the sandbox's tenants, for model-based tests: what each tenant's list may
 * be, given the answers its clients got. A tenant's list is its scenario's seed, then the
 * categories created since its last reset or switch, ids counted up from the seed's next id in
 * list order. A create answered 201 must be listed from then on, with its id, after every
 * category acknowledged before it was sent; one whose outcome is unknown (a dropped connection, a
 * 503 that says so) may be listed or not; nothing else may be. When a write's outcome is unknown
 * the tenant has several possible states ("candidates"), and the next list keeps those it matches.
 */
import type { Category } from '../../src/index.js'
import { seedState } from '../../src/storage/storage.js'
import { BUILTIN_SCENARIOS } from '../../src/scenario/builtin-scenarios.js'

/** A logical clock: every send and every answer takes the next tick, in the order they happened. */
export class Clock {
  #now = 0
  tick(): number {
    return ++this.#now
  }
}

interface Entry {
  readonly name: string
  readonly description: string | undefined
  /** The id its 201 gave, or the one a list showed for an unknown outcome. */
  id: number | undefined
  state: 'acked' | 'unknown'
  readonly sentAt: number
  /** When its 201 came (or a list first showed it); Infinity while unknown. */
  ackedAt: number
  /** No request can apply it any more (the server restarted since): a list without it settles it as never written. */
  final: boolean
}

interface TenantState {
  readonly scenario: string
  readonly seed: readonly Category[]
  readonly nextId: number
  readonly entries: Entry[]
}

/** The seed of a built-in scenario. */
function stateOf(scenario: string): TenantState {
  const source = BUILTIN_SCENARIOS[scenario]
  if (!source) throw new Error(`no built-in scenario ${scenario}`)
  const seed = seedState(source)
  return { scenario, seed: seed.categories, nextId: seed.nextCategoryId, entries: [] }
}

const copy = (state: TenantState): TenantState => ({ ...state, entries: state.entries.map((entry) => ({ ...entry })) })

const show = (category: Category) => JSON.stringify(category)

/** Why `listed` is not a list `state` allows at `sentAt`, or undefined when it is. */
function mismatch(state: TenantState, listed: readonly Category[], sentAt: number): string | undefined {
  for (let i = 0; i < state.seed.length; i++) {
    const expected = state.seed[i]!
    const got = listed[i]
    if (got === undefined || show(got) !== show(expected)) return `item ${i} is ${got ? show(got) : 'missing'}, the seed of ${state.scenario} has ${show(expected)}`
  }
  const created = listed.slice(state.seed.length)
  const seen = new Set<string>()
  const matched: Entry[] = []
  for (const [i, category] of created.entries()) {
    const entry = state.entries.find((candidate) => candidate.name === category.name)
    const sameId = state.entries.find((candidate) => candidate.id === category.id)
    if (!entry && sameId) return `lists ${show(category)}, acknowledged as ${JSON.stringify({ id: sameId.id, name: sameId.name, description: sameId.description })}`
    if (!entry) return `lists ${show(category)}, which no create of this tenant since its last reset was acknowledged or left unknown (a ghost, or another tenant's)`
    if (seen.has(entry.name)) return `lists ${JSON.stringify(entry.name)} twice`
    seen.add(entry.name)
    if (category.description !== entry.description) return `lists ${show(category)}, created with description ${JSON.stringify(entry.description)}`
    if (category.id !== state.nextId + i) return `lists ${show(category)} at position ${state.seed.length + i}: ids after the seed count up from ${state.nextId}, so its id must be ${state.nextId + i}`
    if (entry.id !== undefined && entry.id !== category.id) return `lists ${show(category)}, acknowledged with id ${entry.id}`
    matched.push(entry)
  }
  for (const entry of state.entries) {
    if (entry.state === 'acked' && entry.ackedAt < sentAt && !seen.has(entry.name)) {
      return `does not list ${JSON.stringify(entry.name)}, acknowledged with 201 (id ${entry.id}) before this list was sent`
    }
  }
  for (let a = 0; a < matched.length; a++) {
    for (let b = a + 1; b < matched.length; b++) {
      if (matched[b]!.ackedAt < matched[a]!.sentAt) {
        return `lists ${JSON.stringify(matched[a]!.name)} before ${JSON.stringify(matched[b]!.name)}, which was acknowledged before the first was sent`
      }
    }
  }
  return undefined
}

/** Applies a list that `state` allows: unknown creates it shows become acknowledged, final ones it lacks never happened. */
function settle(state: TenantState, listed: readonly Category[], answeredAt: number): TenantState {
  const ids = new Map(listed.slice(state.seed.length).map((category) => [category.name, category.id]))
  const entries = state.entries.filter((entry) => ids.has(entry.name) || !(entry.state === 'unknown' && entry.final))
  for (const entry of entries) {
    const id = ids.get(entry.name)
    if (entry.state === 'unknown' && id !== undefined) {
      entry.state = 'acked'
      entry.id = id
      entry.ackedAt = answeredAt
    }
  }
  return { ...state, entries }
}

/** The operations a model run plans answers for. */
export type PlannedOperation = 'listCategories' | 'createCategory'

/** One tenant: the states it may be in. */
export class TenantModel {
  #candidates: TenantState[]
  /** Planned answers that may be pending, per operation: at least `min` (when every outcome is known), at most `max`. */
  readonly #plans: Record<PlannedOperation, { min: number; max: number }> = { listCategories: { min: 0, max: 0 }, createCategory: { min: 0, max: 0 } }
  /** Whether the server answered one of its key's requests since it started. */
  answered = false

  constructor(scenario: string) {
    this.#candidates = [stateOf(scenario)]
  }

  /** The scenarios it may be on. */
  get scenarios(): string[] {
    return [...new Set(this.#candidates.map((state) => state.scenario))]
  }

  /**
   * Whether the server must know the tenant, for the admin token's `?tenant=`: in memory, once it
   * answered one of its key's requests; in a durable store (where any tenant may be evicted from
   * memory) only while it holds writes, as a tenant back on the start scenario's seed is not stored.
   */
  mustBeKnown(durable: boolean, startScenario: string): boolean {
    if (!durable) return this.answered
    return this.#candidates.every((state) => state.scenario !== startScenario || state.entries.some((entry) => entry.state === 'acked'))
  }

  /** A create answered 201 with `category`: throws when no possible state would give that id. */
  created(category: Category, input: { name: string; description?: string | undefined }, sentAt: number, answeredAt: number): void {
    if (category.name !== input.name || category.description !== input.description) {
      throw new Error(`201 ${show(category)} for the input ${JSON.stringify(input)}`)
    }
    const reasons: string[] = []
    const kept = this.#candidates.filter((state) => {
      const earlier = state.entries.filter((entry) => entry.id !== undefined && entry.ackedAt < sentAt).map((entry) => entry.id!)
      const taken = state.entries.some((entry) => entry.id === category.id)
      const highest = state.nextId + state.entries.length
      const why = taken
        ? `id ${category.id} was already given`
        : category.id < state.nextId || category.id > highest
          ? `id ${category.id} is outside ${state.nextId}..${highest} (the seed's next id, plus the creates since)`
          : earlier.some((id) => id >= category.id)
            ? `id ${category.id} is not above ${Math.max(...earlier)}, acknowledged before it was sent`
            : undefined
      if (why) reasons.push(`on ${state.scenario}: ${why}`)
      return why === undefined
    })
    if (kept.length === 0) throw new Error(`201 ${show(category)}: ${reasons.join('; ')}`)
    for (const state of kept) state.entries.push({ name: input.name, description: input.description, id: category.id, state: 'acked', sentAt, ackedAt: answeredAt, final: false })
    this.#candidates = kept
  }

  /** A create whose outcome is unknown: it may be listed from now on. */
  maybeCreated(input: { name: string; description?: string | undefined }, sentAt: number): void {
    for (const state of this.#candidates) {
      state.entries.push({ name: input.name, description: input.description, id: undefined, state: 'unknown', sentAt, ackedAt: Number.POSITIVE_INFINITY, final: false })
    }
  }

  /** A list answered 200 with `listed`: throws when no possible state allows it. */
  listed(listed: readonly Category[], sentAt: number, answeredAt: number): void {
    const reasons: string[] = []
    const kept: TenantState[] = []
    for (const state of this.#candidates) {
      const why = mismatch(state, listed, sentAt)
      if (why === undefined) kept.push(settle(state, listed, answeredAt))
      else reasons.push(`on ${state.scenario}: ${why}`)
    }
    if (kept.length === 0) throw new Error(`list ${JSON.stringify(listed)}: ${reasons.join('; ')}`)
    this.#candidates = kept
  }

  /** A reset (keeps the scenario) or a switch (`scenario` given) answered 200, or (`known` false) one whose outcome is unknown. */
  reseeded(scenario: string | undefined, known = true): void {
    const next = this.#candidates.map((state) => stateOf(scenario ?? state.scenario))
    this.#candidates = known ? dedupe(next) : dedupe([...this.#candidates, ...next])
  }

  /** A plan of `times` answers for `operation` was made (`known`: answered 201), or may have been. */
  planned(operation: PlannedOperation, times: number, known: boolean): void {
    this.#plans[operation].max += times
    if (known) this.#plans[operation].min += times
  }

  /** A request of `operation` got a planned answer: throws when no plan may have been pending. */
  tookPlan(operation: PlannedOperation): void {
    const plans = this.#plans[operation]
    if (plans.max < 1) throw new Error(`a planned answer for ${operation}, but no plan of this tenant for it may be pending (another tenant's, or one used up or cleared)`)
    plans.max--
    plans.min = Math.max(0, plans.min - 1)
  }

  /** A request of `operation` got no answer, or a refusal: it may have taken a plan. */
  mayHaveTaken(operation: PlannedOperation): void {
    this.#plans[operation].min = Math.max(0, this.#plans[operation].min - 1)
  }

  /** A request of `operation` answered as usual; alone (not among concurrent ones), no plan may have been pending. */
  answeredUnplanned(operation: PlannedOperation, alone: boolean): void {
    const { min } = this.#plans[operation]
    if (alone && min > 0) throw new Error(`answered as usual, though ${min} planned answer(s) for ${operation} were pending`)
  }

  /** A reset answered 200 (`known`) dropped every plan, or may have. */
  plansCleared(known: boolean): void {
    for (const plans of Object.values(this.#plans)) {
      plans.min = 0
      if (known) plans.max = 0
    }
  }

  /** The server restarted: nothing in flight can still apply; in memory, the tenant is back on `startScenario`'s seed; plans are kept only in a shared store (`plansKept`). */
  restarted(durable: boolean, startScenario: string, plansKept = false): void {
    if (!plansKept) this.plansCleared(true)
    this.answered = false
    if (!durable) {
      this.#candidates = [stateOf(startScenario)]
      return
    }
    this.#candidates = this.#candidates.map(copy)
    for (const state of this.#candidates) for (const entry of state.entries) entry.final = true
  }

  /** What it may hold, for failure messages. */
  describe(): string {
    const plans = Object.entries(this.#plans)
      .filter(([, { max }]) => max > 0)
      .map(([operation, { min, max }]) => `${operation} ${min}..${max}`)
    return (plans.length > 0 ? `plans pending: ${plans.join(', ')}; ` : '') + this.#candidates
      .map((state) => `${state.scenario} (next id ${state.nextId}): ${state.entries.map((entry) => `${entry.name}${entry.state === 'acked' ? `#${entry.id}` : '?'}`).join(', ') || 'seed only'}`)
      .join(' | ')
  }
}

function dedupe(states: TenantState[]): TenantState[] {
  const seen = new Set<string>()
  return states.filter((state) => {
    const key = JSON.stringify(state)
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}
