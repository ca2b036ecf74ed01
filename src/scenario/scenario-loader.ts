/**
 * Turns a scenario given by name, path or object into a validated {@link Scenario}. The file
 * system is reached only for paths and directories, through `scenario-files.ts`, which the
 * browser build swaps for a module that throws: the browser bundle never holds a `node:` import.
 */
import type { z } from 'zod'
import { describeValue, PetstoreError } from '../errors.js'
import { BUILTIN_SCENARIO_NAMES } from './builtin-names.js'
import { BUILTIN_SCENARIOS } from './builtin-scenarios.js'
import { scenarioFiles as fs } from './scenario-files.js'
import {
  CategorySeeds,
  describeIssues,
  OrderSeeds,
  PetSeeds,
  ScenarioFile,
  ScenarioName,
  type Scenario,
} from './scenario-format.js'

/** A scenario: a built-in or directory name, a path to a `.json` file, or the object itself. */
export type ScenarioInput = string | ScenarioFile

/** Where {@link loadScenario} looks for scenarios by name. */
export interface LoadScenarioOptions {
  /** A directory searched for `<name>.json` before the built-in scenarios. */
  readonly scenariosDir?: string | undefined
}

/** Names of the scenarios embedded in the package. */
export { BUILTIN_SCENARIO_NAMES }

/**
 * What can be judged without reading files: a built-in scenario (returned), an unknown name or
 * a malformed object (thrown). Undefined when only {@link loadScenario} can tell.
 */
export function checkScenarioInput(input: ScenarioInput, options: LoadScenarioOptions = {}): Scenario | undefined {
  if (typeof input !== 'string') {
    const parsed = ScenarioFile.safeParse(input)
    if (!parsed.success) {
      throw new PetstoreError('invalid_scenario', `Invalid scenario (scenario object): ${describeIssues(parsed.error)}`)
    }
    return undefined
  }
  if (looksLikePath(input) || options.scenariosDir !== undefined) return undefined
  const builtin = Object.hasOwn(BUILTIN_SCENARIOS, input) ? BUILTIN_SCENARIOS[input] : undefined
  if (builtin) return builtin
  throw new PetstoreError(
    'unknown_scenario',
    `Cannot use scenario "${input}": no such scenario. Known: ${BUILTIN_SCENARIO_NAMES.join(', ')}`,
  )
}

/**
 * Throws unless `dir` is a directory, so a mistyped `scenariosDir` is refused at once instead of
 * silently falling back to the built-in scenarios (in the browser: `scenario_not_readable`).
 */
export function checkScenariosDir(dir: string): void {
  const problem = fs.directoryProblem(dir)
  if (problem !== undefined) {
    throw new PetstoreError(
      'invalid_option',
      `Invalid petstore option scenariosDir: expected the path of a directory, received ${describeValue(dir)}, ${problem}`,
    )
  }
}

/** Loads, validates and resolves a scenario. Throws {@link PetstoreError} with a precise message. */
export async function loadScenario(input: ScenarioInput, options: LoadScenarioOptions = {}): Promise<Scenario> {
  if (typeof input !== 'string') {
    return resolveScenarioFile(input, '(scenario object)', undefined)
  }
  if (looksLikePath(input)) {
    return loadScenarioFile(input)
  }
  const name = ScenarioName.safeParse(input)
  if (!name.success) {
    throw new PetstoreError(
      'unknown_scenario',
      `Cannot use scenario "${input}": a scenario name ${name.error.issues[0]?.message}. Pass a path ending in .json to load a file.`,
    )
  }
  if (options.scenariosDir !== undefined) {
    const file = fs.join(options.scenariosDir, `${input}.json`)
    if (await fs.isFile(file)) return loadScenarioFile(file)
  }
  const builtin = Object.hasOwn(BUILTIN_SCENARIOS, input) ? BUILTIN_SCENARIOS[input] : undefined
  if (builtin) return builtin
  const known = await listScenarioNames(options)
  throw new PetstoreError(
    'unknown_scenario',
    `Cannot use scenario "${input}": no such scenario. Known: ${known.join(', ')}`,
  )
}

/** The names `loadScenario` accepts: the directory's files, then the built-ins. */
export async function listScenarioNames(options: LoadScenarioOptions = {}): Promise<string[]> {
  const names = new Set<string>()
  if (options.scenariosDir !== undefined) {
    for (const entry of await fs.list(options.scenariosDir)) {
      const name = entry.replace(/\.json$/, '')
      if (entry.endsWith('.json') && ScenarioName.safeParse(name).success) names.add(name)
    }
  }
  for (const name of BUILTIN_SCENARIO_NAMES) names.add(name)
  return [...names]
}

/** Reads a scenario file and the fixtures it names (relative to the file). */
export async function loadScenarioFile(file: string): Promise<Scenario> {
  const json = await readJson(file)
  return resolveScenarioFile(json, file, fs.dirname(file))
}

/**
 * Validates a scenario value and reads its fixtures. `origin` names it in error messages;
 * `baseDir` is where fixture paths start (the working directory when undefined).
 */
export async function resolveScenarioFile(value: unknown, origin: string, baseDir: string | undefined): Promise<Scenario> {
  const parsed = ScenarioFile.safeParse(value)
  if (!parsed.success) {
    throw new PetstoreError('invalid_scenario', `Invalid scenario ${origin}: ${describeIssues(parsed.error)}`)
  }
  const file = parsed.data
  const fixture = async <T>(
    source: T | { fixture: string },
    schema: z.ZodType<T>,
    field: string,
  ): Promise<T> => {
    if (!isFixtureRef(source)) return source
    const path = baseDir === undefined ? source.fixture : fs.resolve(baseDir, source.fixture)
    const records = schema.safeParse(await readJson(path, `${origin}: seed.${field}.fixture`))
    if (!records.success) {
      throw new PetstoreError('invalid_scenario', `Invalid fixture ${path}: ${describeIssues(records.error)}`)
    }
    return records.data
  }
  const categories =
    'generate' in file.seed.categories
      ? file.seed.categories
      : await fixture(file.seed.categories, CategorySeeds, 'categories')
  return {
    name: file.name,
    version: file.version,
    description: file.description,
    apiKeys: file.apiKeys,
    seed: {
      categories,
      pets: await fixture(file.seed.pets, PetSeeds, 'pets'),
      orders: await fixture(file.seed.orders, OrderSeeds, 'orders'),
    },
    latency: file.latency,
    faults: file.faults,
    deprecation: file.deprecation,
  }
}

function isFixtureRef(value: unknown): value is { fixture: string } {
  return typeof value === 'object' && value !== null && !Array.isArray(value) && 'fixture' in value
}

/** Paths end in `.json` or hold a separator; anything else is a name. */
export function looksLikePath(input: string): boolean {
  return input.endsWith('.json') || input.includes('/') || input.includes('\\')
}

async function readJson(file: string, referredFrom?: string): Promise<unknown> {
  let text: string
  try {
    text = await fs.readText(file)
  } catch (error) {
    if (error instanceof PetstoreError) throw error
    const where = referredFrom ? ` (named by ${referredFrom})` : ''
    throw new PetstoreError(
      'scenario_not_readable',
      `Cannot read ${file}${where}: ${(error as NodeJS.ErrnoException).code ?? String(error)}. Check the path.`,
      { cause: error },
    )
  }
  try {
    return JSON.parse(text)
  } catch (error) {
    throw new PetstoreError('invalid_scenario', `Invalid JSON in ${file}: ${(error as Error).message}`, { cause: error })
  }
}
