/**
 * The types a test author meets: built-in scenario names that autocomplete while any name still
 * compiles, and a scenario JSON imported as a module passed as it is. `tsc` (npm test) checks
 * this file; the completions are asked of TypeScript's language service, as an editor does (in
 * the full run).
 */
import { fileURLToPath } from 'node:url'
import ts from 'typescript'
import { describe, expect, expectTypeOf, it } from 'vitest'
import shop from './fixtures/shop.scenario.json' with { type: 'json' }
import {
  BUILTIN_SCENARIO_NAMES,
  createPetstore,
  listScenarioNames,
  type BuiltinScenarioName,
  type Petstore,
  type ScenarioInput,
  type SeedData,
} from '../src/index.js'
import { FULL_TESTS } from './support/test-scale.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

describe('scenario names', () => {
  it('types BUILTIN_SCENARIO_NAMES as a tuple of the embedded names', async () => {
    expectTypeOf(BUILTIN_SCENARIO_NAMES).toEqualTypeOf<readonly ['after-sunset', 'default', 'empty', 'flaky', 'large-catalog']>()
    expectTypeOf<BuiltinScenarioName>().toEqualTypeOf<'after-sunset' | 'default' | 'empty' | 'flaky' | 'large-catalog'>()
    expect([...BUILTIN_SCENARIO_NAMES]).toEqual(await listScenarioNames())
  })

  it('takes any name where a custom scenario is allowed', () => {
    expectTypeOf<'empty'>().toExtend<ScenarioInput>()
    expectTypeOf<string>().toExtend<ScenarioInput>()
    expectTypeOf<Petstore['useScenario']>().parameter(0).toEqualTypeOf<ScenarioInput>()
    // @ts-expect-error a number is no scenario
    expect(() => createPetstore({ scenario: 42 })).toThrow('received 42')
  })

  // A language service parses the whole program, zod's types included (2-6 s): in the full run only.
  it.runIf(FULL_TESTS)('offers the built-in names as completions in an editor', () => {
    const file = `${ROOT}test/.completions.ts`
    const text = "import { createPetstore } from '../src/index.js'\ncreatePetstore({ scenario: '' })\n"
    const { options } = ts.parseJsonConfigFileContent(ts.readConfigFile(`${ROOT}tsconfig.json`, (path) => ts.sys.readFile(path)).config, ts.sys, ROOT)
    const host: ts.LanguageServiceHost = {
      getCompilationSettings: () => options,
      getScriptFileNames: () => [file],
      getScriptVersion: () => '1',
      getScriptSnapshot: (name) => {
        const source = name === file ? text : ts.sys.readFile(name)
        return source === undefined ? undefined : ts.ScriptSnapshot.fromString(source)
      },
      getCurrentDirectory: () => ROOT,
      getDefaultLibFileName: (compilerOptions) => ts.getDefaultLibFilePath(compilerOptions),
      fileExists: (name) => name === file || ts.sys.fileExists(name),
      readFile: (name) => (name === file ? text : ts.sys.readFile(name)),
    }
    const service = ts.createLanguageService(host)
    const completions = service.getCompletionsAtPosition(file, text.indexOf("''") + 1, {})
    expect(completions?.entries.map((entry) => entry.name).sort()).toEqual([...BUILTIN_SCENARIO_NAMES].sort())
  })
})

describe('a scenario JSON imported as a module', () => {
  it('is accepted as it is, though TypeScript reads its outcomes as string[]', async () => {
    expectTypeOf(shop.faults.outcomes).toEqualTypeOf<string[]>()
    const petstore = createPetstore({ scenario: shop })
    await petstore.ready
    expect(petstore.scenario.faults?.outcomes).toEqual(['503', 'network'])
    await petstore.useScenario(shop)
    expect((await petstore.categories.list()).map((category) => category.name)).toEqual(['Ferrets', 'Owls'])
  })

  it('is still judged when used: an outcome the format does not know is refused', async () => {
    const broken = { ...shop, faults: { ...shop.faults, outcomes: ['502'] } }
    const petstore = createPetstore()
    await expect(petstore.useScenario(broken)).rejects.toThrow('Invalid scenario (scenario object): faults.outcomes[0]: must be "500", "503" or "network"')
  })

  it('takes an object written as const', () => {
    const scenario = { name: 'x', version: '1.0.0', description: 'd', faults: { rate: 0.5, outcomes: ['500'] } } as const
    expectTypeOf(scenario).toExtend<ScenarioInput>()
  })
})

describe('seed data', () => {
  it('is typed from the scenario format', () => {
    expectTypeOf<{ categories: { name: string }[] }>().toExtend<SeedData>()
    expectTypeOf<{ categories: { generate: { count: number; name: string } } }>().toExtend<SeedData>()
    expectTypeOf<{ pets: { id: number; name: string }[] }>().toExtend<SeedData>()
    // @ts-expect-error a category needs a name
    expectTypeOf<{ categories: { description: string }[] }>().toExtend<SeedData>()
    // @ts-expect-error no such collection
    expectTypeOf<{ categorys: [] }>().toExtend<SeedData>()
  })
})
