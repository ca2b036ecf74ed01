import { execFileSync } from 'node:child_process'
import { readdirSync, readFileSync, symlinkSync } from 'node:fs'
import { mkdtemp, readFile, writeFile, mkdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { describe, expect, it, onTestFinished } from 'vitest'
import { listScenarioNames, loadScenario, PetstoreError, type ScenarioFile } from '../src/index.js'
import { withoutPaths } from '../src/scenario/scenario-loader.js'

const root = new URL('..', import.meta.url).pathname

async function scratch(files: Record<string, unknown>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'petstore-scenarios-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  for (const [name, content] of Object.entries(files)) {
    await mkdir(join(dir, name, '..'), { recursive: true })
    await writeFile(join(dir, name), typeof content === 'string' ? content : JSON.stringify(content))
  }
  return dir
}

const minimal = { name: 'shop', version: '1.0.0', description: 'a shop' }

async function failure(promise: Promise<unknown>): Promise<PetstoreError> {
  const error = await promise.then(
    () => undefined,
    (error: unknown) => error,
  )
  expect(error).toBeInstanceOf(PetstoreError)
  return error as PetstoreError
}

describe('loading scenarios', () => {
  it('loads a file and the fixtures it names, relative to the file', async () => {
    const dir = await scratch({
      'scenarios/shop.json': { ...minimal, seed: { categories: { fixture: '../fixtures/c.json' } } },
      'fixtures/c.json': [{ id: 3, name: 'Geckos' }],
    })
    const scenario = await loadScenario(join(dir, 'scenarios/shop.json'))
    expect(scenario.seed.categories).toEqual([{ id: 3, name: 'Geckos' }])
    expect(scenario.latency).toBe(0)
  })

  it.each([
    { name: 'a missing version', file: { name: 'shop', description: 'd' }, field: 'version' },
    { name: 'a bad name', file: { ...minimal, name: '../etc' }, field: 'name: must be 1-64 letters' },
    { name: 'an unknown field', file: { ...minimal, colour: 'red' }, field: 'colour' },
    { name: 'a category without a name', file: { ...minimal, seed: { categories: [{ id: 1 }] } }, field: 'seed.categories[0].name: name must be a non-empty string' },
    { name: 'a blank category name', file: { ...minimal, seed: { categories: [{ name: ' ' }] } }, field: 'seed.categories[0].name' },
    { name: 'duplicate ids', file: { ...minimal, seed: { categories: [{ id: 1, name: 'a' }, { id: 1, name: 'b' }] } }, field: 'duplicate id 1' },
    { name: 'an unsafe id', file: { ...minimal, seed: { pets: [{ id: 2 ** 60 }] } }, field: 'seed.pets[0].id: id must be a safe integer' },
    { name: 'a latency range upside down', file: { ...minimal, latency: { min: 50, max: 10 } }, field: 'latency' },
    { name: 'a fault rate over 1', file: { ...minimal, faults: { rate: 1.5 } }, field: 'faults.rate' },
    { name: 'a sunset that is no date', file: { ...minimal, deprecation: { sunset: 'soon' } }, field: 'deprecation.sunset' },
  ])('refuses $name, naming the file and the field', async ({ file, field }) => {
    const dir = await scratch({ 'bad.json': file })
    const error = await failure(loadScenario(join(dir, 'bad.json')))
    expect(error.code).toBe('invalid_scenario')
    expect(error.message).toContain(join(dir, 'bad.json'))
    expect(error.message).toContain(field)
  })

  it('refuses a fixture with a bad record, naming the fixture file, the scenario that uses it and the record (new-user trial P9)', async () => {
    const dir = await scratch({
      'shop.json': { ...minimal, seed: { categories: { fixture: 'c.json' } } },
      'c.json': [{ name: 'ok' }, { name: 7 }],
    })
    const error = await failure(loadScenario(join(dir, 'shop.json')))
    expect(error.message).toBe(`Invalid fixture ${join(dir, 'c.json')} (seed.categories.fixture of ${join(dir, 'shop.json')}): [1].name: name must be a non-empty string`)
  })

  it('refuses a fixture category whose name holds an unpaired surrogate, which a store would alter (issue 20 F08)', async () => {
    const dir = await scratch({
      'shop.json': { ...minimal, seed: { categories: { fixture: 'c.json' } } },
      'c.json': [{ name: 'ok' }, { name: 'a\ud800b' }],
    })
    const error = await failure(loadScenario(join(dir, 'shop.json')))
    expect(error.message).toBe(`Invalid fixture ${join(dir, 'c.json')} (seed.categories.fixture of ${join(dir, 'shop.json')}): [1].name: name must be well-formed Unicode text (it holds an unpaired UTF-16 surrogate)`)
  })

  it('refuses a missing fixture, saying which scenario names it', async () => {
    const dir = await scratch({ 'shop.json': { ...minimal, seed: { orders: { fixture: 'gone.json' } } } })
    const error = await failure(loadScenario(join(dir, 'shop.json')))
    expect(error.code).toBe('scenario_not_readable')
    expect(error.message).toContain('seed.orders.fixture')
  })

  it('says a message to a client with each path by its last part, the paths it names known whole (spaces and all), and URLs kept (review40 R5)', () => {
    const message = 'Invalid JSON in /srv/ops notes/env file (named by /srv/scenarios/leaky.json: seed.orders.fixture): see https://example.com/docs/scenarios or C:\\data\\x.json'
    // Before: "Invalid JSON in notes/env… " cut to "ops env file", and the URL to "scenarios".
    expect(withoutPaths(message, ['/srv/ops notes/env file', '/srv/scenarios/leaky.json'])).toBe(
      'Invalid JSON in env file (named by leaky.json: seed.orders.fixture): see https://example.com/docs/scenarios or x.json',
    )
  })

  it('says a fixture named "/" as it is, the scenario named by its file alone (review41 R5)', () => {
    const message = 'Cannot read fixture / (named by /srv/scenarios/root.json: seed.pets.fixture): EISDIR (a directory, not a file). Check the path.'
    // Before: "Cannot read fixture  (named by root.json: …)": cutting "/" took every separator, the name too.
    expect(withoutPaths(message, ['/', '/srv/scenarios/root.json'])).toBe('Cannot read fixture / (named by root.json: seed.pets.fixture): EISDIR (a directory, not a file). Check the path.')
  })

  it('refuses malformed JSON', async () => {
    const dir = await scratch({ 'shop.json': '{ "name": ' })
    expect((await failure(loadScenario(join(dir, 'shop.json')))).message).toMatch(/^Invalid JSON in /)
  })

  it("refuses a fixture of text that is not JSON without quoting the file's bytes (attack40 F4)", async () => {
    const dir = await scratch({ 'shop.json': { ...minimal, seed: { orders: { fixture: 'secret.txt' } } }, 'secret.txt': 'root:x:0:0:root:/root:/bin/bash' })
    const { message } = await failure(loadScenario(join(dir, 'shop.json')))
    // Before: "Unexpected token 'r', "root:x:0:0"... is not valid JSON", in a switch's 500 to a tenant (attack42 F4: the
    // token 'r' was still quoted after attack40 F4's fix).
    expect(message.startsWith(`Invalid JSON in ${join(dir, 'secret.txt')} (named by ${join(dir, 'shop.json')}: seed.orders.fixture): not valid JSON`)).toBe(true)
    expect(message).toMatch(/: not valid JSON( \(at position \d+ \(line \d+ column \d+\)\))?$/)
  })

  it('names the scenario whose fixture is not JSON, and where in the fixture, by line and column (trial41 R4)', async () => {
    const dir = await scratch({ 'shop.json': { ...minimal, seed: { pets: { fixture: 'pets.json' } } }, 'pets.json': '[\n  { "id": 1 },\n  { "id": 2, }\n]' })
    const { message } = await failure(loadScenario(join(dir, 'shop.json')))
    // Before: "Invalid JSON in …/pets.json: not valid JSON (at position 29)", the scenario unnamed (Node 20).
    expect(message).toBe(`Invalid JSON in ${join(dir, 'pets.json')} (named by ${join(dir, 'shop.json')}: seed.pets.fixture): not valid JSON (at position 30 (line 3 column 14))`)
  })

  it.each([
    { what: 'a FIFO', make: (path: string) => execFileSync('mkfifo', [path]) },
    { what: 'a device (/dev/zero)', make: (path: string) => symlinkSync('/dev/zero', path) },
  ])('refuses $what named as a fixture at once, reading nothing (attack40 F4)', async ({ make }) => {
    const dir = await scratch({ 'shop.json': { ...minimal, seed: { orders: { fixture: 'odd.json' } } } })
    make(join(dir, 'odd.json'))
    // Before: a FIFO held the load forever; /dev/zero was read to 512 MB.
    const error = await failure(loadScenario(join(dir, 'shop.json')))
    expect(error.code).toBe('scenario_not_readable')
    expect(error.message).toContain('not a regular file (a pipe, a device, a socket)')
  })

  it.each([
    { what: 'a FIFO', make: (path: string) => execFileSync('mkfifo', [path]) },
    { what: 'a device (/dev/zero)', make: (path: string) => symlinkSync('/dev/zero', path) },
  ])('says $what in the scenarios directory is not a regular file, not that there is no such scenario (attack42 F4)', async ({ make }) => {
    const dir = await scratch({})
    make(join(dir, 'odd.json'))
    expect(await listScenarioNames({ scenariosDir: dir })).toContain('odd')
    // Before: "Cannot use scenario "odd": no such scenario. Known: odd, …".
    const error = await failure(loadScenario('odd', { scenariosDir: dir }))
    expect(error.code).toBe('scenario_not_readable')
    expect(error.message).toContain('not a regular file (a pipe, a device, a socket)')
  })

  it('finds names in a scenarios directory before the built-ins, and lists both', async () => {
    const dir = await scratch({ 'default.json': { ...minimal, name: 'default', description: 'mine' }, 'extra.json': minimal })
    expect((await loadScenario('default', { scenariosDir: dir })).description).toBe('mine')
    expect((await loadScenario('empty', { scenariosDir: dir })).name).toBe('empty')
    expect(await listScenarioNames({ scenariosDir: dir })).toEqual(
      expect.arrayContaining(['default', 'extra', 'empty', 'large-catalog']),
    )
  })

  it('refuses names that could walk out of the scenarios directory', async () => {
    const error = await failure(loadScenario('..\u0000passwd', { scenariosDir: '/tmp' }))
    expect(error.code).toBe('unknown_scenario')
  })

  it('expands generated categories only when seeding', async () => {
    const scenario = await loadScenario('large-catalog')
    expect(scenario.seed.categories).toEqual({
      generate: { count: 10000, name: 'Category {n}', description: 'Generated category number {n}' },
    })
  })
})

describe('the published scenario JSON Schema', () => {
  const schema = JSON.parse(readFileSync(join(root, 'schema/scenario.schema.json'), 'utf8')) as object
  const validate = new Ajv2020({ strict: false }).compile(schema)

  it.each(readdirSync(join(root, 'scenarios')))('accepts the shipped scenario %s', async (file) => {
    const content = JSON.parse(await readFile(join(root, 'scenarios', file), 'utf8')) as unknown
    expect(validate(content), JSON.stringify(validate.errors)).toBe(true)
  })

  const loads = async (file: object) =>
    loadScenario(file as ScenarioFile).then(
      () => true,
      () => false,
    )

  it.each([
    { name: 'a minimal scenario', file: minimal, valid: true },
    { name: 'an upper-case name', file: { ...minimal, name: 'Shop_2' }, valid: true },
    { name: 'a path as name', file: { ...minimal, name: '../etc' }, valid: false },
    { name: 'an unknown field', file: { ...minimal, colour: 'red' }, valid: false },
    { name: 'a missing version', file: { name: 'x', description: 'd' }, valid: false },
    { name: 'a blank category name', file: { ...minimal, seed: { categories: [{ name: '  ' }] } }, valid: false },
    { name: 'a category id of 0', file: { ...minimal, seed: { categories: [{ id: 0, name: 'a' }] } }, valid: false },
    { name: 'a generator name without {n}', file: { ...minimal, seed: { categories: { generate: { count: 2, name: 'Same' } } } }, valid: false },
    { name: 'a negative latency', file: { ...minimal, latency: -1 }, valid: false },
    { name: 'a fault rate over 1', file: { ...minimal, faults: { rate: 2 } }, valid: false },
    { name: 'a sunset that is not a date', file: { ...minimal, deprecation: { sunset: 'soon' } }, valid: false },
  ])('agrees with the loader on $name', async ({ file, valid }) => {
    expect(validate(file), JSON.stringify(validate.errors)).toBe(valid)
    expect(await loads(file)).toBe(valid)
  })

  it('leaves to the loader only what a JSON Schema cannot say: unique ids, min not above max', async () => {
    const duplicates = { ...minimal, seed: { categories: [{ id: 1, name: 'a' }, { id: 1, name: 'b' }] } }
    const range = { ...minimal, latency: { min: 9, max: 1 } }
    for (const file of [duplicates, range]) {
      expect(validate(file)).toBe(true)
      expect(await loads(file)).toBe(false)
    }
  })
})
