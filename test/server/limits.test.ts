/**
 * The server's limits, each a finding of issue 10: what a partner sees at each limit (an Error
 * body of the table, never a dropped connection or a 500), and that the server keeps answering
 * others meanwhile. Timeouts are configured short so the tests are quick; each asserts the cut
 * happens near the configured time, not at Node's 30 s check interval.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { connect, type Socket } from 'node:net'
import { fileURLToPath } from 'node:url'
import { Ajv2020 } from 'ajv/dist/2020.js'
import fc from 'fast-check'
import { afterEach, beforeEach, describe, expect, it, onTestFinished, vi } from 'vitest'
import { DEFAULT_MAX_CATEGORIES, DEFAULT_NAME_MAX_LENGTH } from '../../src/contract/limits.js'
import { createSandboxApp, tenantId } from '../../src/server.js'
import { Tenant } from '../../src/storage/tenant.js'
import { MemoryBudget, RELIEF_INTERVAL_MS, STALL_MS } from '../../src/server/memory-budget.js'
import { DRAIN_IDLE_MS } from '../../src/node-bridge/node-request.js'
import { collect, exchange, openSocket, type RawAnswer } from '../support/raw-http.js'
import { CONNECTION_RESERVE } from '../../src/server/http-server.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { failOnUnhandledRejections } from '../support/unhandled-rejections.js'
import { CLI_BINARY, runCli } from '../support/sandbox-cli.js'
import { freePort } from '../support/redis-server.js'
import { size } from '../support/test-scale.js'

/** Fetch POSTs over the body limit, one after another: 10, 30 in the full run. */
const OVER_LIMIT_POSTS = size('PETSTORE_TEST_OVER_LIMIT_POSTS', 10, 30)
/** Bodies of 1 MiB ending together in the turns' tests: 8, 16 in the full run (each still fails on the code before its fix). */
const TURN_BODIES = size('PETSTORE_TEST_TURN_BODIES', 8, 16)

/** @note Any unhandled rejection while these tests run is a finding: a client could stop the process. */
failOnUnhandledRejections()

const create = (fetch: (path: string, init?: RequestInit) => Promise<Response>, key: string, body: unknown) =>
  fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify(body) })

/** Sends one request on `socket` and resolves its status once its whole answer (by Content-Length) came; 0 when the socket ends first, -1 after 5 s. */
function ask(socket: Socket, head: string): Promise<number> {
  return new Promise<number>((resolve) => {
    setTimeout(() => resolve(-1), 5000).unref()
    let text = ''
    const onData = (chunk: Buffer) => {
      text += chunk.toString('latin1')
      const end = text.indexOf('\r\n\r\n')
      const length = /content-length: (\d+)/i.exec(text)
      if (end !== -1 && length !== null && text.length >= end + 4 + Number(length[1])) {
        socket.off('data', onData)
        resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0))
      }
    }
    socket.on('data', onData)
    socket.once('close', () => resolve(0))
    socket.write(head)
  })
}

describe('name, description and category limits', () => {
  it('refuses a 1 MiB category name with 400 and keeps the list answering 200', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k'] })
    const name = 'n'.repeat(1024 * 1024 - 20)
    for (let i = 0; i < 5; i++) {
      const response = await create(fetch, 'k', { name })
      expectErrorBody(await jsonOf(response), 400, 'invalid_field')
    }
    const list = await fetch('/v1/categories', { headers: auth('k') })
    expect(list.status).toBe(200)
    expect(((await jsonOf(list)) as unknown[]).length).toBe(5)
  })

  it('says the limit in the message of a name or description one character too long', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k'], nameMaxLength: 10, descriptionMaxLength: 20 })
    const longName = (await jsonOf(await create(fetch, 'k', { name: 'n'.repeat(11) }))) as { message: string }
    expect(longName.message).toBe('name must be at most 10 characters')
    const longDescription = (await jsonOf(await create(fetch, 'k', { name: 'ok', description: 'd'.repeat(21) }))) as { message: string }
    expect(longDescription.message).toBe('description must be at most 20 characters')
    expect((await create(fetch, 'k', { name: 'n'.repeat(10), description: 'd'.repeat(20) })).status).toBe(201)
  })

  it('publishes the lengths it enforces as schema keywords in the served OpenAPI document, the configured ones when given (issue 22)', async () => {
    type Lengths = { components: { schemas: { NewCategory: { properties: { name: { maxLength: number }; description: { maxLength: number } } } } } }
    const served = async (options = {}) => ((await jsonOf(await (await startSandbox(options)).fetch('/__sandbox/openapi.json'))) as Lengths).components.schemas.NewCategory.properties
    expect((await served()).name.maxLength).toBe(DEFAULT_NAME_MAX_LENGTH)
    const configured = await served({ nameMaxLength: 12, descriptionMaxLength: 34 })
    expect([configured.name.maxLength, configured.description.maxLength]).toEqual([12, 34])
  })

  it('calls a create body valid exactly when the sandbox answers it 201, under the limits the server was given (issue 22)', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k'], scenario: 'empty', nameMaxLength: 6, descriptionMaxLength: 8, maxCategories: 10_000 })
    const document = (await jsonOf(await fetch('/__sandbox/openapi.json'))) as { components: { schemas: Record<string, object> } }
    const validBody = new Ajv2020({ strict: false }).compile({ ...document.components.schemas['NewCategory'], components: document.components })
    const text = fc.string({ unit: fc.constantFrom('a', 'é', '😀', ' ', '\t', '\n', '\u00a0', '\u3000'), maxLength: 10 })
    const body = fc.record({ name: fc.oneof(text, fc.constant(''), fc.integer()), description: fc.oneof(text, fc.constant(null)) }, { requiredKeys: [] })
    await fc.assert(
      fc.asyncProperty(body, async (sent) => {
        const response = await create(fetch, 'k', sent)
        expect(response.status, JSON.stringify(sent)).toBe(validBody(sent) ? 201 : 400)
      }),
      { numRuns: 150 },
    )
  })

  it('answers 409 category_limit past the categories a tenant may hold, and only for that tenant', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k', 'other'], scenario: 'empty', maxCategories: 3 })
    for (let i = 0; i < 3; i++) expect((await create(fetch, 'k', { name: `c${i}` })).status).toBe(201)
    const refused = await create(fetch, 'k', { name: 'one too many' })
    const body = await jsonOf(refused)
    expectErrorBody(body, 409, 'category_limit')
    expect((body as { message: string }).message).toContain('(3)')
    expect(((await jsonOf(await fetch('/v1/categories', { headers: auth('k') }))) as unknown[]).length).toBe(3)
    expect((await create(fetch, 'other', { name: 'mine' })).status).toBe(201)
    expect((await fetch('/__sandbox/reset', { method: 'POST', headers: auth('k') })).status).toBe(200)
    expect((await create(fetch, 'k', { name: 'after reset' })).status).toBe(201)
  })

  it('holds the category limit under concurrent creates', async () => {
    const { fetch } = await startSandbox({ apiKeys: ['k'], scenario: 'empty', maxCategories: 10 })
    const statuses = await Promise.all(Array.from({ length: 30 }, (_, i) => create(fetch, 'k', { name: `c${i}` }).then((r) => r.status)))
    expect(statuses.filter((status) => status === 201)).toHaveLength(10)
    expect(statuses.filter((status) => status === 409)).toHaveLength(20)
  })

  it('refuses limits under which a full list could not be serialised (it would answer 500)', async () => {
    await expect(createSandboxApp({ nameMaxLength: 1_000_000, maxCategories: DEFAULT_MAX_CATEGORIES })).rejects.toThrow(/serialise/)
  })
})

describe('the memory budget across tenants', () => {
  it('refuses new tenants with 503 over_capacity and Retry-After once tenants holding writes fill the budget, and keeps serving the others', async () => {
    const { fetch, sandbox } = await startSandbox({ anyKey: true, memoryBudgetBytes: 4 * 1024 * 1024, journalBytes: 1024 * 1024 })
    expect((await create(fetch, 'partner', { name: 'Partner data' })).status).toBe(201)
    // Tenants that wrote cannot be dropped to make room: their data exists nowhere else.
    for (let i = 0; i < 10; i++) expect((await create(fetch, `flood-${i}`, { name: 'Kept' })).status).toBe(201)
    const body = `[${Array.from({ length: 21_800 }, () => '{}').join(',')}]`
    const statuses: number[] = []
    let refusal: Response | undefined
    for (let i = 0; i < 200; i++) {
      const response = await fetch('/v1/categories', { method: 'POST', headers: auth(`flood-${i % 10}`, true), body })
      statuses.push(response.status)
      if (response.status === 503) refusal ??= response
      else await response.arrayBuffer()
    }
    expect(statuses.filter((status) => status !== 400 && status !== 503)).toEqual([])
    expect(refusal).toBeDefined()
    expect(refusal!.headers.get('retry-after')).toMatch(/^\d+$/)
    expectErrorBody(await jsonOf(refusal!), 503, 'over_capacity')
    // Over the budget, journals no longer grow: what the tenants hold stays within one entry of it.
    expect(sandbox.tenants.heldBytes()).toBeLessThan(4 * 1024 * 1024 + 256 * 1024)
    expect((await fetch('/__sandbox/health')).status).toBe(200)
    const list = (await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]
    expect(list.map((category) => category.name)).toContain('Partner data')
  })

  it('counts a list’s JSON text from the write on: a tenant of control characters is refused before its list would outgrow the budget, and its list is then answered (attack12 M1)', async () => {
    const budget = 2 * 1024 * 1024
    const { fetch, sandbox } = await startSandbox({ anyKey: true, memoryBudgetBytes: budget, journalBytes: 64 * 1024, scenario: 'empty' })
    // Each character one byte as stored, six as JSON (`\u0001`).
    const category = (i: number) => ({ name: `${'\u0001'.repeat(190)}${i}`, description: '\u0002'.repeat(2000) })
    let created = 0
    let status = 201
    while (status === 201 && created < 1000) {
      const response = await create(fetch, 'ctl', category(created))
      status = response.status
      await response.arrayBuffer()
      if (status === 201) created++
    }
    expect(status).toBe(503)
    const list = await fetch('/v1/categories', { headers: auth('ctl') })
    expect(list.status).toBe(200)
    const text = await list.text()
    expect((JSON.parse(text) as unknown[]).length).toBe(created)
    // Before: the budget counted the characters once each, and the 10 MB text was made past it on the read.
    expect(text.length).toBeLessThan(budget)
    expect(sandbox.tenants.heldBytes()).toBeGreaterThan(text.length)
  })

  it('keeps what the tenants hold equal to their sum through creates, lists, journal reads and clears, resets, switches, evictions and deletes', async () => {
    const { fetch, sandbox } = await startSandbox({ anyKey: true, maxTenants: 4, adminToken: 'admin-1' })
    const summed = () => [...sandbox.tenants.live()].reduce((total, [, tenant]) => total + tenant.heldBytes, 0)
    const held: number[] = []
    const check = () => {
      held.push(sandbox.tenants.heldBytes())
      expect(sandbox.tenants.heldBytes()).toBe(summed())
    }
    for (const key of ['a', 'b', 'c']) {
      expect((await create(fetch, key, { name: `Made by ${key}`, description: 'x'.repeat(500) })).status).toBe(201)
      await (await fetch('/v1/categories', { headers: auth(key) })).arrayBuffer()
      check()
    }
    await (await fetch('/__sandbox/requests', { headers: auth('a') })).arrayBuffer() // formats a's journal
    check()
    expect((await fetch('/__sandbox/requests', { method: 'DELETE', headers: auth('b') })).status).toBe(204)
    check()
    expect((await fetch('/__sandbox/reset', { method: 'POST', headers: auth('c') })).status).toBe(200)
    check()
    const switched = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('a', true), body: '{"name":"large-catalog"}' })
    expect(switched.status).toBe(200)
    check()
    for (const key of ['d', 'e', 'f']) await (await fetch('/v1/categories', { headers: auth(key) })).arrayBuffer() // evicts the unmodified
    check()
    expect((await fetch(`/__sandbox/tenants/${tenantId('a')}`, { method: 'DELETE', headers: auth('admin-1') })).status).toBe(204)
    check()
    // The figure moved with every step: large-catalog's 10,000 categories came in, and left.
    expect(Math.max(...held)).toBeGreaterThan(1_000_000)
    expect(held.at(-1)).toBeLessThan(1_000_000)
  })

  it('judges a request against the budget without visiting every live tenant (issue 14: 1,000 live tenants made a create cost 65% more)', async () => {
    const { fetch } = await startSandbox({ anyKey: true })
    for (let i = 0; i < 50; i++) await (await fetch('/v1/categories', { headers: auth(`partner-${i}`) })).arrayBuffer()
    const visits = vi.spyOn(Tenant.prototype, 'heldBytes', 'get')
    for (let i = 0; i < 10; i++) expect((await create(fetch, 'partner-0', { name: `Create ${i}` })).status).toBe(201)
    await (await fetch('/v1/categories', { headers: auth('partner-1') })).arrayBuffer()
    // Before: twice per request for each of the 50 tenants (the admission check, then whether the journal may grow).
    expect(visits.mock.calls.length).toBe(0)
    visits.mockRestore()
  })

  it('drops tenants still on their seed, least recently used first, rather than refuse writes once readers fill the budget (trial finding)', async () => {
    const { fetch, sandbox } = await startSandbox({ anyKey: true, memoryBudgetBytes: 40 * 1024 })
    const statuses: number[] = []
    for (let i = 0; i < 12; i++) {
      const response = await fetch('/v1/categories', { headers: auth(`reader-${i}`) })
      statuses.push(response.status)
      await response.arrayBuffer()
    }
    expect(statuses).toEqual(Array(12).fill(200))
    expect((await create(fetch, 'writer', { name: 'Written' })).status).toBe(201)
    expect((await create(fetch, 'reader-11', { name: 'Also written' })).status).toBe(201)
    expect(sandbox.tenants.evictions).toBeGreaterThan(0)
    expect(sandbox.tenants.heldBytes()).toBeLessThanOrEqual(40 * 1024 + 4 * 1024)
    const live = [...sandbox.tenants.live()].map(([id]) => id)
    expect(live).toEqual(expect.arrayContaining([tenantId('writer'), tenantId('reader-11')]))
    expect(live).not.toContain(tenantId('reader-0'))
  })

  it('never drops a tenant with a request under way to make room, so its journal keeps that request (review finding)', async () => {
    const probe = await startSandbox({ anyKey: true })
    await (await probe.fetch('/v1/categories', { headers: auth('probe') })).arrayBuffer()
    const oneTenant = probe.sandbox.tenants.heldBytes()
    const { fetch, sandbox } = await startSandbox({ anyKey: true, memoryBudgetBytes: Math.round(oneTenant * 1.5) })
    const pending = fetch('/v1/categories', { method: 'POST', headers: { ...auth('b', true), prefer: 'delay=500' }, body: '{"name":"B in flight"}' })
    // b's request is under way (waited for, not assumed after 150 ms): otherwise a's requests could come first, and b would meet a budget a's writes hold.
    await expect.poll(() => [...sandbox.tenants.live()].some(([id, tenant]) => id === tenantId('b') && tenant.busy), { timeout: 5000 }).toBe(true)
    await (await fetch('/v1/categories', { headers: auth('a') })).arrayBuffer()
    await (await create(fetch, 'a', { name: 'A' })).arrayBuffer()
    expect((await pending).status).toBe(201)
    const journal = (await jsonOf(await fetch('/__sandbox/requests', { headers: auth('b') }))) as { method: string; response: { status: number } }[]
    expect(journal.filter((entry) => entry.method === 'POST').map((entry) => entry.response.status)).toEqual([201])
    expect(sandbox.tenants.heldBytes()).toBe([...sandbox.tenants.live()].reduce((total, [, tenant]) => total + tenant.heldBytes, 0))
  })

  it('drops no reader when dropping them all would not bring the tenants within the budget', async () => {
    const { fetch, sandbox } = await startSandbox({ anyKey: true, memoryBudgetBytes: 64 * 1024, descriptionMaxLength: 100_000, maxCategories: 100 })
    await (await fetch('/v1/categories', { headers: auth('reader') })).arrayBuffer()
    // A writer that alone holds more than the budget: one long description, in its store and journal.
    expect((await create(fetch, 'writer', { name: 'Long', description: 'x'.repeat(90_000) })).status).toBe(201)
    expect(sandbox.tenants.heldBytes()).toBeGreaterThan(64 * 1024)
    const refused = await create(fetch, 'writer', { name: 'One more' })
    expect(refused.status).toBe(503)
    expect([...sandbox.tenants.live()].map(([id]) => id)).toContain(tenantId('reader'))
    expect(sandbox.tenants.evictions).toBe(0)
  })

  it('refuses scenario switches with 503 once the budget is held, and the partner keeps its data', async () => {
    const { fetch } = await startSandbox({ anyKey: true, memoryBudgetBytes: 11 * 1024 * 1024 })
    expect((await create(fetch, 'partner', { name: 'Partner data' })).status).toBe(201)
    const statuses: number[] = []
    for (let i = 0; i < 8; i++) {
      // @note A key's tenant exists once it has called the API (admin routes before that: the other half of issue 10).
      await (await fetch('/v1/categories', { headers: auth(`switch-${i}`) })).arrayBuffer()
      const response = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(`switch-${i}`, true), body: '{"name":"large-catalog"}' })
      statuses.push(response.status)
      const answer = await jsonOf(response)
      if (response.status === 503) {
        expectErrorBody(answer, 503, 'over_capacity')
        expect(response.headers.get('retry-after')).toMatch(/^\d+$/)
      }
    }
    expect(statuses.slice(0, 2)).toEqual([200, 200])
    expect(statuses.slice(-3)).toEqual([503, 503, 503])
    expect((await fetch('/__sandbox/health')).status).toBe(200)
    const list = (await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]
    expect(list.map((category) => category.name)).toContain('Partner data')
  })

  it('asks for room before refusing a write, and after asking in vain waits before asking again', () => {
    // The wait is measured on the monotonic clock: the wall clock stepped back an hour changes nothing.
    vi.useFakeTimers({ toFake: ['Date', 'performance'] })
    try {
      let held = 200
      let dropped = 0
      let asked = 0
      const budget = new MemoryBudget({
        budgetBytes: 100,
        heldBytes: () => held,
        heap: () => ({ used_heap_size: 0, heap_size_limit: 100 }),
        relieve: () => {
          asked++
          held -= dropped
          return dropped > 0 ? 1 : 0
        },
      })
      expect(budget.refusal('grow')).toMatch(/tenants hold/)
      expect(budget.refusal('grow')).toMatch(/tenants hold/)
      expect(asked).toBe(1)
      vi.setSystemTime(Date.now() + RELIEF_INTERVAL_MS)
      expect(budget.refusal('grow')).toMatch(/tenants hold/)
      expect(asked).toBe(1)
      vi.setSystemTime(Date.now() - 60 * 60_000)
      vi.advanceTimersByTime(RELIEF_INTERVAL_MS)
      dropped = 150
      expect(budget.refusal('grow')).toBeUndefined()
      expect(asked).toBe(2)
      expect(budget.refusal('read')).toBeUndefined()
      expect(asked).toBe(2)
    } finally {
      vi.useRealTimers()
    }
  })

  it('refuses new state near the heap limit and all work closer to it, from V8’s own figures', () => {
    let used = 0
    const budget = new MemoryBudget({ budgetBytes: 1e12, heldBytes: () => 0, heap: () => ({ used_heap_size: used, heap_size_limit: 100 }) })
    used = 50
    expect(budget.refusal('grow')).toBeUndefined()
    const later = new MemoryBudget({ budgetBytes: 1e12, heldBytes: () => 0, heap: () => ({ used_heap_size: 80, heap_size_limit: 100 }) })
    expect(later.refusal('grow')).toMatch(/memory limit/)
    expect(later.refusal('read')).toBeUndefined()
    const critical = new MemoryBudget({ budgetBytes: 1e12, heldBytes: () => 0, heap: () => ({ used_heap_size: 95, heap_size_limit: 100 }) })
    expect(critical.refusal('read')).toMatch(/memory limit/)
    expect(() => critical.admit('read')).toThrow(/over capacity/)
  })
})

describe('the heap’s figure and its garbage (attack14 M1)', () => {
  it('collects garbage before refusing on the heap’s figure, so that answers let go keep nobody refused; live memory still refuses', () => {
    let used = 95
    let live = 95
    let collections = 0
    const budget = new MemoryBudget({
      budgetBytes: 1e12,
      heldBytes: () => 0,
      heap: () => ({ used_heap_size: used, heap_size_limit: 100 }),
      collect: () => {
        collections++
        used = live
      },
    })
    // All garbage: one collection, and the work is let through. Before: refused for as long as nothing allocated.
    live = 30
    expect(budget.refusal('grow')).toBeUndefined()
    expect(budget.refusal('read')).toBeUndefined()
    expect(collections).toBe(1)
    const full = new MemoryBudget({ budgetBytes: 1e12, heldBytes: () => 0, heap: () => ({ used_heap_size: 95, heap_size_limit: 100 }), collect: () => collections++ })
    collections = 0
    expect(full.refusal('grow')).toMatch(/memory limit/)
    // Not collected again within COLLECT_INTERVAL_MS, however often it is asked.
    for (let i = 0; i < 5; i++) expect(full.refusal('read')).toMatch(/memory limit/)
    expect(collections).toBe(1)
  })
})

describe('long reads, each tenant within its share (issue 20 G4)', () => {
  const KIB = 1024
  /** A budget of 1,000 KiB with tenants holding nothing; reads above SMALL_READ_BYTES are counted. */
  const budgetOf = () => new MemoryBudget({ budgetBytes: 1000 * KIB, heldBytes: () => 0, heap: () => ({ used_heap_size: 0, heap_size_limit: 100 }) })

  it('refuses the tenant whose own reads and answers take the budget, and lets a tenant with nothing in flight read beside them', () => {
    const budget = budgetOf()
    budget.holdAnswer(450 * KIB, 'staller')
    budget.reserveRead(450 * KIB, 'staller')
    expect(() => budget.reserveRead(400 * KIB, 'staller')).toThrow(/answers being sent/)
    // Before: the partner was refused as well, because the staller's answers took the budget.
    const partner = budget.reserveRead(400 * KIB, 'partner')
    expect(budget.answerBytes).toBe(1300 * KIB)
    partner()
    expect(() => budget.reserveRead(400 * KIB, 'staller')).toThrow(/answers being sent/)
    expect(budget.refusals).toBe(2)
  })

  it('lets a tenant over the budget read within its share of it, and no more', () => {
    const budget = budgetOf()
    budget.holdAnswer(900 * KIB, 'staller')
    // Two tenants with something in flight: 500 KiB each.
    budget.reserveRead(200 * KIB, 'partner')
    budget.reserveRead(300 * KIB, 'partner')
    expect(() => budget.reserveRead(100 * KIB, 'partner')).toThrow(/over capacity/)
  })

  it('splits only the room the tenants’ data leaves: a tenant alone reads no more past the budget than fits', () => {
    const budget = new MemoryBudget({ budgetBytes: 1000 * KIB, heldBytes: () => 300 * KIB, heap: () => ({ used_heap_size: 0, heap_size_limit: 100 }) })
    budget.holdAnswer(500 * KIB, 'staller')
    budget.reserveRead(200 * KIB, 'staller')
    expect(() => budget.reserveRead(100 * KIB, 'staller')).toThrow(/over capacity/)
  })

  it('lets a tenant read again once its answers are let go', () => {
    const budget = budgetOf()
    const answer = budget.holdAnswer(900 * KIB, 'staller')
    expect(() => budget.reserveRead(400 * KIB, 'staller')).toThrow(/over capacity/)
    answer()
    answer()
    expect(budget.answerBytes).toBe(0)
    budget.reserveRead(400 * KIB, 'staller')
    expect(budget.answerBytes).toBe(400 * KIB)
  })

  it('refuses every tenant’s first long read once what the tenants hold and the answers in flight take twice the budget', () => {
    const budget = budgetOf()
    budget.holdAnswer(900 * KIB, 'staller')
    for (const tenant of ['a', 'b', 'c']) budget.reserveRead(400 * KIB, tenant)
    expect(budget.answerBytes).toBe(2100 * KIB)
    expect(() => budget.reserveRead(400 * KIB, 'd')).toThrow(/over capacity/)
  })

  it('always lets a read through with nothing in flight, even one larger than twice the budget', () => {
    const budget = budgetOf()
    const release = budget.reserveRead(3000 * KIB, 'alone')
    expect(budget.answerBytes).toBe(3000 * KIB)
    release()
    expect(budget.answerBytes).toBe(0)
  })
})

describe('stalled answers cut to let a partner’s long read through (attack4 H7)', () => {
  const KIB = 1024
  /** A budget of 1,000 KiB with tenants holding `held`; V8's heap never near its limit. */
  const budgetOf = (held = 0) => new MemoryBudget({ budgetBytes: 1000 * KIB, heldBytes: () => held, heap: () => ({ used_heap_size: 0, heap_size_limit: 100 }) })
  /** An answer's connection as the budget sees it: `taken` moved by the test, `cuts` counted. */
  const connection = () => {
    const state = { taken: 0, cuts: 0 }
    return { state, progress: { taken: () => state.taken, cut: () => void state.cuts++ } }
  }
  /** Other keys' answers of 700 KiB each, `apartMs` apart, whose clients never read: three are 2,100 KiB in flight, past twice the budget. */
  function stallers(budget: MemoryBudget, apartMs = 1000, tenants = ['a', 'b', 'c']) {
    return tenants.map((tenant) => {
      const { state, progress } = connection()
      budget.holdAnswer(700 * KIB, tenant, progress)
      // The kernel takes what the socket buffers hold at once, then nothing more.
      state.taken = 200 * KIB
      vi.advanceTimersByTime(apartMs)
      return state
    })
  }

  beforeEach(() => void vi.useFakeTimers({ toFake: ['performance', 'setInterval', 'clearInterval'] }))
  afterEach(() => void vi.useRealTimers())

  it('cuts the answer idle longest, and only as many as the read needs, once they took nothing for STALL_MS', () => {
    const budget = budgetOf()
    const [a, b, c] = stallers(budget)
    vi.advanceTimersByTime(STALL_MS)
    budget.reserveRead(400 * KIB, 'partner')
    // Before: refused, for as long as the stallers' connections stayed open.
    expect([a!.cuts, b!.cuts, c!.cuts]).toEqual([1, 0, 0])
    expect(budget.answerBytes).toBe(1800 * KIB)
    expect(budget.refusals).toBe(0)
  })

  it('cuts nothing younger than STALL_MS: the partner is refused until then', () => {
    const budget = budgetOf()
    const held = stallers(budget, 0)
    vi.advanceTimersByTime(STALL_MS - 100)
    expect(() => budget.reserveRead(400 * KIB, 'partner')).toThrow(/over capacity/)
    expect(held.map((state) => state.cuts)).toEqual([0, 0, 0])
    // Seen taking nothing from the look after their buffers filled (looks are a quarter of STALL_MS apart).
    vi.advanceTimersByTime(STALL_MS / 2)
    budget.reserveRead(400 * KIB, 'partner')
    expect(held.map((state) => state.cuts)).toEqual([1, 0, 0])
  })

  it('cuts no answer that took something after a pause: its client reads, however slowly', () => {
    const budget = budgetOf()
    const slow = connection()
    budget.holdAnswer(700 * KIB, 'slow', slow.progress)
    slow.state.taken = 200 * KIB
    // The slow reader's window opens again a second later (a 1.5 MB step on loopback), then nothing for long.
    vi.advanceTimersByTime(1000)
    slow.state.taken += 1500 * KIB
    vi.advanceTimersByTime(1000)
    // Two other keys' answers start later: the slow reader's is the one idle longest.
    const [b, c] = stallers(budget, 1000, ['b', 'c'])
    vi.advanceTimersByTime(10 * STALL_MS)
    budget.reserveRead(400 * KIB, 'partner')
    expect([slow.state.cuts, b!.cuts, c!.cuts]).toEqual([0, 1, 0])
  })

  it('never cuts the requester’s own stalled answers, and a tenant with one of its own cuts nobody’s', () => {
    const budget = budgetOf()
    const held = stallers(budget)
    vi.advanceTimersByTime(STALL_MS)
    expect(() => budget.reserveRead(400 * KIB, 'c')).toThrow(/over capacity/)
    expect(held.map((state) => state.cuts)).toEqual([0, 0, 0])
    expect(budget.answerBytes).toBe(2100 * KIB)
  })

  it('cuts nothing when cutting every stalled answer would not make room', () => {
    // The tenants' data alone take twice the budget, and the partner has an answer of its own in flight.
    const budget = budgetOf(2000 * KIB)
    const held = stallers(budget)
    budget.holdAnswer(100 * KIB, 'partner')
    vi.advanceTimersByTime(STALL_MS)
    expect(() => budget.reserveRead(400 * KIB, 'partner')).toThrow(/over capacity/)
    expect(held.map((state) => state.cuts)).toEqual([0, 0, 0])
  })

  it('lets go of a cut answer’s bytes once, though its connection’s close releases it again', () => {
    const budget = budgetOf()
    const { state, progress } = connection()
    const release = budget.holdAnswer(2000 * KIB, 'staller', progress)
    vi.advanceTimersByTime(STALL_MS + 1000)
    budget.reserveRead(400 * KIB, 'partner')
    expect(state.cuts).toBe(1)
    release()
    expect(budget.answerBytes).toBe(400 * KIB)
  })
})

describe('which scenarios a tenant may switch to', () => {
  it('answers 403 scenario_not_allowed for a scenario off the operator’s list, and switches to one on it', async () => {
    const { fetch } = await startSandbox({ scenarioAllow: ['empty', 'default'] })
    const refused = await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"large-catalog"}' })
    const body = (await jsonOf(refused)) as { message: string }
    expectErrorBody(body, 403, 'scenario_not_allowed')
    expect(body.message).toContain('default, empty')
    const listed = (await jsonOf(await fetch('/__sandbox/scenarios', { headers: auth() }))) as { name: string; switchable: boolean }[]
    expect(listed.filter((scenario) => scenario.switchable).map((scenario) => scenario.name).sort()).toEqual(['default', 'empty'])
    expect((await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"empty"}' })).status).toBe(200)
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth() }))).toEqual([])
  })
})

describe('the scenario allow-list never traps a tenant', () => {
  it('always lets a tenant go back to the start scenario, listed or not', async () => {
    const { fetch } = await startSandbox({ scenarioAllow: ['empty'] })
    expect((await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"empty"}' })).status).toBe(200)
    expect((await fetch('/__sandbox/scenario', { method: 'PUT', headers: auth(undefined, true), body: '{"name":"default"}' })).status).toBe(200)
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth() }))).toHaveLength(5)
  })

  it('refuses at start an allow-list naming a scenario the sandbox does not know', async () => {
    await expect(startSandbox({ scenarioAllow: ['empty', 'nope'] })).rejects.toThrow(/scenarioAllow: no scenario named "nope"\. Known: after-sunset, default/)
  })
})

describe('Prefer: delay and latency', () => {
  it('refuses a delay longer than the request timeout with 400, at once', async () => {
    const { fetch } = await startSandbox({ requestTimeoutMs: 1000, headersTimeoutMs: 1000 })
    const response = await fetch('/v1/categories', { headers: { ...auth(), prefer: 'delay=5000' }, signal: AbortSignal.timeout(3000) })
    const body = (await jsonOf(response)) as { message: string }
    expectErrorBody(body, 400, 'invalid_prefer')
    expect(body.message).toContain('from 0 to 1000')
  })

  it('refuses Prefer: delay=60000 under the default limits (30 s request timeout)', async () => {
    const { fetch } = await startSandbox()
    const response = await fetch('/v1/categories', { headers: { ...auth(), prefer: 'delay=60000' }, signal: AbortSignal.timeout(5000) })
    expectErrorBody(await jsonOf(response), 400, 'invalid_prefer')
  })
})

describe('the connection cap', () => {
  it('answers 503 over_capacity past the cap while health checks still get 200, then serves again', async () => {
    const { fetch, origin, server } = await startSandbox({ apiKeys: ['k', 'partner'], maxConnections: 10, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    // The server's open connections, gone once it has seen them close (after the cap's own count went down).
    const open = new Set<Socket>()
    server.on('connection', (socket: Socket) => {
      open.add(socket)
      socket.once('close', () => open.delete(socket))
    })
    // Requests that reached the server, counted before the cap judges them.
    let arrived = 0
    server.prependListener('request', () => arrived++)
    expect((await create(fetch, 'partner', { name: 'Partner data' })).status).toBe(201)
    server.closeIdleConnections()
    // @note Waited for, not slept on: on a loaded machine, the partner's keep-alive connection
    // closed later than 50 ms, or the tenth held request was read after the health check's
    // connection came in (200 ms), and a held request met the cap instead (503).
    await expect.poll(() => open.size, { timeout: 5000 }).toBe(0)
    arrived = 0
    const held = await Promise.all(Array.from({ length: 10 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 10_000))
    for (const socket of held) {
      socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nPrefer: delay=1500\r\nConnection: close\r\n\r\n')
    }
    await expect.poll(() => arrived, { timeout: 5000 }).toBe(10)
    const health = await globalThis.fetch(`${origin}/__sandbox/health`)
    expect(health.status).toBe(200)
    // The key holding every connection is refused another (attack7 K3: a partner now gets one, below).
    const refused = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('k') })
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe('1')
    expectErrorBody(await jsonOf(refused), 503, 'over_capacity')
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual(Array.from({ length: 10 }, () => 200))
    const list = (await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]
    expect(list.map((category) => category.name)).toContain('Partner data')
  })
})

/** Categories with the longest descriptions allowed: about 16 MB listed, more than loopback's buffers take from a client that does not read. */
const BIG_LIST = {
  name: 'big-list',
  version: '1.0.0',
  description: 'Categories with the longest descriptions allowed: about 16 MB listed.',
  seed: { categories: { generate: { count: 8000, name: 'Category {n}', description: `${'d'.repeat(1995)}{n}` } } },
}

describe('the connection cap, shared between keys (attack7 K3)', () => {
  /** A sandbox with a cap of 20, and a count of the requests that reached it. */
  const capped = async () => {
    const running = await startSandbox({ apiKeys: ['k', 'partner'], maxConnections: 20, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const arrived = { count: 0 }
    running.server.prependListener('request', () => arrived.count++)
    return { ...running, arrived }
  }
  const delayedCreate = (name: string) => {
    const body = JSON.stringify({ name })
    return `POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nPrefer: delay=2500\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`
  }
  const statuses = (answers: { status: number | undefined }[]) => answers.map((answer) => answer.status).sort()

  it('answers a partner 200 while one key holds every connection with delayed creates; the key gets 503 past its share, and the create cut for the partner is not stored', async () => {
    const { origin, fetch, arrived } = await capped()
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 8000))
    held.forEach((socket, i) => socket.write(delayedCreate(`held ${i}`)))
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(20)
    const partner = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    const own = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('k') })
    expect(own.status).toBe(503)
    expect(own.headers.get('retry-after')).toBe('1')
    expectErrorBody(await jsonOf(own), 503, 'over_capacity')
    const got = await Promise.all(answers)
    expect(statuses(got)).toEqual([...Array.from({ length: 19 }, () => 201), 503])
    const cut = got.find((answer) => answer.status === 503)!
    expect(cut.text).toContain('over_capacity')
    expect(cut.text.toLowerCase()).toContain('retry-after: 1')
    expect(cut.closed).toBe(true)
    // Nothing answered 503 was stored: the list holds exactly the 19 creates answered 201.
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth('k') }))) as { name: string }[]).map((category) => category.name)
    const created = got.flatMap((answer, i) => (answer.status === 201 ? [`held ${i}`] : []))
    expect(names.filter((name) => name.startsWith('held ')).sort()).toEqual(created.sort())
  })

  it('answers a partner 200 while one key fires delayed requests and half-closes at once; the half-closed clients not cut still get their answers (F04)', async () => {
    const { origin, arrived } = await capped()
    const fired = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = fired.map((socket) => collect(socket, 8000))
    for (const socket of fired) {
      socket.end('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nPrefer: delay=2500\r\n\r\n')
    }
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(20)
    const own = await fetch(`${origin}/v1/categories`, { headers: auth('k') })
    expect(own.status).toBe(503)
    expect(own.headers.get('retry-after')).toBe('1')
    const partner = await fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    // One cut for the partner's connection (503, nothing run), the 19 others answered in full.
    expect(statuses(await Promise.all(answers))).toEqual([...Array.from({ length: 19 }, () => 200), 503])
  })

  it('answers a partner 200 while one key keeps every connection open and idle, closing one of them', async () => {
    const { origin, arrived } = await capped()
    const idle = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const closed = idle.map((socket) => new Promise<void>((resolve) => socket.once('close', () => resolve())))
    await Promise.all(
      idle.map((socket) => {
        socket.on('error', () => undefined)
        const answered = new Promise((resolve) => socket.once('data', resolve))
        socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n\r\n')
        return answered
      }),
    )
    expect(arrived.count).toBe(20)
    const partner = await fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    await Promise.race(closed)
    for (const socket of idle) socket.destroy()
  })

  it('cuts a key’s planned answers’ delays for another key past the cap, saying the plan was used; the other key’s requests are answered (attack9 C2)', async () => {
    const { origin, arrived } = await capped()
    const plan = await globalThis.fetch(`${origin}/__sandbox/answers`, { method: 'POST', headers: { ...auth('k', true), Connection: 'close' }, body: JSON.stringify({ operation: 'listCategories', status: 200, delayMs: 1500, times: 100 }) })
    expect(plan.status).toBe(201)
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 5000))
    for (const socket of held) socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nConnection: close\r\n\r\n')
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(21)
    // The partner's requests past the cap: each ends one of the key's planned delays (before, none: Node's hard cap was the only bound).
    const partner = await Promise.all(Array.from({ length: 5 }, () => globalThis.fetch(`${origin}/v1/categories`, { headers: { ...auth('partner'), Connection: 'close' } })))
    expect(partner.map((response) => response.status)).toEqual([200, 200, 200, 200, 200])
    const got = await Promise.all(answers)
    // Each partner request past the cap ended one (how many were past it depends on when the ended ones closed).
    const cuts = got.filter((answer) => answer.status === 503)
    expect(cuts.length).toBeGreaterThanOrEqual(1)
    expect(cuts.length + got.filter((answer) => answer.status === 200).length).toBe(20)
    for (const cut of cuts) expect(cut.text).toContain('its planned answer was used')
  })

  it('resets a key’s connections still sending their bodies for another key past the cap, storing nothing of them (attack9 C2, slow bodies)', async () => {
    const { origin, fetch, arrived } = await capped()
    const held = await Promise.all(Array.from({ length: 20 }, () => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 1500))
    for (const socket of held) {
      socket.on('error', () => undefined)
      socket.write('POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"na')
    }
    await expect.poll(() => arrived.count, { timeout: 5000 }).toBe(20)
    const partner = await Promise.all(Array.from({ length: 5 }, () => globalThis.fetch(`${origin}/v1/categories`, { headers: { ...auth('partner'), Connection: 'close' } })))
    expect(partner.map((response) => response.status)).toEqual([200, 200, 200, 200, 200])
    const got = await Promise.all(answers)
    // Reset for the partner, with no answer (nothing of them ran; before, none); the rest still waiting for their bodies.
    expect(got.filter((answer) => answer.closed && answer.status === undefined).length).toBeGreaterThanOrEqual(1)
    expect(got.every((answer) => answer.status === undefined)).toBe(true)
    const seed = (await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as unknown[]
    expect(await jsonOf(await fetch('/v1/categories', { headers: auth('k') }))).toEqual(seed)
  })

  it('resets a key’s connections whose long answers their clients do not take, for another key past the cap (attack9 C4)', async () => {
    const { origin, server } = await startSandbox({ apiKeys: ['k', 'partner'], scenario: BIG_LIST, maxConnections: 3, requestTimeoutMs: 20_000, headersTimeoutMs: 2000 })
    const held = await Promise.all(Array.from({ length: 3 }, () => openSocket(origin)))
    for (const socket of held) {
      socket.on('error', () => undefined)
      socket.pause()
      socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k\r\n\r\n')
    }
    // Each answer is under way and stuck: its client reads nothing.
    const open = () => new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)))
    await expect.poll(open, { timeout: 5000 }).toBe(3)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const partner = await globalThis.fetch(`${origin}/__sandbox/state`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    // One of the key's is reset for it (before, none was ended until the request timeout): 2 of the key's and the partner's stay.
    await expect.poll(open, { timeout: 2000 }).toBe(3)
    for (const socket of held) socket.destroy()
  })

  it('ends another key’s delayed request before a partner’s slow download when there are more keys than the cap', async () => {
    const { origin, server } = await startSandbox({ apiKeys: ['partner', 'k1', 'k2', 'k3'], scenario: BIG_LIST, maxConnections: 3, requestTimeoutMs: 20_000, headersTimeoutMs: 2000 })
    const open = () => new Promise<number>((resolve) => server.getConnections((_error, count) => resolve(count)))
    // The keys' tenants made first (seeding 8,000 categories takes a while): their requests below go straight to their delays.
    for (const key of ['k1', 'k2', 'k3']) {
      const made = await globalThis.fetch(`${origin}/v1/categories`, { method: 'POST', headers: { ...auth(key, true), Connection: 'close' }, body: JSON.stringify({ name: 'first' }) })
      expect(made.status).toBe(201)
    }
    await expect.poll(open, { timeout: 5000 }).toBe(0)
    // The partner's download, not read for now (a slow reader), is the oldest key's connection.
    const download = await openSocket(origin)
    download.pause()
    const downloaded = collect(download, 15_000)
    download.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nConnection: close\r\n\r\n')
    await expect.poll(open, { timeout: 5000 }).toBe(1)
    await new Promise((resolve) => setTimeout(resolve, 300))
    const delayed = await Promise.all(['k1', 'k2'].map(() => openSocket(origin)))
    const answers = delayed.map((socket) => collect(socket, 5000))
    const body = JSON.stringify({ name: 'delayed' })
    delayed.forEach((socket, i) =>
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k${i + 1}\r\nContent-Type: application/json\r\nPrefer: delay=1500\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`),
    )
    await expect.poll(open, { timeout: 5000 }).toBe(3)
    const created = await globalThis.fetch(`${origin}/v1/categories`, { method: 'POST', headers: { ...auth('k3', true), Connection: 'close' }, body: JSON.stringify({ name: 'k3' }) })
    expect(created.status).toBe(201)
    download.resume()
    const got = await downloaded
    expect(got.status).toBe(200)
    expect(got.text.length).toBeGreaterThan(16_000_000)
    expect(statuses(await Promise.all(answers))).toContain(503)
  })

  it('never resets a partner’s only upload for a crowd of more keys than the cap, each holding one slow body (attack10 C1)', async () => {
    const keys = Array.from({ length: 4 }, (_, i) => `c${i}`)
    const { origin, fetch } = await startSandbox({ apiKeys: ['partner', ...keys], maxConnections: 3, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const body = JSON.stringify({ name: 'uploaded slowly' })
    const upload = await openSocket(origin)
    const uploaded = collect(upload, 5000)
    upload.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 5)}`)
    const crowd = await Promise.all(keys.map(() => openSocket(origin)))
    for (const [i, socket] of crowd.entries()) {
      socket.on('error', () => undefined)
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${keys[i]!}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
    upload.write(body.slice(5))
    const answer = await uploaded
    // Before: the partner's upload, the oldest key's, was reset for the crowd.
    expect(answer.status).toBe(201)
    for (const socket of crowd) socket.destroy()
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)
    expect(names).toContain('uploaded slowly')
  })

  it('counts tokens the sandbox does not accept as one key: a crowd of invented tokens never resets a partner’s uploads (attack11 K1)', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: ['partner'], maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const uploads = await Promise.all([0, 1].map(() => openSocket(origin)))
    const answers = uploads.map((socket) => collect(socket, 5000))
    const bodies = [0, 1].map((i) => JSON.stringify({ name: `uploaded ${i}` }))
    uploads.forEach((socket, i) =>
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${bodies[i]!.length}\r\n\r\n${bodies[i]!.slice(0, 5)}`),
    )
    const crowd = await Promise.all(Array.from({ length: 10 }, () => openSocket(origin)))
    for (const [i, socket] of crowd.entries()) {
      socket.on('error', () => undefined)
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer invented-${i}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`)
      await new Promise((resolve) => setTimeout(resolve, 30))
    }
    uploads.forEach((socket, i) => socket.write(bodies[i]!.slice(5)))
    // Before: each invented token was a key, more keys than the cap, and the partner's second upload was beyond its share of 1.
    expect((await Promise.all(answers)).map((answer) => answer.status)).toEqual([201, 201])
    for (const socket of crowd) socket.destroy()
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)
    expect(names).toEqual(expect.arrayContaining(['uploaded 0', 'uploaded 1']))
  })

  it('lets a partner and the health probe in while cap + reserve connections send nothing, ending the oldest silent one for each (attack11 K3, C5)', async () => {
    const { origin } = await startSandbox({ apiKeys: ['partner'], maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 3000 })
    const silent: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE; i++) silent.push(await openSocket(origin))
    const closed = silent.map((socket) => collect(socket, 6000))
    // Silent for a second: a connection younger than that may be a partner's whose request is on its way.
    await new Promise((resolve) => setTimeout(resolve, 1100))
    // Before: Node closed every new connection past cap + reserve before reading it.
    const partner = await exchange(origin, ['GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nConnection: close\r\n\r\n'], { end: false })
    expect(partner.status).toBe(200)
    const health = await exchange(origin, ['GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { end: false })
    expect(health.status).toBe(200)
    for (const socket of silent) socket.destroy()
    // The two ended were the oldest, each closed with nothing sent to it.
    const ended = (await Promise.all(closed.slice(0, 2))).map((answer) => ({ closed: answer.closed, text: answer.text }))
    expect(ended).toEqual([
      { closed: true, text: '' },
      { closed: true, text: '' },
    ])
  })

  it('answers a browser partner’s preflights past the cap while uploads fill it, and gives its refusals the CORS headers (attack12 K4)', async () => {
    const origin = 'https://app.example.com'
    const { origin: server } = await startSandbox({ apiKeys: ['partner'], corsOrigins: [origin], maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 3000 })
    const crowd: Socket[] = []
    for (let i = 0; i < 10; i++) {
      const socket = await openSocket(server)
      socket.on('error', () => undefined)
      // The partner's own uploads under way (a keyless body is dropped as it comes, its connection soon idle).
      socket.write('POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{')
      crowd.push(socket)
    }
    await new Promise((resolve) => setTimeout(resolve, 200))
    // Before: 503 over_capacity, with no Access-Control-Allow-Origin: the app's fetch failed as a CORS error.
    const preflight = await exchange(server, [`OPTIONS /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: ${origin}\r\nAccess-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: authorization,content-type\r\nConnection: close\r\n\r\n`], { end: false })
    expect(preflight.status).toBe(204)
    expect(preflight.text.toLowerCase()).toContain(`access-control-allow-origin: ${origin}`)
    // A request of the key past its share, none of its connections idle, is still refused, readably.
    const refused = await exchange(server, [`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nOrigin: ${origin}\r\nConnection: close\r\n\r\n`], { end: false })
    expect(refused.status).toBe(503)
    expect(refused.text.toLowerCase()).toContain(`access-control-allow-origin: ${origin}`)
    for (const socket of crowd) socket.destroy()
  })

  it('ends the oldest of connections that sent nothing, however young, before a partner’s idle keep-alive connection or the newcomer (attack14 D1)', async () => {
    const { origin } = await startSandbox({ apiKeys: ['partner'], maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 3000 })
    const list = 'GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\n\r\n'
    const kept = await openSocket(origin)
    kept.on('error', () => undefined)
    expect(await ask(kept, list)).toBe(200)
    // Silent connections up to the hard limit, all younger than a second (a flood reopening them within it).
    const silent: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE - 1; i++) {
      const socket = await openSocket(origin)
      socket.on('error', () => undefined)
      silent.push(socket)
    }
    const health = await exchange(origin, ['GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { end: false })
    expect(health.status).toBe(200)
    const fresh = await exchange(origin, [list.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')], { end: false })
    expect(fresh.status).toBe(200)
    // Before: the partner's idle keep-alive connection was closed for the newcomers (its next request reset).
    expect(await ask(kept, list)).toBe(200)
    kept.destroy()
    for (const socket of silent) socket.destroy()
  })

  it('lets a partner’s new connection and the health probe in, and keeps its keep-alive connection, while a crowd of invented tokens (--any-key) each send one request and idle (attack16 K1)', async () => {
    const { origin } = await startSandbox({ anyKey: true, maxConnections: 4, requestTimeoutMs: 5000, headersTimeoutMs: 3000 })
    const list = 'GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\n\r\n'
    const kept = await openSocket(origin)
    kept.on('error', () => undefined)
    expect(await ask(kept, list)).toBe(200)
    // Up to the hard limit: each its own token, one answered request, then idle.
    const crowd: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE - 1; i++) {
      const socket = await openSocket(origin)
      socket.on('error', () => undefined)
      crowd.push(socket)
      await ask(socket, `GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer invented-${i}\r\n\r\n`)
    }
    // The partner goes on using its keep-alive connection meanwhile.
    expect(await ask(kept, list)).toBe(200)
    // Before: the newcomer, silent for the instant before its request was read, was the one ended.
    const health = await exchange(origin, ['GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { end: false })
    expect(health.status).toBe(200)
    const fresh = await exchange(origin, [list.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n')], { end: false })
    expect(fresh.status).toBe(200)
    // And the partner's keep-alive connection, the oldest, was not ended for them.
    expect(await ask(kept, list)).toBe(200)
    kept.destroy()
    for (const socket of crowd) socket.destroy()
  })

  it.runIf(existsSync('/usr/bin/prlimit'))('keeps its door within a low open-file limit (ulimit -n 200), saying so at start, so that silent connections never keep health out (attack14 D2)', async () => {
    const port = await freePort()
    const child = spawn('/usr/bin/prlimit', ['--nofile=200:200', process.execPath, CLI_BINARY, 'serve', '--port', String(port), '--api-key', 'partner', '--quiet'], { cwd: fileURLToPath(new URL('../../', import.meta.url)), stdio: ['ignore', 'pipe', 'pipe'] })
    onTestFinished(() => {
      child.kill('SIGKILL')
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    await vi.waitFor(() => expect(stdout).toContain('is running'), { timeout: 30_000, interval: 100 })
    expect(stderr).toContain('the process may open 200 files (ulimit -n)')
    const origin = `http://127.0.0.1:${port}`
    const silent: Socket[] = []
    for (let i = 0; i < 300; i++) {
      const socket = connect(port, '127.0.0.1')
      socket.on('error', () => undefined)
      silent.push(socket)
    }
    await new Promise((resolve) => setTimeout(resolve, 1500))
    // Before: accept() failed (EMFILE) from about 190 connections, long before the door at 1,256: every new connection closed.
    const health = await exchange(origin, ['GET /__sandbox/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n'], { end: false })
    expect(health.status).toBe(200)
    for (const socket of silent) socket.destroy()
  })

  it.runIf(existsSync('/usr/bin/prlimit'))('serves more than one connection under ulimit -n 64, keeping for other files what is open at start and a margin, not a fixed 64 (attack16 L1)', async () => {
    const port = await freePort()
    const child = spawn('/usr/bin/prlimit', ['--nofile=64:64', process.execPath, CLI_BINARY, 'serve', '--port', String(port), '--api-key', 'partner', '--quiet'], { cwd: fileURLToPath(new URL('../../', import.meta.url)), stdio: ['ignore', 'pipe', 'pipe'] })
    onTestFinished(() => {
      child.kill('SIGKILL')
    })
    let stdout = ''
    let stderr = ''
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    await vi.waitFor(() => expect(stdout).toContain('is running'), { timeout: 30_000, interval: 100 })
    // Before: "it serves 1 connections (2 open at most)".
    const served = Number(/it serves (\d+) connections/.exec(stderr)?.[1])
    expect(served).toBeGreaterThanOrEqual(10)
    // As many connections as it serves, each answered, none refused.
    const origin = `http://127.0.0.1:${port}`
    const sockets = await Promise.all(Array.from({ length: served }, () => openSocket(origin)))
    const answers = await Promise.all(sockets.map((socket) => {
      const answer = collect(socket, 5000)
      socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nConnection: close\r\n\r\n')
      return answer
    }))
    expect(answers.map((answer) => answer.status)).toEqual(answers.map(() => 200))
  })

  it('lets a partner in while cap + reserve keys (--any-key) each send a body slowly, resetting the body arriving longest (attack11 K3)', async () => {
    const { origin, fetch } = await startSandbox({ anyKey: true, maxConnections: 4, requestTimeoutMs: 8000, headersTimeoutMs: 3000 })
    const slow: Socket[] = []
    for (let i = 0; i < 4 + CONNECTION_RESERVE; i++) {
      const socket = await openSocket(origin)
      socket.on('error', () => undefined)
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer slow-${i}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{`)
      slow.push(socket)
    }
    const first = collect(slow[0]!, 8000)
    await new Promise((resolve) => setTimeout(resolve, 200))
    const body = JSON.stringify({ name: 'in at last' })
    const partner = await exchange(origin, [`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: ${body.length}\r\n\r\n${body}`], { end: false })
    expect(partner.status).toBe(201)
    // The body arriving longest was reset: nothing of it ran, nothing answered.
    expect(await first).toMatchObject({ closed: true, text: '' })
    for (const socket of slow) socket.destroy()
    expect(((await jsonOf(await fetch('/v1/categories', { headers: auth('partner') }))) as { name: string }[]).map((category) => category.name)).toContain('in at last')
  })

  it('cuts a delay of another key for a new key when there are more keys than the cap, each holding its share of 1 (attack9 C3)', async () => {
    const keys = Array.from({ length: 6 }, (_, i) => `c${i}`)
    const { origin } = await startSandbox({ apiKeys: [...keys, 'partner'], maxConnections: 5, requestTimeoutMs: 5000, headersTimeoutMs: 1000 })
    const held = await Promise.all(keys.map(() => openSocket(origin)))
    const answers = held.map((socket) => collect(socket, 5000))
    held.forEach((socket, i) => socket.write(`GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${keys[i]!}\r\nPrefer: delay=1500\r\nConnection: close\r\n\r\n`))
    const partner = await globalThis.fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    expect(partner.status).toBe(200)
    const got = await Promise.all(answers)
    // Before: every key was within its share of 1, so nothing was cut past the cap.
    expect(got.filter((answer) => answer.status === 503).length).toBeGreaterThanOrEqual(1)
    expect(got.every((answer) => answer.status === 200 || answer.status === 503)).toBe(true)
  })

  it('lets a new key in at the tenant cap while the other keys wait out delays: a delayed create is cut (503 over_capacity), not waited for', async () => {
    const { origin, fetch, sandbox } = await startSandbox({ anyKey: true, maxTenants: 3 })
    const fired = await Promise.all(
      ['a', 'b', 'c'].map(async (key) => {
        const socket = await openSocket(origin)
        const answer = collect(socket, 30_000)
        const body = JSON.stringify({ name: `delayed ${key}` })
        socket.end(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nPrefer: delay=20000\r\nContent-Length: ${body.length}\r\n\r\n${body}`)
        return { answer }
      }),
    )
    // The three tenants are in use, each with its create waiting out its delay.
    await expect.poll(() => [...sandbox.tenants.live()].filter(([, tenant]) => tenant.busy).length, { timeout: 5000 }).toBe(3)
    // Before: the new key waited 10 s for a tenant to leave, then 503 tenant_capacity.
    const partner = await fetch('/v1/categories', { headers: auth('partner') })
    expect(partner.status).toBe(200)
    const first = await Promise.race(fired.map(({ answer }) => answer))
    expect(first.status).toBe(503)
    expect(first.text).toContain('over_capacity')
  })
})

describe('timeouts, enforced near the configured time', () => {
  it('cuts trickled headers off with 408 near the header timeout', async () => {
    const { origin, fetch } = await startSandbox({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const slow = await openSocket(origin)
    const started = performance.now()
    // Waited for at most 10 s: Node's own check, before the fix, came every 30 s.
    const cutOff = collect(slow, 10_000)
    slow.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ')
    const trickle = setInterval(() => (slow.destroyed ? clearInterval(trickle) : slow.write('a')), 50)
    const answer = await cutOff
    const elapsed = performance.now() - started
    clearInterval(trickle)
    // Cut off (within the 10 s waited), and not before the timeout: a loaded machine can only make it later.
    expect(answer.status).toBe(408)
    expect(elapsed).toBeGreaterThanOrEqual(900)
    expect((await fetch('/__sandbox/health')).status).toBe(200)
  })

  it('cuts a trickled body off near the request timeout without storing it', async () => {
    const { origin, fetch } = await startSandbox({ headersTimeoutMs: 1000, requestTimeoutMs: 2000 })
    const body = JSON.stringify({ name: 'trickled', description: 'x'.repeat(500) })
    const slow = await openSocket(origin)
    const started = performance.now()
    const cutOff = collect(slow, 10_000)
    slow.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sandbox-dev-key\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`)
    let sent = 0
    const trickle = setInterval(() => (slow.destroyed || sent >= body.length ? clearInterval(trickle) : slow.write(body[sent++]!)), 50)
    const answer = await cutOff
    const elapsed = performance.now() - started
    clearInterval(trickle)
    expect(answer.closed).toBe(true)
    expect(elapsed).toBeGreaterThanOrEqual(1800)
    const names = ((await jsonOf(await fetch('/v1/categories', { headers: auth() }))) as { name: string }[]).map((c) => c.name)
    expect(names).not.toContain('trickled')
  })
})

describe('bodies over the limit', () => {
  /** A 5 MiB body: a string (sent with its Content-Length) or a stream of 64 KiB chunks (sent chunked). */
  const bodies = {
    declared: () => ({ body: 'x'.repeat(5 * 1024 * 1024) }),
    streamed: () => ({
      duplex: 'half',
      body: new ReadableStream<Uint8Array>({
        async start(controller) {
          for (let i = 0; i < 80; i++) {
            controller.enqueue(new Uint8Array(64 * 1024).fill(0x78))
            if (i % 8 === 0) await new Promise((resolve) => setTimeout(resolve, 2))
          }
          controller.close()
        },
      }),
    }),
  }

  it.each(['declared', 'streamed'] as const)(
    `answers every one of ${OVER_LIMIT_POSTS} fetch POSTs of 5 MiB (%s) with the 413 Error body, never a network error`,
    async (kind) => {
      const { origin } = await startSandbox()
      const outcomes: string[] = []
      for (let i = 0; i < OVER_LIMIT_POSTS; i++) {
        try {
          const init = { method: 'POST', headers: auth(undefined, true), ...bodies[kind]() } as RequestInit
          const response = await fetch(`${origin}/v1/categories`, init)
          outcomes.push(`${response.status} ${((await response.json()) as { code: string }).code}`)
        } catch (error) {
          outcomes.push(String((error as Error).cause ?? error))
        }
      }
      expect(outcomes).toEqual(Array.from({ length: OVER_LIMIT_POSTS }, () => '413 payload_too_large'))
    },
  )

  it('lets a client that asked for Connection: close send its whole body over the limit and read the 413 (trial finding: it got EPIPE)', async () => {
    const { origin, logs } = await startSandbox()
    const { errors, text, closed } = await sendOverLimitClosing(origin)
    expect(errors).toEqual([])
    expect(text).toMatch(/^HTTP\/1\.1 413 /)
    expect(text).toContain('"code":"payload_too_large"')
    expect(closed).toBe(true)
    // Logged with the status the client got, once it went out.
    await expect.poll(() => logs.map((entry) => entry.status)).toEqual([413])
  })

  it('keeps reading the rest of a body over the limit when the server itself stalled while its client kept sending (flaky in CI: EPIPE)', async () => {
    const { origin } = await startSandbox()
    const { errors, text, closed } = await sendOverLimitClosing(origin, (piece) => {
      if (piece !== 1) return
      // The whole process stalls (a long collection, a starved CPU) right after the second
      // piece went out: the server's idle timer is due before it has read a byte of it.
      const stalledUntil = performance.now() + DRAIN_IDLE_MS + 200
      while (performance.now() < stalledUntil);
    })
    expect(errors).toEqual([])
    expect(text).toMatch(/^HTTP\/1\.1 413 /)
    expect(closed).toBe(true)
  })

  it('keeps the connection usable after a 413 whose rest it read', async () => {
    const { origin } = await startSandbox()
    const socket = await openSocket(origin)
    const answer = collect(socket, 3000)
    const big = 'x'.repeat(2 * 1024 * 1024)
    socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sandbox-dev-key\r\nContent-Type: application/json\r\nContent-Length: ${big.length}\r\n\r\n`)
    socket.write(big)
    socket.write('GET /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer sandbox-dev-key\r\nConnection: close\r\n\r\n')
    const { text } = await answer
    expect(text).toMatch(/^HTTP\/1\.1 413 /)
    expect(text).toMatch(/HTTP\/1\.1 200 OK[\s\S]*"name":"Dogs"/)
  })
})

describe('answers of 500 never show a server detail', () => {
  const leaky = () => new Error("EROFS: read-only file system, open '/var/lib/petstore-sandbox/2f1c9a/log.jsonl'")

  it('answers a failing create with internal_error and no file path', async () => {
    const warnings: string[] = []
    const { fetch, sandbox } = await startSandbox({ warn: (message) => warnings.push(message) })
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(200)
    const tenant = (await sandbox.tenants.resolve('sandbox-dev-key'))!
    tenant.store.createCategory = () => Promise.reject(leaky())
    const response = await create(fetch, 'sandbox-dev-key', { name: 'x' })
    const body = (await jsonOf(response)) as { message: string }
    expectErrorBody(body, 500, 'internal_error')
    expect(body.message).not.toContain('/var/lib')
    expect(body.message).not.toContain('EROFS')
    expect(warnings.join('\n')).toContain('/var/lib/petstore-sandbox')
  })

  it('answers a failing admin route with internal_error and no file path', async () => {
    const { fetch, sandbox } = await startSandbox({ warn: () => undefined })
    expect((await fetch('/v1/categories', { headers: auth() })).status).toBe(200)
    const tenant = (await sandbox.tenants.resolve('sandbox-dev-key'))!
    tenant.resetTo = () => Promise.reject(leaky())
    const response = await fetch('/__sandbox/reset', { method: 'POST', headers: auth() })
    const body = (await jsonOf(response)) as { message: string }
    expectErrorBody(body, 500, 'internal_error')
    expect(body.message).not.toContain('/var/lib')
  })
})

/**
 * Sends a create whose body is 1 MiB + 1 (over the limit) on a connection that closes after its
 * answer, the rest of the body in four pieces 150 ms apart (the 413 is answered after the first);
 * `afterPiece` runs as each piece goes out. Resolves with the client's socket errors and what it read.
 */
async function sendOverLimitClosing(origin: string, afterPiece: (piece: number) => void = () => undefined) {
  const socket = await openSocket(origin)
  const errors: string[] = []
  socket.on('error', (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message))
  const answer = collect(socket, 10_000)
  const size = 1024 * 1024 + 1
  socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nAuthorization: Bearer sandbox-dev-key\r\nContent-Type: application/json\r\nContent-Length: ${size}\r\n\r\n`)
  const length = Math.ceil(size / 4)
  for (let piece = 0; piece * length < size; piece++) {
    await new Promise((resolve) => setTimeout(resolve, 150))
    const written = new Promise<void>((resolve) =>
      socket.write('x'.repeat(Math.min(length, size - piece * length)), (error) => {
        if (error) errors.push((error as NodeJS.ErrnoException).code ?? error.message)
        resolve()
      }),
    )
    afterPiece(piece)
    await written
  }
  return { errors, ...(await answer) }
}

describe('a server on a Unix socket (attack16 U1)', () => {
  it('ends a connection beyond its key’s share without exiting: a Unix socket cannot be reset, so it is closed', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-unix-'))
    const path = join(dir, 'sandbox.sock')
    const sandbox = await createSandboxApp({ anyKey: true, maxConnections: 2, demoDir: false })
    const server = sandbox.createServer()
    await new Promise<void>((resolve) => server.listen(path, resolve))
    onTestFinished(async () => {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
      await sandbox.close()
      rmSync(dir, { recursive: true, force: true })
    })
    // Key A: three uploads under way (beyond its share of 2); then key B's list, past the cap.
    const slow = Array.from({ length: 3 }, () => {
      const socket = connect(path, () => socket.write('POST /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer A\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"na'))
      socket.on('error', () => undefined)
      return socket
    })
    onTestFinished(() => slow.forEach((socket) => socket.destroy()))
    await new Promise((resolve) => setTimeout(resolve, 300))
    const listed = await new Promise<string>((resolve, reject) => {
      const socket = connect(path, () => socket.write('GET /v1/categories HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer B\r\nConnection: close\r\n\r\n'))
      let text = ''
      socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')))
      socket.on('close', () => resolve(text))
      socket.on('error', reject)
    })
    expect(listed).toMatch(/^HTTP\/1\.1 200 /)
  })
})

describe('request bodies without a key (attack16 B1)', () => {
  /**
   * Ten requests of 1 MiB bodies, each head `head(index)`, all but each body's last byte sent (held
   * whole, all ten, before the bodies were reserved), then `meanwhile()`, then the last bytes; what
   * each was answered, once every one of them was refused (503 `over_capacity`) or let in (`admitted`),
   * and at most four let in: twice a 4 MiB budget, 2 MiB reserved each.
   */
  async function tenBodies(origin: string, head: (index: number) => string, admitted: number, meanwhile: () => Promise<void> = async () => undefined): Promise<void> {
    const length = 1024 * 1024
    const answers: Promise<{ status: number | undefined; text: string }>[] = []
    const sockets: Socket[] = []
    for (let index = 0; index < 10; index++) {
      const socket = await openSocket(origin)
      sockets.push(socket)
      answers.push(collect(socket, 8000))
      socket.write(`${head(index)}Host: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`)
      socket.write(Buffer.alloc(length - 1, 0x20))
    }
    await meanwhile()
    for (const socket of sockets) if (!socket.destroyed) socket.write('}')
    const settled = await Promise.all(answers)
    const refused = settled.filter((answer) => answer.status === 503)
    expect(refused.length).toBeGreaterThan(0)
    for (const answer of refused) expect(answer.text).toContain('"code":"over_capacity"')
    expect(settled.filter((answer) => answer.status === admitted)).toHaveLength(10 - refused.length)
    expect(10 - refused.length).toBeLessThanOrEqual(4)
  }

  it('counts bodies with an accepted key against the memory budget: past it, 503 over_capacity and the body dropped, and a partner creates as ever (attack16 B1)', async () => {
    const { origin, fetch } = await startSandbox({ anyKey: true, memoryBudgetBytes: 4 * 1024 * 1024, requestTimeoutMs: 20_000 })
    // Each under a key of its own; let in, `   …}` is not JSON: 400.
    await tenBodies(origin, (index) => `POST /v1/categories HTTP/1.1\r\nAuthorization: Bearer crowd-${index}\r\n`, 400, async () => {
      // A partner's create (a small body, never counted) is served meanwhile.
      expect((await fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name: 'kept' }) })).status).toBe(201)
    })
  })

  it.each(['PUT /__sandbox/scenario', 'POST /__sandbox/reset', 'POST /__sandbox/answers'])('counts the bodies of %s against the memory budget as the API does: past it, 503 over_capacity and the body dropped (attack21 B1)', async (route) => {
    const { origin } = await startSandbox({ anyKey: true, memoryBudgetBytes: 4 * 1024 * 1024, requestTimeoutMs: 20_000 })
    await tenBodies(origin, (index) => `${route} HTTP/1.1\r\nAuthorization: Bearer crowd-${index}\r\n`, 400)
  })

  it('counts the bodies it passes on in proxy mode, with a key or without, against the memory budget: past it, 503 over_capacity (attack21 B2)', async () => {
    const { createServer } = await import('node:http')
    // The real service: it answers every request 401 once it has its body.
    const real = createServer((req, res) => {
      req.resume()
      req.on('end', () => res.writeHead(401, { 'content-type': 'application/json' }).end('{"code":"missing_api_key","message":"no key"}'))
    })
    await new Promise<void>((resolve) => real.listen(0, '127.0.0.1', resolve))
    onTestFinished(() => new Promise<void>((resolve) => real.close(() => resolve())))
    const base = `http://127.0.0.1:${(real.address() as { port: number }).port}/v1`
    const { origin } = await startSandbox({ proxy: base, memoryBudgetBytes: 4 * 1024 * 1024, requestTimeoutMs: 20_000 })
    // No key: passed on all the same (the service judges keys).
    await tenBodies(origin, () => 'POST /v1/categories HTTP/1.1\r\n', 401)
  })

  /**
   * A sandbox in a process of its own (the bodies are parsed on its one thread, not the test's),
   * `flood` creates of `size` bytes of many properties (parsing one takes milliseconds) under
   * `key(index)`, every body but its last byte sent, then their last bytes together; resolves
   * with the sandbox's origin and each create's answer, with when it came.
   */
  async function bodiesEndingTogether(serveArgs: string[], flood: number, size: number, key: (index: number) => string) {
    const server = runCli(['serve', '--port', '0', '--quiet', ...serveArgs])
    await server.waitFor('is running')
    const origin = /API\s+(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(server.stdout())![1]!
    let body = '{"name":"large"'
    for (let index = 0; body.length < size - 32; index++) body += `,"p${index}":${index}`
    const bytes = Buffer.from(`${body}}`)
    const sockets: Socket[] = []
    const answered: Promise<RawAnswer & { at: number }>[] = []
    for (let index = 0; index < flood; index++) {
      const socket = await openSocket(origin)
      sockets.push(socket)
      answered.push(collect(socket, 30_000).then((answer) => ({ ...answer, at: performance.now() })))
      socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key(index)}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${bytes.length}\r\n\r\n`)
      socket.write(bytes.subarray(0, -1))
    }
    await new Promise((resolve) => setTimeout(resolve, 500))
    for (const socket of sockets) socket.write(bytes.subarray(-1))
    await new Promise((resolve) => setTimeout(resolve, 5))
    return { origin, answered: Promise.all(answered) }
  }

  it.each([
    { flood: TURN_BODIES, bytes: 1024 * 1024, finding: 'attack16 P1' },
    // Just under the size that once took a turn of its own.
    { flood: TURN_BODIES * 12, bytes: 65_000, finding: 'attack22 B1' },
  ])('serves a partner between $flood bodies of $bytes bytes that end together, not after all of them ($finding)', async ({ flood, bytes }) => {
    const { origin, answered } = await bodiesEndingTogether(['--any-key'], flood, bytes, (index) => `crowd-${index}`)
    const list = await fetch(`${origin}/v1/categories`, { headers: auth('partner') })
    const partnerAt = performance.now()
    expect(list.status).toBe(200)
    // Before: after 38-40 of the 40 (each body handled as it ended, all in one turn of the event loop).
    expect((await answered).filter(({ at }) => at < partnerAt).length).toBeLessThan(flood / 2)
  })

  it('serves a partner’s create of 2 KB between one key’s bodies of 1 MiB that end together, not after all of them (attack23 T1)', async () => {
    const flood = TURN_BODIES
    const { origin, answered } = await bodiesEndingTogether(['--api-key', 'crowd', '--api-key', 'partner'], flood, 1024 * 1024, () => 'crowd')
    // Over the 1 KiB a body is handled as it ends: it waits for a turn, as the crowd's do.
    const create = await fetch(`${origin}/v1/categories`, { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name: 'partner', description: 'd'.repeat(2000) }) })
    const partnerAt = performance.now()
    expect(create.status).toBe(201)
    // Before: after all of them (one queue, in the order the bodies ended).
    expect((await answered).filter(({ at }) => at < partnerAt).length).toBeLessThan(flood / 2)
  })

  it('serves a partner’s create of 2 KB from another address between a crowd’s bodies of 1 MiB, each under a key of its own (--any-key), not after all of them (attack25 T1)', async () => {
    const flood = 2 * TURN_BODIES
    const { origin, answered } = await bodiesEndingTogether(['--any-key'], flood, 1024 * 1024, (index) => `crowd-${index}`)
    // The partner's own host: another loopback address than the crowd's 127.0.0.1.
    const body = JSON.stringify({ name: 'partner', description: 'd'.repeat(2000) })
    const socket = connect({ port: Number(new URL(origin).port), host: '127.0.0.1', localAddress: '127.0.0.2' })
    await new Promise((resolve, reject) => socket.once('connect', resolve).once('error', reject))
    const answer = collect(socket, 30_000)
    socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer partner\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`)
    expect((await answer).status).toBe(201)
    const partnerAt = performance.now()
    // Before: after all of them (a turn to each key, and the crowd's keys as many as its bodies).
    expect((await answered).filter(({ at }) => at < partnerAt).length).toBeLessThan(flood / 2)
  })

  it('refuses a body that waited half its request timeout for a turn 503 over_capacity, storing nothing of it, and stores every create it answers 201 (attack23 T1)', async () => {
    // 1 MiB bodies of many properties: each turn holds the loop for tens of ms, and a pause as long follows.
    const flood = 3 * TURN_BODIES
    const { origin, answered } = await bodiesEndingTogether(['--api-key', 'crowd', '--api-key', 'partner', '--request-timeout', '1000'], flood, 1024 * 1024, () => 'crowd')
    const answers = await answered
    const created = answers.filter((answer) => answer.status === 201)
    const refused = answers.filter((answer) => answer.status === 503)
    expect(created.length + refused.length).toBe(flood)
    // Before: every one 201, the last ones seconds past the request timeout.
    expect(refused.length).toBeGreaterThan(0)
    for (const answer of refused) {
      expect(answer.text).toMatch(/\r\nretry-after: 1\r\n/i)
      expect(answer.text).toContain('"code":"over_capacity"')
      expect(answer.text).toContain('waiting for its turn past half its request timeout; nothing of it was handled')
    }
    const seed = (await (await fetch(`${origin}/v1/categories`, { headers: auth('partner') })).json()) as unknown[]
    const listed = (await (await fetch(`${origin}/v1/categories`, { headers: auth('crowd') })).json()) as { name: string }[]
    expect(listed.length - seed.length).toBe(created.length)
  })

  it('drops a keyless body as it arrives and answers 401 once it stops, rather than holding it to the request timeout', async () => {
    const { origin, fetch } = await startSandbox({ apiKeys: ['partner'], requestTimeoutMs: 20_000 })
    const socket = await openSocket(origin)
    const answer = collect(socket, 10_000)
    // 1 MiB declared, all but its last byte sent: held whole (and then 408 at 20 s) before.
    socket.write(`POST /v1/categories HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${1024 * 1024}\r\n\r\n`)
    socket.write(Buffer.alloc(1024 * 1024 - 1, 0x20))
    const { status, text } = await answer
    expect(status).toBe(401)
    expect(text).toContain('"code":"missing_api_key"')
    // A partner is served as ever.
    expect((await fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: JSON.stringify({ name: 'kept' }) })).status).toBe(201)
  })
})
