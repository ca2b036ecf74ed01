/**
 * Every byte a tenant holds is counted (issue 20 F02, SQLite): what tenants store in the data
 * directory is bounded by `storeBudgetBytes` (`--store-budget`), counted in the same step as
 * each write, and counted again when the server starts on the same data.
 */
import { statSync } from 'node:fs'
import { join } from 'node:path'
import { afterEach, describe, expect, it, vi } from 'vitest'
import type { SqliteStorage } from '../../src/storage/sqlite-storage.js'
import { categoryStoredBytes, FLOOR_IDLE_MS, tenantStoredBytes } from '../../src/storage/stored-bytes.js'
import { tenantId } from '../../src/server.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { runCliHere } from '../support/sandbox-cli.js'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'
import { dataDir } from '../support/stores.js'
import { unhandledRejections } from '../support/unhandled-rejections.js'
import { REPLAYS } from '../support/test-scale.js'

const MiB = 1024 * 1024

afterEach(() => {
  vi.useRealTimers()
})

const storedBytes = (running: RunningSandbox) => (running.sandbox.storage as SqliteStorage).storedBytes
const claimedBytes = (running: RunningSandbox) => (running.sandbox.storage as SqliteStorage).claimedBytes

function switchTo(running: RunningSandbox, key: string, name: string): Promise<Response> {
  return running.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(key, true), body: JSON.stringify({ name }) })
}

function post(running: RunningSandbox, key: string, name: string): Promise<Response> {
  return running.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name }) })
}

async function expectStoreFull(response: Response): Promise<void> {
  expect(response.headers.get('retry-after')).toBe('30')
  const body = (await jsonOf(response)) as { message: string }
  expectErrorBody(body, 503, 'over_capacity')
  // Full, or what is left is kept for the tenants already holding data (their floors).
  expect(body.message).toMatch(/the tenants hold all the data the operator allowed the store|the room the store has left is kept for the tenants already holding data/)
}

async function stop(running: RunningSandbox): Promise<void> {
  running.server.closeAllConnections()
  await new Promise((resolve) => running.server.close(resolve))
  await running.sandbox.close()
}

/** Switches new keys to large-catalog (1.4 MB each) until one is refused; returns how many were not. */
async function floodWithLargeCatalogs(running: RunningSandbox, prefix: string): Promise<{ switched: number; refused: Response }> {
  for (let i = 0; i < 40; i++) {
    const response = await switchTo(running, `${prefix}-${i}`, 'large-catalog')
    if (response.status !== 200) return { switched: i, refused: response }
  }
  throw new Error('40 large catalogs stored: nothing bounds the store')
}

describe('the store budget on SQLite (--data-dir)', () => {
  it('bounds what new keys store with scenario switches: past the budget 503 over_capacity, while a partner’s reads and a switch back still work (issue 20 F02)', async () => {
    const rejections = unhandledRejections()
    const dir = dataDir()
    const budget = 8 * MiB
    const running = await startSandbox({ anyKey: true, scenario: 'empty', dataDir: dir, storeBudgetBytes: budget })
    expect((await post(running, 'partner', 'kept')).status).toBe(201)
    const { switched, refused } = await floodWithLargeCatalogs(running, 'flood')
    await expectStoreFull(refused)
    expect(switched).toBeGreaterThan(2)
    // Within the budget, and refused only because one more would not fit beside the partner's floor.
    expect(storedBytes(running)).toBeLessThanOrEqual(budget)
    expect(claimedBytes(running)).toBeLessThanOrEqual(budget)
    expect(claimedBytes(running) + storedBytes(running) / switched).toBeGreaterThan(budget)
    // What the flood left on disk is bounded too (the finding: 200 switches added 273 MB).
    const onDisk = ['sandbox.db', 'sandbox.db-wal'].reduce((total, file) => total + statSync(join(dir, file)).size, 0)
    expect(onDisk).toBeLessThan(2 * budget)
    // The partner's reads still work.
    const listed = await running.fetch('/v1/categories', { headers: auth('partner') })
    expect(((await jsonOf(listed)) as { name: string }[]).map((category) => category.name)).toEqual(['kept'])
    // Switching back to the start scenario gives the room back (a write that stores less is never refused), and the next switch fits.
    expect((await switchTo(running, 'flood-0', 'empty')).status).toBe(200)
    expect((await switchTo(running, 'another', 'large-catalog')).status).toBe(200)
    expect(storedBytes(running)).toBeLessThanOrEqual(budget)
    expect(rejections).toEqual([])
  })

  it('counts every byte a create writes in the same step: of 30 concurrent creates, exactly the 10 that fit get 201 (issue 20 F02)', async () => {
    const rejections = unhandledRejections()
    const name = (i: number) => `c-${String(i).padStart(2, '0')}`
    const budget = tenantStoredBytes(tenantId('partner'), 'empty') + 10 * categoryStoredBytes({ name: name(0) })
    const running = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dataDir(), storeBudgetBytes: budget })
    const responses = await Promise.all(Array.from({ length: 30 }, (_, i) => post(running, 'partner', name(i))))
    expect(responses.filter((response) => response.status === 201)).toHaveLength(10)
    for (const response of responses.filter((response) => response.status !== 201)) await expectStoreFull(response)
    expect(storedBytes(running)).toBe(budget)
    const listed = (await jsonOf(await running.fetch('/v1/categories', { headers: auth('partner') }))) as unknown[]
    expect(listed).toHaveLength(10)
    expect(rejections).toEqual([])
  })

  it('counts a category of control characters as what SQLite writes for it, one byte each (attack2 F1, SQLite)', async () => {
    const dir = dataDir()
    const running = await startSandbox({ apiKeys: ['partner'], scenario: 'empty', dataDir: dir, storeBudgetBytes: 4 * MiB })
    expect((await post(running, 'partner', 'first')).status).toBe(201)
    const before = storedBytes(running)
    const fat = JSON.stringify({ name: '\x01'.repeat(200), description: '\x01'.repeat(2000) })
    for (let i = 0; i < 50; i++) {
      const response = await running.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: fat })
      expect(response.status).toBe(201)
      await response.body?.cancel()
    }
    const counted = storedBytes(running) - before
    await stop(running)
    // What the categories take in the database's pages (SQLite's own dbstat), against what was counted for them.
    const { default: Sqlite } = await import('better-sqlite3')
    const db = new Sqlite(join(dir, 'sandbox.db'), { readonly: true })
    try {
      const used = db.prepare<[], { used: number }>("SELECT SUM(pgsize - unused) AS used FROM dbstat WHERE name IN ('categories', 'categories_by_tenant')").get()!.used
      // Within 1% (page and cell headers): one byte a control character, as counted; not six.
      expect(used).toBeGreaterThan(50 * 2200)
      expect(used).toBeLessThanOrEqual(1.01 * (counted + categoryStoredBytes({ name: 'first' })))
    } finally {
      db.close()
    }
  })

  it('counts again at a restart: the server started on the same data refuses as the first did (issue 20 F02)', async () => {
    const rejections = unhandledRejections()
    const dir = dataDir()
    const budget = 4 * MiB
    const first = await startSandbox({ anyKey: true, scenario: 'empty', dataDir: dir, storeBudgetBytes: budget })
    expect((await post(first, 'partner', `naïve ✓ ${'\u{1f408}'.repeat(10)}`)).status).toBe(201)
    const { refused } = await floodWithLargeCatalogs(first, 'before')
    await expectStoreFull(refused)
    const counted = storedBytes(first)
    await stop(first)
    const second = await startSandbox({ anyKey: true, scenario: 'empty', dataDir: dir, storeBudgetBytes: budget })
    expect(storedBytes(second)).toBe(counted)
    await expectStoreFull(await switchTo(second, 'after-restart', 'large-catalog'))
    expect((await switchTo(second, 'before-0', 'empty')).status).toBe(200)
    expect((await switchTo(second, 'after-restart', 'large-catalog')).status).toBe(200)
    expect(rejections).toEqual([])
  })

  it.each([
    ['switches to large-catalog (1.4 MB each)', (running: RunningSandbox, key: string) => switchTo(running, key, 'large-catalog')],
    ['one create each', (running: RunningSandbox, key: string) => post(running, key, 'flood')],
  ])('never locks a partner holding data out of its creates when new keys flood the store with %s, then fill what is left with long creates (issue 20, store budget with --any-key)', async (_, flood) => {
    const rejections = unhandledRejections()
    const budget = 4 * MiB
    const running = await startSandbox({ anyKey: true, scenario: 'empty', dataDir: dataDir(), storeBudgetBytes: budget })
    expect((await post(running, 'partner', 'kept')).status).toBe(201)
    const long = (_: RunningSandbox, key: string) =>
      running.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name: 'n'.repeat(200), description: 'd'.repeat(2000) }) })
    let keys = 0
    for (const send of [flood, long]) {
      let refused: Response | undefined
      for (let i = 0; i < 1000 && refused === undefined; i++) {
        const response = await send(running, `flood-${keys++}`)
        if (response.status !== 200 && response.status !== 201) refused = response
      }
      expect(refused).toBeDefined()
      await expectStoreFull(refused!)
    }
    // The partner still writes: 100 creates of its own, every one acknowledged and listed.
    const statuses = []
    for (let i = 0; i < 100; i++) statuses.push((await post(running, 'partner', `partner-${i}`)).status)
    expect(statuses).toEqual(Array.from({ length: 100 }, () => 201))
    const listed = (await jsonOf(await running.fetch('/v1/categories', { headers: auth('partner') }))) as unknown[]
    expect(listed).toHaveLength(101)
    expect(storedBytes(running)).toBeLessThanOrEqual(budget)
    expect(rejections).toEqual([])
  })

  it.runIf(REPLAYS)('lets new partners create again once the keys of a flood of one-line creates are idle for an hour, and never refuses the partner in use (issue 20 attack G5: floors that cost nothing to keep)', async () => {
    const rejections = unhandledRejections()
    const budget = 4 * MiB
    // The store's clock runs on the monotonic clock: moved here as an hour would move it.
    vi.useFakeTimers({ toFake: ['performance'] })
    const dir = dataDir()
    const running = await startSandbox({ anyKey: true, scenario: 'empty', dataDir: dir, storeBudgetBytes: budget })
    expect((await post(running, 'partner', 'kept')).status).toBe(201)
    let flooded = 0
    let refused: Response | undefined
    for (let i = 0; i < 1000 && refused === undefined; i++) {
      const response = await post(running, `flood-${flooded++}`, 'j')
      if (response.status !== 201) refused = response
    }
    await expectStoreFull(refused!)
    // Every floor is taken: a new partner is refused for now (the floors of keys in use hold).
    await expectStoreFull(await post(running, 'newcomer-0', 'first'))
    vi.advanceTimersByTime(FLOOR_IDLE_MS / 2)
    // The partner is in use; the flood's keys are not.
    const listed = await running.fetch('/v1/categories', { headers: auth('partner') })
    expect(listed.status).toBe(200)
    await listed.body?.cancel()
    vi.advanceTimersByTime(FLOOR_IDLE_MS / 2 + 1000)
    const newcomers = []
    for (let i = 0; i < 10; i++) newcomers.push((await post(running, `newcomer-${i}`, 'first')).status)
    expect(newcomers).toEqual(Array.from({ length: 10 }, () => 201))
    const statuses = []
    for (let i = 0; i < 100; i++) statuses.push((await post(running, 'partner', `partner-${i}`)).status)
    expect(statuses).toEqual(Array.from({ length: 100 }, () => 201))
    // The flood's data is kept (only its floors lapsed), and the claims stay within the budget.
    const flood = await running.fetch('/v1/categories', { headers: auth('flood-0') })
    expect(((await jsonOf(flood)) as { name: string }[]).map((category) => category.name)).toEqual(['j'])
    expect(claimedBytes(running)).toBeLessThanOrEqual(budget)
    // Counted again at a restart: the floors that lapsed stay lapsed.
    const claimed = claimedBytes(running)
    await stop(running)
    const again = await startSandbox({ anyKey: true, scenario: 'empty', dataDir: dir, storeBudgetBytes: budget })
    expect(claimedBytes(again)).toBe(claimed)
    await stop(again)
    expect(rejections).toEqual([])
  })

  it('stores nothing for a first create refused 409 category_limit (a seed past --max-categories), so the budget holds, and a restart locks no partner out (attack8 A3)', async () => {
    const rejections = unhandledRejections()
    const dir = dataDir()
    const options = { anyKey: true, scenario: 'large-catalog', maxCategories: 100, dataDir: dir, storeBudgetBytes: 8 * MiB }
    const first = await startSandbox(options)
    // Each key's seed is 10,000 categories (1.4 MB): 7 of them stored would pass the 8 MiB budget.
    for (let i = 0; i < 7; i++) expectErrorBody(await jsonOf(await post(first, `refused-${i}`, 'x')), 409, 'category_limit')
    expect(storedBytes(first)).toBe(0)
    // Listed live (their requests are journaled), but with nothing stored.
    expect(await first.sandbox.storage.list()).toEqual([])
    await stop(first)
    // Closed: the WAL is checkpointed into the database file.
    expect(statSync(join(dir, 'sandbox.db')).size).toBeLessThan(1 * MiB)
    const second = await startSandbox(options)
    expect(storedBytes(second)).toBe(0)
    expect((await switchTo(second, 'partner', 'empty')).status).toBe(200)
    expect((await post(second, 'partner', 'mine')).status).toBe(201)
    expect(rejections).toEqual([])
  })

  it('takes --store-budget (and PETSTORE_SANDBOX_STORE_BUDGET) as a size, says it at start, and refuses past it (issue 20 F02)', async () => {
    const dir = dataDir()
    const run = await runCliHere(['serve', '--port', '0', '--quiet', '--any-key', '--scenario', 'empty', '--data-dir', dir, '--store-budget', '2MiB'])
    expect(run.stdout()).toContain('(SQLite, kept across restarts, at most 2 MiB of tenant data)')
    const origin = run.server!.origin
    const put = (key: string) => fetch(`${origin}/__sandbox/scenario`, { method: 'PUT', headers: auth(key, true), body: JSON.stringify({ name: 'large-catalog' }) })
    expect((await put('first')).status).toBe(200)
    await expectStoreFull(await put('second'))
    const fromEnv = await runCliHere(['serve', '--port', '0', '--quiet', '--data-dir', dataDir()], { PETSTORE_SANDBOX_STORE_BUDGET: '3GiB' })
    expect(fromEnv.stdout()).toContain('at most 3 GiB of tenant data')
    // 0 is no budget, as 0 is "never" for the other limits (new-user trial: it refused every create).
    const unbounded = await runCliHere(['serve', '--port', '0', '--quiet', '--any-key', '--scenario', 'empty', '--data-dir', dataDir(), '--store-budget', '0'])
    expect(unbounded.stdout()).toContain('(SQLite, kept across restarts, no limit on tenant data)')
    const created = await fetch(`${unbounded.server!.origin}/v1/categories`, { method: 'POST', headers: auth('first', true), body: JSON.stringify({ name: 'kept' }) })
    expect(created.status).toBe(201)
    const refused = await runCliHere(['serve', '--port', '0', '--data-dir', dataDir(), '--store-budget', 'lots'])
    expect(refused.code).toBe(1)
    expect(refused.stderr()).toContain('--store-budget must be a size in bytes')
  })
})
