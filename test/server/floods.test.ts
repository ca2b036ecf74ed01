/**
 * Floods of issue 10, bounded: the sandbox refuses what it has no room for (503 with
 * `Retry-After`, 400, 403) and never stops answering. Each flood runs against a real server
 * with small budgets so that the limits are reached quickly; `FLOOD_SIZE` scales the floods
 * (default 1; 2 in the full run, `PETSTORE_FULL_TESTS=1`), and `bench/floods.ts` runs the sizes
 * against the CLI with its default limits and prints peak RSS.
 */
import { describe, expect, it } from 'vitest'
import { delayFlood, journalFlood, scenarioFlood, type FloodReport } from '../../bench/flood-load.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'
import { dataDir } from '../support/stores.js'
import { REPLAYS, size } from '../support/test-scale.js'
import { failOnUnhandledRejections } from '../support/unhandled-rejections.js'

const SIZE = size('FLOOD_SIZE', 1, 2)
if (!(Number.isInteger(SIZE) && SIZE >= 1)) throw new Error(`FLOOD_SIZE must be a positive integer, got ${process.env['FLOOD_SIZE']}`)

failOnUnhandledRejections()

/** Every answer had one of `allowed` statuses, health always answered, the partner's data is intact. */
function expectSurvived(report: FloodReport, allowed: readonly number[]): void {
  const seen = Object.keys(report.statuses).map(Number)
  expect(seen.filter((status) => !allowed.includes(status)), JSON.stringify(report)).toEqual([])
  expect(report.healthFailures, JSON.stringify(report)).toBe(0)
  expect(report.partnerIntact).toBe(true)
}

describe('floods', () => {
  it.runIf(REPLAYS)('survives a journal flood of bloated bodies over many keys, dropping tenants on their seed to stay within the budget', async () => {
    const { origin, sandbox } = await startSandbox({ anyKey: true, memoryBudgetBytes: 8 * 1024 * 1024 })
    const report = await journalFlood({ origin }, 300 * SIZE, 24 * SIZE)
    // 503 only while nothing may be dropped (every tenant in use at once).
    expectSurvived(report, [400, 503])
    expect(sandbox.tenants.evictions).toBeGreaterThan(0)
    expect(sandbox.tenants.heldBytes()).toBeLessThan(8 * 1024 * 1024 + 256 * 1024)
  })

  it('survives a flood of switches to large-catalog, refusing them once the budget is held', async () => {
    const { origin, sandbox } = await startSandbox({ anyKey: true, memoryBudgetBytes: 19 * 1024 * 1024 })
    // @note Each key calls the API first: before that its admin routes fail (the other half of issue 10).
    const report = await scenarioFlood({ origin }, 12 * SIZE)
    expectSurvived(report, [200, 503])
    expect(report.statuses['200']).toBeGreaterThan(0)
    expect(report.statuses['503']).toBeGreaterThan(0)
    expect(sandbox.tenants.heldBytes()).toBeLessThan(19 * 1024 * 1024 + 6 * 1024 * 1024)
  })

  it('survives a crowd of delayed requests past the connection cap, health checks answered throughout', async () => {
    const { origin } = await startSandbox({ anyKey: true, maxConnections: 50, requestTimeoutMs: 2000, headersTimeoutMs: 1000 })
    const report = await delayFlood({ origin }, 150 * SIZE, 1500)
    // Past cap + reserve, Node closes new connections at once (0: no answer). A delay of 1.5 s within a 2 s request
    // timeout may pass it on a loaded machine: 408 (once in a fresh-clone CI, stop 39).
    expectSurvived(report, [200, 503, 0, 408])
    expect(report.statuses['200']).toBeGreaterThanOrEqual(40)
    expect((report.statuses['503'] ?? 0) + (report.statuses['0'] ?? 0)).toBeGreaterThan(0)
  })
})

describe('journals in the process (memory, --data-dir) while other keys’ journals hold the memory budget', () => {
  it.each([
    // In memory the junk keys' data keeps them (and their journals) in memory: the budget is spent.
    { store: 'memory', options: () => ({}), late: 503 },
    // With --data-dir, idle tenants leave memory with their journals (their data is on disk): room comes back.
    { store: 'SQLite', options: () => ({ dataDir: dataDir() }), late: 201 },
  ])('journal a partner that cleared its journal: each journal has its own limits, none a shared budget to starve on ($store, attack2 F6 checked)', async ({ options, late }) => {
    const { fetch } = await startSandbox({ anyKey: true, scenario: 'empty', memoryBudgetBytes: 4 * 1024 * 1024, ...options() })
    const create = (key: string) => fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name: key }) })
    expect((await create('partner')).status).toBe(201)
    // Junk keys holding data fill their journals with 60 KB bodies past the memory budget.
    for (let key = 0; key < 6; key++) expect((await create(`junk${key}`)).status).toBe(201)
    for (let key = 0; key < 6; key++) {
      for (let i = 0; i < 20; i++) {
        const response = await fetch('/v1/categories', { method: 'POST', headers: { ...auth(`junk${key}`), 'content-type': 'text/plain' }, body: 'x'.repeat(60_000) })
        await response.body?.cancel()
      }
    }
    const refused = await create('late')
    expect(refused.status).toBe(late)
    await refused.body?.cancel()
    const cleared = await fetch('/__sandbox/requests', { method: 'DELETE', headers: auth('partner') })
    await cleared.body?.cancel()
    const listed = await fetch('/v1/categories', { headers: auth('partner') })
    expect(listed.status).toBe(200)
    await listed.body?.cancel()
    const journal = await fetch('/__sandbox/requests?method=GET', { headers: auth('partner') })
    expect(((await jsonOf(journal)) as { response: { status: number } }[]).map((entry) => entry.response.status)).toEqual([200])
  })
})
