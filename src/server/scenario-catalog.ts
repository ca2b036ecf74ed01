/**
 * The scenarios a partner may switch to at run time: the built-ins and the files of
 * `--scenarios-dir`, by name only. A name is looked up in that list before anything is read,
 * so a request can never make the server open a path of its choosing.
 */
import { createHash } from 'node:crypto'
import { readdir, stat } from 'node:fs/promises'
import { join } from 'node:path'
import { PetstoreError } from '../core/petstore-error.js'
import type { Scenario } from '../contract/scenario-format.js'
import { checkOwnName, listScenarioNames, loadScenario, loadScenarioFile } from '../scenario/scenario-loader.js'

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

/** Each scenario's digest, once computed (see {@link sameScenario}). */
const digests = new WeakMap<Scenario, string>()

/** A digest of everything `scenario` says (its JSON). */
function digestOf(scenario: Scenario): string {
  let digest = digests.get(scenario)
  if (digest === undefined) {
    digest = createHash('sha256').update(JSON.stringify(scenario)).digest('base64')
    digests.set(scenario, digest)
  }
  return digest
}

/**
 * `other` when `scenario` says the same as it (another load of the same files): what a switch or reset should use, so
 * that a tenant switched by name to the start scenario as it is holds the very start seed, on its seed as a new key.
 * @note Two loads told apart, such tenants were taken for writers: never relieved, they filled the memory budget, and a
 * reset without a body kept them so (review43 R8).
 */
export function sameScenario(scenario: Scenario, other: Scenario): Scenario {
  if (scenario === other || scenario.name !== other.name || scenario.version !== other.version) return scenario
  return digestOf(scenario) === digestOf(other) ? other : scenario
}

/**
 * A scenario file loaded, and what each file it read was like then (see {@link stampsOf}). Held
 * weakly: the tenants on it keep it, and once none does it may go (a later load reads it again).
 * @note Held for good, every scenario ever loaded stayed (`GET /__sandbox/scenarios` loads them all),
 * deleted and renamed ones too, outside the memory budget (review41 R3).
 */
interface Loaded {
  readonly scenario: WeakRef<Scenario>
  readonly stamps: ReadonlyMap<string, string>
}

/**
 * A file whose status changed this close (ms) to the start of its load, or after, is not kept
 * loaded: the change may have come while it was read (timestamps may be this coarse).
 */
const SETTLE_MS = 2000

/**
 * What each file is like now (device, inode, size, times), or undefined when one cannot be told,
 * or (given `started`, when a load began) changed after `started` less {@link SETTLE_MS}.
 * @note The status change (ctime), which no one sets by hand: a fixture dated in the future
 * (mtime) was never kept, every switch loading it anew (review41 R4). Judged from when the stamps
 * were taken, a file edited during a long load (9 s of a large fixture) was kept as first read,
 * its edit never served (review41 R2).
 */
async function stampsOf(paths: Iterable<string>, started?: number): Promise<Map<string, string> | undefined> {
  const stamps = new Map<string, string>()
  for (const path of paths) {
    const stats = await stat(path, { bigint: true }).catch(() => undefined)
    if (stats === undefined || (started !== undefined && Number(stats.ctimeMs) >= started - SETTLE_MS)) return undefined
    stamps.set(path, `${stats.dev}:${stats.ino}:${stats.size}:${stats.mtimeNs}:${stats.ctimeNs}`)
  }
  return stamps
}

/** Whether every file is as it was when stamped. */
async function unchanged(stamps: ReadonlyMap<string, string>): Promise<boolean> {
  const now = await stampsOf(stamps.keys())
  return now !== undefined && [...stamps].every(([path, stamp]) => now.get(path) === stamp)
}

export class ScenarioCatalog {
  readonly #scenariosDir: string | undefined
  /**
   * The directory's scenarios loaded, by name: one object for every tenant on it, loaded again
   * when one of its files changed (or once no tenant holds it).
   * @note Loaded anew for each switch, every tenant held its own parse of the scenario's pets and
   * orders fixtures, which the memory budget does not count (the tenant's categories it does):
   * 35 keys switching to a scenario with a 24 MB pets fixture took the heap to 3.4 GB under a
   * 64 MiB budget, every key refused, then the process out of memory (attack45 F1).
   */
  readonly #loaded = new Map<string, Loaded>()
  /**
   * What the list says of each file of the directory loaded, while its files are as they were then (held strongly: a few
   * strings). @note Listed from the scenarios themselves, held weakly, every `GET /__sandbox/scenarios` parsed every
   * file and fixture again: one key looping it held every partner ~1 s a request (attack47 F3).
   */
  readonly #summaries = new Map<string, { readonly summary: ScenarioSummary; readonly stamps: ReadonlyMap<string, string> }>()
  /** Loads in flight, by name: switches sent together share one (attack45 F2). */
  readonly #loading = new Map<string, Promise<Scenario>>()

  /** Told each version of a directory scenario read from its files (not one kept from before). @default none */
  onLoad: ((scenario: Scenario) => void) | undefined

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
    const dir = this.#scenariosDir
    const file = `${name}.json`
    // A built-in: one object already.
    if (dir === undefined || !(await readdir(dir).catch((): string[] => [])).includes(file)) {
      this.#loaded.delete(name)
      return loadScenario(name, { scenariosDir: dir })
    }
    let loading = this.#loading.get(name)
    if (loading === undefined) {
      loading = this.#loadFile(name, join(dir, file)).finally(() => this.#loading.delete(name))
      this.#loading.set(name, loading)
    }
    return loading
  }

  /** The scenario in `file`: the one loaded before while none of its files changed, else read now. */
  async #loadFile(name: string, file: string): Promise<Scenario> {
    const loaded = this.#loaded.get(name)
    const kept = loaded?.scenario.deref()
    if (loaded !== undefined && kept !== undefined && (await unchanged(loaded.stamps))) return kept
    this.#loaded.delete(name)
    const started = Date.now()
    const paths = new Set<string>()
    // Each file's stamp as it is read too: one swapped while the load went on (a symlink to an older file, a directory
    // renamed in place), its old times passing the settle rule, was kept as first read for good (attack47 F2).
    const before = new Map<string, Promise<string | undefined>>()
    const scenario = await loadScenarioFile(file, (path) => {
      paths.add(path)
      before.set(path, stampsOf([path]).then((stamps) => stamps?.get(path)))
    })
    checkOwnName(scenario, file)
    this.onLoad?.(scenario)
    let stamps = await stampsOf(paths, started)
    for (const [path, stamp] of before) if (stamps !== undefined && (await stamp) !== stamps.get(path)) stamps = undefined
    if (stamps !== undefined) {
      this.#loaded.set(name, { scenario: new WeakRef(scenario), stamps })
      this.#summaries.set(name, { summary: summarize(scenario), stamps })
    }
    return scenario
  }

  /** What {@link list} says of each scenario (a file's summary read again only once one of its files changed). */
  async summaries(): Promise<ScenarioSummary[]> {
    const summaries: ScenarioSummary[] = []
    const names = await this.names()
    for (const name of this.#summaries.keys()) if (!names.includes(name)) this.#summaries.delete(name)
    for (const name of names) {
      const kept = this.#summaries.get(name)
      if (kept !== undefined && (await unchanged(kept.stamps))) {
        summaries.push(kept.summary)
        continue
      }
      this.#summaries.delete(name)
      const scenario = await this.#loadable(name)
      if (scenario) summaries.push(summarize(scenario))
    }
    return summaries
  }

  /** Every loadable scenario, in listing order; files that fail to load are left out. */
  async list(): Promise<Scenario[]> {
    const scenarios: Scenario[] = []
    const names = await this.names()
    // Scenarios deleted or renamed since: not kept.
    for (const name of this.#loaded.keys()) if (!names.includes(name)) this.#loaded.delete(name)
    for (const name of names) {
      const scenario = await this.#loadable(name)
      if (scenario) scenarios.push(scenario)
    }
    return scenarios
  }

  /** {@link load}, a file that fails to load (a user's error, not the sandbox's) taken as none. */
  async #loadable(name: string): Promise<Scenario | undefined> {
    try {
      return await this.load(name)
    } catch (error) {
      if (!(error instanceof PetstoreError)) throw error
      return undefined
    }
  }
}
