/**
 * Live reload for scenario authors (`watch`, `serve --watch`): real files in a temporary
 * directory, edited as an author does, and a real server on loopback answering from them.
 */
import { spawn } from 'node:child_process'
import { mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'
import type { Category } from '../../src/index.js'
import { createSandboxApp } from '../../src/server.js'
import type { ScenarioReload } from '../../src/server/scenario-watcher.js'
import { CLI_BINARY, runCliHere } from '../support/sandbox-cli.js'
import { auth, jsonOf, startSandbox, useStore, type RunningSandbox } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'

/**
 * How long a test waits for a reload before failing. An edit is taken up in about 60 ms (a
 * 50 ms debounce); the margin is for a loaded machine, not a promise.
 */
const RELOAD_WAIT_MS = 5_000

function scenarioDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-watch-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  return dir
}

interface ShopOptions {
  readonly name?: string
  readonly version?: string
  readonly categories?: unknown
}

/** A scenario file's text: categories inline, or a fixture reference. */
function shop({ name = 'shop', version = '1.0.0', categories = [{ name: 'Dogs' }] }: ShopOptions = {}): string {
  return JSON.stringify({ name, version, description: 'An author’s shop', seed: { categories } }, null, 2)
}

async function names(running: RunningSandbox, key: string): Promise<string[]> {
  const response = await running.fetch('/v1/categories', { headers: auth(key) })
  expect(response.status).toBe(200)
  return ((await jsonOf(response)) as Category[]).map((category) => category.name)
}

async function create(running: RunningSandbox, key: string, name: string): Promise<void> {
  const response = await running.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name }) })
  expect(response.status).toBe(201)
}

async function reset(running: RunningSandbox, key: string): Promise<void> {
  const response = await running.fetch('/__sandbox/reset', { method: 'POST', headers: auth(key) })
  expect(response.status).toBe(200)
}

interface Health {
  status: string
  watch?: { scenario: string; version: string; files: number; reloadedAt: string | null; errors: { file: string; error: string }[] }
}

async function health(running: RunningSandbox): Promise<Health> {
  const response = await running.fetch('/__sandbox/health')
  expect(response.status).toBe(200)
  return (await jsonOf(response)) as Health
}

/**
 * How long a test waits for a spawned `serve` to print where it listens: a process start (Node.js, the bundle), not a
 * reload; 5 s was short on a machine busy with other work (a start took longer, the test failed before any reload).
 */
const START_WAIT_MS = 30_000

/** Polls `read` until it equals `expected`; fails with the last value after `waitMs` ({@link RELOAD_WAIT_MS}). */
async function eventually<T>(read: () => Promise<T>, expected: T, waitMs = RELOAD_WAIT_MS): Promise<void> {
  const until = Date.now() + waitMs
  for (;;) {
    const value = await read()
    try {
      expect(value).toEqual(expected)
      return
    } catch (error) {
      if (Date.now() > until) throw error
    }
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** A sandbox on a scenario file in a fresh directory, with every reload recorded. */
async function watchedShop(first: string = shop(), options: Parameters<typeof startSandbox>[0] = {}) {
  const dir = scenarioDir()
  const file = join(dir, 'shop.json')
  writeFileSync(file, first)
  const reloads: ScenarioReload[] = []
  const running = await startSandbox({ scenario: file, watch: true, apiKeys: ['reader', 'writer'], onReload: (reload) => reloads.push(reload), ...options })
  return { dir, file, reloads, running }
}

describe.each(STORES)('live reload ($name store)', (kind) => {
  useStore(kind)

  it('takes a switch to the start scenario by its name, made while its file is saved, for the start scenario as the watcher holds it: on its seed, not a writer of a copy (attack59 F5)', async () => {
    const dir = scenarioDir()
    const file = join(dir, 'shop.json')
    writeFileSync(file, shop())
    const running = await startSandbox({ scenario: 'shop', scenariosDir: dir, watch: true, apiKeys: ['k1'], onReload: () => undefined })
    expect(await names(running, 'k1')).toEqual(['Dogs'])
    // Saved; the switch comes before the watcher takes the save up.
    writeFileSync(file, shop({ version: '2.0.0', categories: [{ name: 'Cats' }] }))
    const switched = await running.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('k1', true), body: JSON.stringify({ name: 'shop' }) })
    expect(switched.status).toBe(200)
    await eventually(async () => (await health(running)).watch?.version, '2.0.0')
    expect(await names(running, 'k1')).toEqual(['Cats'])
    // Before: the version its file held then, stored as the tenant's own (on Redis, its own keys for good).
    expect(await running.sandbox.tenants.storage.list()).toEqual([])
  })

  it('shows an edited seed at once to a tenant that never wrote, and at its next reset to one that did', async () => {
    const { file, running } = await watchedShop()
    expect(await names(running, 'reader')).toEqual(['Dogs'])
    await create(running, 'writer', 'Mine')
    writeFileSync(file, shop({ version: '1.1.0', categories: [{ name: 'Cats' }, { name: 'Birds' }] }))
    await eventually(() => names(running, 'reader'), ['Cats', 'Birds'])
    expect(await names(running, 'writer')).toEqual(['Dogs', 'Mine'])
    await reset(running, 'writer')
    expect(await names(running, 'writer')).toEqual(['Cats', 'Birds'])
    expect((await health(running)).watch).toMatchObject({ scenario: 'shop', version: '1.1.0', errors: [] })
  })

  it('keeps serving the last good version of a broken edit, says why, and takes up the fix', async () => {
    const { file, reloads, running } = await watchedShop()
    writeFileSync(file, '{ "name": "shop", ')
    await eventually(async () => (await health(running)).watch?.errors.map((error) => error.file), ['shop.json'])
    const refused = await health(running)
    expect(refused.status).toBe('ok')
    expect(refused.watch?.errors[0]?.error).toMatch(/^Invalid JSON in shop\.json: /)
    expect(reloads.at(-1)?.message).toContain(`Invalid JSON in ${file}`)
    expect(reloads.at(-1)?.message).toContain('still serving shop 1.0.0')
    expect(await names(running, 'reader')).toEqual(['Dogs'])
    writeFileSync(file, shop({ version: '1.0.1', categories: [{ name: 'Fixed' }] }))
    await eventually(() => names(running, 'reader'), ['Fixed'])
    expect((await health(running)).watch?.errors).toEqual([])
  })
})

describe('live reload', () => {
  it('reloads the scenario when a fixture it names is edited', async () => {
    const dir = scenarioDir()
    writeFileSync(join(dir, 'categories.json'), JSON.stringify([{ name: 'From fixture' }]))
    const { running } = await watchedShop(shop({ categories: { fixture: join(dir, 'categories.json') } }))
    expect(await names(running, 'reader')).toEqual(['From fixture'])
    expect((await health(running)).watch?.files).toBe(2)
    writeFileSync(join(dir, 'categories.json'), JSON.stringify([{ name: 'Edited fixture' }]))
    await eventually(() => names(running, 'reader'), ['Edited fixture'])
  })

  it('takes up an editor’s save through a temporary file renamed over the scenario', async () => {
    const { dir, file, running } = await watchedShop()
    for (const [version, category] of [['1.0.1', 'First save'], ['1.0.2', 'Second save']] as const) {
      writeFileSync(join(dir, '.shop.json.swp'), shop({ version, categories: [{ name: category }] }))
      renameSync(join(dir, '.shop.json.swp'), file)
      await eventually(() => names(running, 'reader'), [category])
    }
  })

  it.each([
    ['a schema error', (file: string) => writeFileSync(file, shop({ categories: [{ name: 7 }] })), /^Invalid scenario shop\.json: /],
    ['a renamed scenario', (file: string) => writeFileSync(file, shop({ name: 'other' })), /name changed from "shop" to "other"/],
    ['a fixture deleted', (_file: string, fixture: string) => unlinkSync(fixture), /^Cannot read fixture categories\.json .*ENOENT \(no such file\)/],
  ])('keeps the last good version on %s, and reloads once it is fixed', async (_case, breakIt, reason) => {
    const dir = scenarioDir()
    const fixture = join(dir, 'categories.json')
    writeFileSync(fixture, JSON.stringify([{ name: 'Good' }]))
    const good = shop({ categories: { fixture } })
    const { file, reloads, running } = await watchedShop(good)
    breakIt(file, fixture)
    await eventually(async () => (await health(running)).watch?.errors.length, 1)
    expect((await health(running)).watch?.errors[0]).toMatchObject({ file: 'shop.json', error: expect.stringMatching(reason) })
    expect(reloads.at(-1)?.error).toBeDefined()
    expect(await names(running, 'reader')).toEqual(['Good'])
    writeFileSync(fixture, JSON.stringify([{ name: 'Fixed' }]))
    writeFileSync(file, good)
    await eventually(() => names(running, 'reader'), ['Fixed'])
    expect((await health(running)).watch?.errors).toEqual([])
  })

  it('gives a tenant on a scenario of the scenarios directory its edited version at its next reset', async () => {
    const dir = scenarioDir()
    writeFileSync(join(dir, 'shop.json'), shop())
    writeFileSync(join(dir, 'sale.json'), shop({ name: 'sale', categories: [{ name: 'Old sale' }] }))
    const running = await startSandbox({ scenario: 'shop', scenariosDir: dir, watch: true, apiKeys: ['k1'], onReload: () => undefined })
    const switched = await running.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('k1', true), body: JSON.stringify({ name: 'sale' }) })
    expect(switched.status).toBe(200)
    writeFileSync(join(dir, 'sale.json'), shop({ name: 'sale', version: '2.0.0', categories: [{ name: 'New sale' }] }))
    await eventually(async () => (await health(running)).watch?.reloadedAt !== null, true)
    expect(await names(running, 'k1')).toEqual(['Old sale'])
    await reset(running, 'k1')
    expect(await names(running, 'k1')).toEqual(['New sale'])
  })

  it('switches and resets to the last good version of a scenario of the scenarios directory while its file is broken (a save in place under way), not 500 (attack65 F2)', async () => {
    const dir = scenarioDir()
    writeFileSync(join(dir, 'shop.json'), shop())
    const sale = join(dir, 'sale.json')
    writeFileSync(sale, shop({ name: 'sale', categories: [{ name: 'Good sale' }] }))
    const running = await startSandbox({ scenario: 'shop', scenariosDir: dir, watch: true, apiKeys: ['k1', 'k2'], onReload: () => undefined })
    // An editor saving in place: the file cut short, the rest not written yet. The switch reads it meanwhile.
    writeFileSync(sale, shop({ name: 'sale', categories: [{ name: 'Good sale' }] }).slice(0, 30))
    const switched = await running.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('k1', true), body: JSON.stringify({ name: 'sale' }) })
    expect(switched.status).toBe(200)
    expect(await jsonOf(switched)).toMatchObject({ scenario: { name: 'sale', version: '1.0.0' } })
    expect(await names(running, 'k1')).toEqual(['Good sale'])
    await create(running, 'k1', 'Mine')
    const resetAnswer = await running.fetch('/__sandbox/reset', { method: 'POST', headers: auth('k1') })
    expect(resetAnswer.status).toBe(200)
    expect(await names(running, 'k1')).toEqual(['Good sale'])
    const resetOnto = await running.fetch('/__sandbox/reset', { method: 'POST', headers: auth('k2', true), body: JSON.stringify({ scenario: 'sale' }) })
    expect(resetOnto.status).toBe(200)
    expect(await names(running, 'k2')).toEqual(['Good sale'])
    // The save ends: its version is served from then on.
    writeFileSync(sale, shop({ name: 'sale', version: '2.0.0', categories: [{ name: 'New sale' }] }))
    await reset(running, 'k1')
    expect(await names(running, 'k1')).toEqual(['New sale'])
  })

  it('answers 500 invalid_scenario for a broken file of the scenarios directory the watch never read whole', async () => {
    const dir = scenarioDir()
    writeFileSync(join(dir, 'shop.json'), shop())
    writeFileSync(join(dir, 'draft.json'), '{ "name": "draft", ')
    const running = await startSandbox({ scenario: 'shop', scenariosDir: dir, watch: true, apiKeys: ['k1'], onReload: () => undefined })
    const switched = await running.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('k1', true), body: JSON.stringify({ name: 'draft' }) })
    expect(switched.status).toBe(500)
    expect(await jsonOf(switched)).toMatchObject({ code: 'invalid_scenario' })
    expect(await names(running, 'k1')).toEqual(['Dogs'])
  })

  it('keeps tenants within the memory budget when an edit makes the start seed large: tenants that never wrote leave memory, and take the new seed on their next request (attack47 F1)', async () => {
    const budget = 4 * 1024 * 1024
    const { file, running } = await watchedShop(shop(), { apiKeys: undefined, anyKey: true, memoryBudgetBytes: budget })
    const readers = Array.from({ length: 40 }, (_, i) => `reader-${i}`)
    for (const key of readers) expect(await names(running, key)).toEqual(['Dogs'])
    await create(running, 'writer', 'Mine')
    // About a megabyte a tenant, by the budget's estimate: 40 of them, ten times the budget.
    writeFileSync(file, shop({ version: '2.0.0', categories: { generate: { count: 3000, name: 'Category {n}', description: `About {n} ${'x'.repeat(200)}` } } }))
    await eventually(async () => (await health(running)).watch?.version, '2.0.0')
    // Before: every reader's store built the new seed at once, unadmitted (the attack's 150 of 100,000: out of memory).
    expect(running.sandbox.tenants.heldBytes()).toBeLessThan(budget)
    expect((await names(running, readers[0]!)).length).toBe(3000)
    expect(await names(running, 'writer')).toEqual(['Dogs', 'Mine'])
    expect(running.sandbox.tenants.heldBytes()).toBeLessThan(budget)
  })

  it('keeps tenants within the memory budget when an edit makes the start seed large while they wait out a latency: they take it on their next request (review43 R5)', async () => {
    const budget = 4 * 1024 * 1024
    const slow = (version: string, categories: unknown) => JSON.stringify({ name: 'shop', version, description: 'A slow shop', latency: { min: 1500, max: 1500 }, seed: { categories } })
    const { file, running } = await watchedShop(slow('1.0.0', [{ name: 'Dogs' }]), { apiKeys: undefined, anyKey: true, memoryBudgetBytes: budget })
    const readers = Array.from({ length: 30 }, (_, i) => `reader-${i}`)
    // Each reader's request waits out the latency while the file is saved.
    const waiting = readers.map((key) => running.fetch('/v1/categories', { headers: auth(key) }).then((answer) => answer.arrayBuffer()))
    await new Promise((resolve) => setTimeout(resolve, 300))
    // About a megabyte a tenant, by the budget's estimate: 30 of them, seven times the budget.
    writeFileSync(file, slow('2.0.0', { generate: { count: 3000, name: 'Category {n}', description: `About {n} ${'x'.repeat(200)}` } }))
    await eventually(async () => (await health(running)).watch?.version, '2.0.0')
    // Before: each busy reader's store built the new seed at once, unadmitted.
    expect(running.sandbox.tenants.heldBytes()).toBeLessThan(budget)
    await Promise.all(waiting)
    expect(running.sandbox.tenants.heldBytes()).toBeLessThan(budget)
    expect((await names(running, readers[0]!)).length).toBe(3000)
  })

  it('gives a tenant whose requests always overlap the new seed once those under way at a --watch save end (review45 F3)', async () => {
    const slow = (version: string, categories: unknown) => JSON.stringify({ name: 'shop', version, description: 'A slow shop', latency: { min: 300, max: 300 }, seed: { categories } })
    const { file, running } = await watchedShop(slow('1.0.0', [{ name: 'Dogs' }]), { apiKeys: undefined, anyKey: true })
    // A request every 100 ms, each taking 300 ms: at every moment one or more is under way.
    const seen: string[][] = []
    let saved = false
    let until = Number.POSITIVE_INFINITY
    const load = (async () => {
      const running_: Promise<void>[] = []
      while (Date.now() < until) {
        running_.push(names(running, 'poller').then((list) => void (saved && seen.push(list))))
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      await Promise.all(running_)
    })()
    await new Promise((resolve) => setTimeout(resolve, 500))
    writeFileSync(file, slow('2.0.0', [{ name: 'Cats' }]))
    await eventually(async () => (await health(running)).watch?.version, '2.0.0')
    saved = true
    until = Date.now() + 2000
    await load
    // Before: the old seed for as long as its requests overlapped (every answer 'Dogs').
    expect(seen.at(-1)).toEqual(['Cats'])
    expect(seen.filter((list) => list[0] === 'Cats').length).toBeGreaterThan(10)
  })

  it('resets a tenant that never wrote onto the new version when a --watch edit lands while its reset’s body comes: on its seed, not a writer (attack53 F1)', async () => {
    const { file, running } = await watchedShop(shop(), { apiKeys: undefined, anyKey: true })
    expect(await names(running, 'reader')).toEqual(['Dogs'])
    const { request } = await import('node:http')
    const url = new URL('/__sandbox/reset', running.origin)
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const sent = request(url, { method: 'POST', headers: { ...auth('reader', true), 'content-length': '2' } }, (res) => {
        let body = ''
        res.on('data', (chunk: Buffer) => (body += chunk.toString()))
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      sent.on('error', reject)
      sent.write('{')
      // The edit lands while the body is on its way.
      void (async () => {
        await new Promise((resolve) => setTimeout(resolve, 200))
        writeFileSync(file, shop({ version: '2.0.0', categories: [{ name: 'Cats' }] }))
        await eventually(async () => (await health(running)).watch?.version, '2.0.0')
        sent.end('}')
      })().catch(reject)
    })
    const { status, body } = await answer
    expect(status).toBe(200)
    // Before: reset onto version 1.0.0 (read before its body), a writer for good.
    expect(JSON.parse(body)).toMatchObject({ scenario: { version: '2.0.0' } })
    expect(await names(running, 'reader')).toEqual(['Cats'])
    expect(await running.sandbox.tenants.storage.list()).toEqual([])
  })

  it('keeps no scenario of the directory a --watch save read once its file is gone and no tenant holds it, in memory (attack47 F4)', async () => {
    const { setFlagsFromString } = await import('node:v8')
    const { runInNewContext } = await import('node:vm')
    setFlagsFromString('--expose-gc')
    const collect = runInNewContext('gc') as () => void
    const dir = scenarioDir()
    writeFileSync(join(dir, 'shop.json'), shop())
    const read: WeakRef<object>[] = []
    const running = await startSandbox({ scenario: 'shop', scenariosDir: dir, watch: true, anyKey: true, onReload: (reload) => reload.scenario && reload.scenario.name !== 'shop' && read.push(new WeakRef(reload.scenario)) })
    for (let i = 0; i < 5; i++) {
      writeFileSync(join(dir, `draft-${i}.json`), shop({ name: `draft-${i}` }))
      await eventually(async () => read.length, i + 1)
      unlinkSync(join(dir, `draft-${i}.json`))
    }
    expect(await names(running, 'reader')).toEqual(['Dogs'])
    await new Promise((resolve) => setTimeout(resolve, 300))
    collect()
    await new Promise((resolve) => setTimeout(resolve, 10))
    collect()
    // Before: each kept for good (fixtures and all), the heap filled by drafts saved and deleted.
    expect(read.filter((ref) => ref.deref() !== undefined)).toHaveLength(0)
  })

  it('counts a switch, and journals a create, that a request under way at a --watch save makes (review44 F3, attack55 F6, F7)', async () => {
    const dir = scenarioDir()
    const file = join(dir, 'shop.json')
    writeFileSync(file, shop())
    writeFileSync(join(dir, 'big.json'), shop({ name: 'big', categories: { generate: { count: 3000, name: 'Category {n}', description: `About {n} ${'x'.repeat(200)}` } } }))
    const running = await startSandbox({ scenario: file, scenariosDir: dir, watch: true, anyKey: true, onReload: () => undefined })
    expect(await names(running, 'switcher')).toEqual(['Dogs'])
    expect(await names(running, 'writer')).toEqual(['Dogs'])
    const { request } = await import('node:http')
    // Each request's body comes in two parts, the save landing between them.
    const slow = (key: string, path: string, method: string, body: string) =>
      new Promise<number>((resolve, reject) => {
        const sent = request(new URL(path, running.origin), { method, headers: { ...auth(key, true), 'content-length': String(Buffer.byteLength(body)) } }, (res) => {
          res.resume()
          res.on('end', () => resolve(res.statusCode ?? 0))
        })
        sent.on('error', reject)
        sent.write(body.slice(0, 1))
        void (async () => {
          await saved
          sent.end(body.slice(1))
        })().catch(reject)
      })
    let save!: () => void
    const saved = new Promise<void>((resolve) => (save = resolve))
    const answers = [slow('switcher', '/__sandbox/scenario', 'PUT', '{"name":"big"}'), slow('writer', '/v1/categories', 'POST', '{"name":"Mine"}')]
    await new Promise((resolve) => setTimeout(resolve, 200))
    const before = running.sandbox.tenants.heldBytes()
    writeFileSync(file, shop({ version: '2.0.0', categories: [{ name: 'Cats' }] }))
    await eventually(async () => (await health(running)).watch?.version, '2.0.0')
    save()
    expect(await Promise.all(answers)).toEqual([200, 201])
    // Before: both had left memory at the save; the switch's 3,000 categories were built uncounted (attack55 F7), and the
    // tenant read back as on the start scenario over big's categories (attack55 F6).
    expect(running.sandbox.tenants.heldBytes() - before).toBeGreaterThan(500_000)
    const state = (await jsonOf(await running.fetch('/__sandbox/state', { headers: auth('switcher') }))) as { scenario: { name: string }; categories: unknown[] }
    expect(state.scenario.name).toBe('big')
    expect(state.categories).toHaveLength(3000)
    const journal = (await jsonOf(await running.fetch('/__sandbox/requests', { headers: auth('writer') }))) as { method: string }[]
    expect(journal.map((entry) => entry.method)).toContain('POST')
    expect(await names(running, 'writer')).toEqual(['Dogs', 'Mine'])
  })

  it('admits writers’ resets onto a start seed a --watch edit made large: past the memory budget they are refused, not all built (review43 R4)', async () => {
    const budget = 4 * 1024 * 1024
    const { file, running } = await watchedShop(shop(), { apiKeys: undefined, anyKey: true, memoryBudgetBytes: budget })
    const writers = Array.from({ length: 12 }, (_, i) => `writer-${i}`)
    for (const key of writers) await create(running, key, 'Mine')
    // About a megabyte a tenant, by the budget's estimate.
    writeFileSync(file, shop({ version: '2.0.0', categories: { generate: { count: 3000, name: 'Category {n}', description: `About {n} ${'x'.repeat(200)}` } } }))
    await eventually(async () => (await health(running)).watch?.version, '2.0.0')
    const statuses = await Promise.all(writers.map((key) => running.fetch('/__sandbox/reset', { method: 'POST', headers: auth(key) }).then(async (answer) => (await answer.arrayBuffer(), answer.status))))
    // Before: all 12 answered 200, three times the budget held.
    expect(statuses).toContain(503)
    expect(running.sandbox.tenants.heldBytes()).toBeLessThanOrEqual(budget)
  })

  it('reports a broken file of the scenarios directory on health, the start scenario serving on', async () => {
    const dir = scenarioDir()
    writeFileSync(join(dir, 'shop.json'), shop())
    const running = await startSandbox({ scenario: 'shop', scenariosDir: dir, watch: true, apiKeys: ['k1'], onReload: () => undefined })
    writeFileSync(join(dir, 'draft.json'), '{')
    await eventually(async () => (await health(running)).watch?.errors.map((error) => error.file), ['draft.json'])
    expect(await names(running, 'k1')).toEqual(['Dogs'])
  })

  it.each([
    ['a backup of the start scenario under another file name', 'shop', 'shop-backup.json', 'shop'],
    ['a file named as a built-in start scenario', 'default', 'default.json', 'default'],
  ])('never lets %s replace the start seed (attack5 W1)', async (_case, start, fileName, name) => {
    const dir = scenarioDir()
    writeFileSync(join(dir, 'shop.json'), shop())
    const running = await startSandbox({ scenario: start, scenariosDir: dir, watch: true, apiKeys: ['k1'], onReload: () => undefined })
    const before = await names(running, 'k1')
    writeFileSync(join(dir, fileName), shop({ name, version: '0.9.0', categories: [{ name: 'Hijacked' }] }))
    await eventually(async () => (await health(running)).watch?.errors.map((error) => error.file), [fileName])
    expect(await names(running, 'k1')).toEqual(before)
    await reset(running, 'k1')
    expect(await names(running, 'k1')).toEqual(before)
  })

  it('takes up saves again once the scenario’s directory is deleted and made again (attack5 W2)', async () => {
    const root = scenarioDir()
    const dir = join(root, 'scenarios')
    mkdirSync(dir)
    const file = join(dir, 'shop.json')
    writeFileSync(file, shop())
    const running = await startSandbox({ scenario: file, watch: true, apiKeys: ['reader'], onReload: () => undefined })
    rmSync(dir, { recursive: true })
    mkdirSync(dir)
    writeFileSync(file, shop({ version: '1.0.1', categories: [{ name: 'Recreated' }] }))
    await eventually(() => names(running, 'reader'), ['Recreated'])
    writeFileSync(file, shop({ version: '1.0.2', categories: [{ name: 'Saved again' }] }))
    await eventually(() => names(running, 'reader'), ['Saved again'])
  })

  it('shows health no path and none of a file’s content, whatever a broken edit names (attack5 W4)', async () => {
    const dir = scenarioDir()
    writeFileSync(join(dir, '.env'), 'STAGING_KEY=secret-value\n')
    const { file, running } = await watchedShop()
    writeFileSync(file, shop({ categories: { fixture: join(dir, '.env') } }))
    await eventually(async () => (await health(running)).watch?.errors.length, 1)
    const [error] = (await health(running)).watch!.errors
    expect(error!.error).toMatch(/^Invalid JSON in \.env \(named by shop\.json: seed\.categories\.fixture\): /)
    expect(error!.error).not.toContain('STAGING')
    expect(error!.error).not.toContain(dir)
    expect(error!.error).not.toContain('/')
  })

  it('stops watching once closed', async () => {
    const dir = scenarioDir()
    const file = join(dir, 'shop.json')
    writeFileSync(file, shop())
    const reloads: ScenarioReload[] = []
    const sandbox = await createSandboxApp({ scenario: file, watch: true, demoDir: false, onReload: (reload) => reloads.push(reload) })
    await sandbox.close()
    writeFileSync(file, shop({ version: '9.0.0' }))
    // A reload would have been reported within its debounce; this waits for several.
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(reloads).toEqual([])
    expect(sandbox.scenario.version).toBe('1.0.0')
  })

  it('refuses watch with nothing to watch, naming what to give', async () => {
    await expect(createSandboxApp({ scenario: 'default', watch: true })).rejects.toThrow(
      'Invalid sandbox option watch: nothing to watch, the scenario "default" is built in. Give a scenario file',
    )
  })
})

describe('serve --watch', () => {
  it('says what it watches, and prints a line for each reload and a warning for each refused edit', async () => {
    const dir = scenarioDir()
    const file = join(dir, 'shop.json')
    writeFileSync(file, shop())
    const run = await runCliHere(['serve', '--port', '0', '--scenario', file, '--watch', '--quiet'])
    expect(run.stdout()).toContain('watching   1 scenario and fixture files')
    writeFileSync(file, shop({ version: '1.2.0' }))
    await eventually(async () => run.stdout().includes(`scenario reloaded: shop 1.2.0 from ${file}`), true)
    writeFileSync(file, '[')
    await eventually(async () => /petstore-sandbox: warning: scenario not reloaded: Invalid JSON in .*shop\.json.*\(still serving shop 1\.2\.0\)/.test(run.stderr()), true)
  })

  it('refuses --watch on a built-in scenario without --scenarios-dir', async () => {
    const run = await runCliHere(['serve', '--port', '0', '--watch'])
    expect(run.code).toBe(1)
    expect(run.stderr()).toContain('--watch has nothing to watch: scenario "default" is built in. Give a scenario file (--scenario ./shop.json) or --scenarios-dir')
  })
})

/** The same keys at every depth (values differ: times, versions). */
function shapeOf(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(shapeOf)
  if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([key, inner]) => [key, shapeOf(inner)]))
  return typeof value
}

describe("docs/real-service.md's Live reload part", () => {
  const ROOT = fileURLToPath(new URL('../../', import.meta.url))
  const part = /^## Live reload for scenario authors[\s\S]*?(?=\n#|<!-- \/section)/m.exec(readFileSync(join(ROOT, 'docs/real-service.md'), 'utf8'))?.[0] ?? ''

  it('runs its command word for word in a project with scenarios/shop.json, and health answers a broken save as it shows', async () => {
    const command = /```sh\n(npx petstore-sandbox serve [^\n]*)\n```/.exec(part)?.[1]
    expect(command).toBe('npx petstore-sandbox serve --scenario scenarios/shop.json --watch')
    const project = scenarioDir()
    mkdirSync(join(project, 'scenarios'))
    writeFileSync(join(project, 'scenarios', 'categories.json'), JSON.stringify([{ name: 'Dogs' }]))
    writeFileSync(join(project, 'scenarios', 'shop.json'), shop({ categories: { fixture: 'categories.json' } }))
    // The installed binary, in the project's directory; only the port is ours (4010 may be taken).
    const args = command!.split(' ').slice(2)
    const child = spawn(process.execPath, [join(ROOT, CLI_BINARY), ...args, '--port', '0', '--quiet'], { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] })
    onTestFinished(() => void child.kill())
    let stdout = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    await eventually(async () => /API\s+http:\/\/127\.0\.0\.1:\d+/.test(stdout), true, START_WAIT_MS)
    const origin = /API\s+(http:\/\/127\.0\.0\.1:\d+)/.exec(stdout)![1]!
    writeFileSync(join(project, 'scenarios', 'shop.json'), '{ "name": "shop", ')
    const read = async () => (await (await fetch(`${origin}/__sandbox/health`)).json()) as Health
    await eventually(async () => (await read()).watch?.errors.length, 1)
    const shown = JSON.parse(/```json\n([\s\S]*?)```/.exec(part)?.[1] ?? 'null') as Health
    const answered = await read()
    expect(shapeOf(answered)).toEqual(shapeOf(shown))
    // The reason is V8's JSON message, worded differently from one Node.js to another.
    const reason = (health: Health) => health.watch?.errors.map(({ file, error }) => `${file}: ${error.split(': ', 1)[0]}`)
    expect(reason(answered)).toEqual(reason(shown))
    expect(answered).toMatchObject({ status: 'ok', watch: { scenario: 'shop', version: '1.0.0', files: 2 } })
  })
})
