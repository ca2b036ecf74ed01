/**
 * The scenarios a partner may switch to at run time: the built-ins and the files of
 * `--scenarios-dir`, by name only. A name is looked up in that list before anything is read,
 * so a request can never make the server open a path of its choosing.
 */
import { PetstoreError } from '../core/petstore-error.js'
import type { Scenario } from '../contract/scenario-format.js'
import { listScenarioNames, loadScenario } from '../scenario/scenario-loader.js'

/** What the admin API says of a scenario. */
export interface ScenarioSummary {
  readonly name: string
  readonly version: string
  readonly description: string
}

/** A scenario's public summary (its seed and keys stay private). */
export function summarize(scenario: Scenario): ScenarioSummary {
  return { name: scenario.name, version: scenario.version, description: scenario.description }
}

export class ScenarioCatalog {
  readonly #scenariosDir: string | undefined

  constructor(scenariosDir?: string) {
    this.#scenariosDir = scenariosDir
  }

  names(): Promise<string[]> {
    return listScenarioNames({ scenariosDir: this.#scenariosDir })
  }

  /**
   * The scenario with this name, or undefined when there is none.
   * @note A broken file in the directory throws its {@link PetstoreError}: the caller reports it.
   */
  async load(name: string): Promise<Scenario | undefined> {
    const names = await this.names()
    if (!names.includes(name)) return undefined
    return loadScenario(name, { scenariosDir: this.#scenariosDir })
  }

  /** Every loadable scenario, in listing order; files that fail to load are left out. */
  async list(): Promise<Scenario[]> {
    const scenarios: Scenario[] = []
    for (const name of await this.names()) {
      try {
        const scenario = await this.load(name)
        if (scenario) scenarios.push(scenario)
      } catch (error) {
        if (!(error instanceof PetstoreError)) throw error
      }
    }
    return scenarios
  }
}
