/** Simulated latency and failures, drawn from seeded generators so that a run can be replayed. */
import type { Faults, Latency } from '../contract/scenario-format.js'

export type FaultOutcome = '500' | '503' | 'network'

/**
 * mulberry32: a seeded generator of numbers in [0, 1), small, fast and good enough to spread
 * faults (and a test's or bench's choices); not for anything secret.
 */
export function generator(seed: number): () => number {
  let state = seed >>> 0
  return () => {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export interface FaultSettings {
  readonly latency: Latency
  readonly faults?: { readonly rate: number; readonly outcomes: readonly FaultOutcome[]; readonly seed: number } | undefined
}

export class FaultInjector {
  readonly #settings: FaultSettings
  readonly #faultDraw: () => number
  readonly #latencyDraw: () => number

  constructor(settings: FaultSettings) {
    this.#settings = settings
    const seed = settings.faults?.seed ?? 1
    this.#faultDraw = generator(seed)
    this.#latencyDraw = generator(seed ^ 0x5bd1e995)
  }

  get settings(): FaultSettings {
    return this.#settings
  }

  /** Milliseconds to wait before answering. */
  latency(): number {
    const latency = this.#settings.latency
    if (typeof latency === 'number') return latency
    return Math.round(latency.min + (latency.max - latency.min) * this.#latencyDraw())
  }

  /** A failure to simulate for this request, or undefined to answer normally. */
  fault(): FaultOutcome | undefined {
    const faults = this.#settings.faults
    if (!faults || faults.rate === 0) return undefined
    if (this.#faultDraw() >= faults.rate) return undefined
    return faults.outcomes[Math.floor(this.#faultDraw() * faults.outcomes.length)]
  }
}

/** The settings in force: explicit options win over the scenario's. */
export function faultSettings(
  scenario: { readonly latency: Latency; readonly faults?: Faults | undefined },
  overrides: { readonly latency?: Latency | undefined; readonly faults?: Faults | false | undefined },
): FaultSettings {
  const faults = overrides.faults === false ? undefined : (overrides.faults ?? scenario.faults)
  return {
    latency: overrides.latency ?? scenario.latency,
    faults: faults && {
      rate: faults.rate,
      outcomes: faults.outcomes ?? ['500', '503'],
      seed: faults.seed ?? 1,
    },
  }
}
