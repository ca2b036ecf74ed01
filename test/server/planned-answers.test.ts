/** Planned answers over the admin API (`/__sandbox/answers`) and `POST /__sandbox/reset` with a scenario, on every store. */
import { describe, expect, it } from 'vitest'
import { tenantId } from '../../src/server.js'
import { AnswerBook, MAX_BOOK_PLANS, MAX_PLANNED_ANSWERS, PlanBookFullError, type PendingAnswer } from '../../src/core/planned-answers.js'
import { expectErrorBody } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox, useStore, type RunningSandbox } from '../support/sandbox-server.js'
import { STORES } from '../support/stores.js'
import { FULL_TESTS, REPLAYS } from '../support/test-scale.js'

const ADMIN = 'admin-token-for-tests'

/** POSTs a plan (any JSON text) for `key`'s tenant. */
const plan = (sandbox: RunningSandbox, body: unknown, key?: string) =>
  sandbox.fetch('/__sandbox/answers', { method: 'POST', headers: auth(key, true), body: typeof body === 'string' ? body : JSON.stringify(body) })

const statusOf = async (sandbox: RunningSandbox, path: string, key?: string, init: RequestInit = {}) =>
  (await sandbox.fetch(path, { ...init, headers: { ...auth(key, init.body !== undefined), ...(init.headers as Record<string, string>) } })).status

describe.each(STORES)('planned answers over the admin API ($name store)', (kind) => {
  useStore(kind)

  it('answers the next two GET /categories 401 with the contract’s Error body, then the list; the journal shows each', async () => {
    const sandbox = await startSandbox()
    const planned = await plan(sandbox, { operation: 'listCategories', status: 401, times: 2 })
    expect(planned.status).toBe(201)
    expect(await jsonOf(planned)).toEqual({ operation: 'listCategories', status: 401, code: 'invalid_api_key', times: 2 })
    expect(await jsonOf(await sandbox.fetch('/__sandbox/answers', { headers: auth() }))).toEqual([{ operation: 'listCategories', status: 401, code: 'invalid_api_key', times: 2 }])
    const first = await sandbox.fetch('/v1/categories', { headers: auth() })
    expect(first.status).toBe(401)
    expect(await jsonOf(first)).toEqual({ code: 'invalid_api_key', status: 401, message: 'Invalid API key: simulated (planned answer)' })
    expect(await statusOf(sandbox, '/v1/categories')).toBe(401)
    expect(await statusOf(sandbox, '/v1/categories')).toBe(200)
    expect(await jsonOf(await sandbox.fetch('/__sandbox/answers', { headers: auth() }))).toEqual([])
    const journal = (await jsonOf(await sandbox.fetch('/__sandbox/requests?operation=listCategories', { headers: auth() }))) as { response: { status: number } }[]
    expect(journal.map((entry) => entry.response.status)).toEqual([401, 401, 200])
  })

  it('answers a planned 500 on POST /categories without storing it, and leaves other operations alone', async () => {
    const sandbox = await startSandbox()
    await plan(sandbox, { operation: 'createCategory', status: 500 })
    expect(await statusOf(sandbox, '/v1/categories')).toBe(200)
    expect(await statusOf(sandbox, '/v1/categories', undefined, { method: 'POST', body: '{"name":"Ferret"}' })).toBe(500)
    const created = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"Ferret"}' })
    expect(await jsonOf(created)).toEqual({ id: 6, name: 'Ferret' })
  })

  it('drops the connection for a network answer', async () => {
    const sandbox = await startSandbox()
    await plan(sandbox, { operation: 'listOrders', network: true })
    await expect(fetch(`${sandbox.origin}/v1/store/orders`, { headers: auth() })).rejects.toThrow(TypeError)
    expect(await statusOf(sandbox, '/v1/store/orders')).toBe(200)
  })

  it('keeps plans per tenant: another key’s requests answer as usual, and the admin token plans for a tenant it names', async () => {
    const sandbox = await startSandbox({ apiKeys: ['k1', 'k2'], adminToken: ADMIN })
    await plan(sandbox, { operation: 'listCategories', status: 503 }, 'k1')
    expect(await statusOf(sandbox, '/v1/categories', 'k2')).toBe(200)
    const byAdmin = await sandbox.fetch(`/__sandbox/answers?tenant=${tenantId('k2')}`, { method: 'POST', headers: auth(ADMIN, true), body: '{"operation":"getPetById","status":410}' })
    expect(byAdmin.status).toBe(201)
    expect(await statusOf(sandbox, '/v1/pets/1', 'k2')).toBe(410)
    expect(await statusOf(sandbox, '/v1/categories', 'k1')).toBe(503)
  })

  it('keeps a tenant’s plans when it leaves memory to make room for another key', async () => {
    const sandbox = await startSandbox({ apiKeys: ['k1', 'k2'], maxTenants: 1 })
    await plan(sandbox, { operation: 'listCategories', status: 503 }, 'k1')
    expect(await statusOf(sandbox, '/v1/categories', 'k2')).toBe(200)
    expect(sandbox.sandbox.tenants.size).toBe(1)
    expect(await statusOf(sandbox, '/v1/categories', 'k1')).toBe(503)
    expect(await statusOf(sandbox, '/v1/categories', 'k1')).toBe(200)
  })

  it.runIf(REPLAYS)('never locks a partner out of its writes, however many plans throw-away keys leave (attack 3, G1)', async () => {
    const sandbox = await startSandbox({ anyKey: true, memoryBudgetBytes: 64 * 1024 })
    const junk = { operation: 'listOrders', status: 500, times: 1000 }
    for (let key = 0; key < 4; key++) {
      for (let i = 0; i < 100; i++) await (await plan(sandbox, junk, `junk-${key}`)).arrayBuffer()
    }
    const created = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('partner', true), body: '{"name":"Ferret"}' })
    expect(created.status).toBe(201)
    const switched = await sandbox.fetch('/__sandbox/scenario', { method: 'PUT', headers: auth('partner', true), body: '{"name":"empty"}' })
    expect(switched.status).toBe(200)
    expect(await plan(sandbox, { operation: 'listCategories', status: 503 }, 'partner')).toHaveProperty('status', 201)
    expect(await statusOf(sandbox, '/v1/categories', 'partner')).toBe(503)
  })

  // The whole book (10,000 plans) over HTTP: the full run only.
  it.runIf(FULL_TESTS)('keeps a partner\'s planned answers through other keys\' flood of plans; the flood past its share gets 503 plan_book_full (attack 4, H6)', async () => {
    const sandbox = await startSandbox({ anyKey: true })
    expect((await plan(sandbox, { operation: 'listOrders', status: 500, times: 100 }, 'partner')).status).toBe(201)
    expect(await statusOf(sandbox, '/v1/store/orders', 'partner')).toBe(500)
    const junk = { operation: 'listOrders', status: 500, times: 1000 }
    const keys = Array.from({ length: MAX_BOOK_PLANS / MAX_PLANNED_ANSWERS + 20 }, (_, i) => `flood-${i}`)
    const refusals: Response[] = []
    for (let i = 0; i < keys.length; i += 10) {
      await Promise.all(keys.slice(i, i + 10).map(async (key) => {
        for (let n = 0; n < MAX_PLANNED_ANSWERS; n++) {
          const response = await plan(sandbox, junk, key)
          if (response.status === 201) await response.arrayBuffer()
          else refusals.push(response)
        }
      }))
    }
    expect(refusals.length).toBeGreaterThan(0)
    expect(refusals[0]!.headers.get('retry-after')).toBe('1')
    expectErrorBody(await jsonOf(refusals[0]!), 503, 'plan_book_full')
    expect(await jsonOf(await sandbox.fetch('/__sandbox/answers', { headers: auth('partner') }))).toEqual([{ operation: 'listOrders', status: 500, code: 'internal_error', times: 99 }])
    expect(await statusOf(sandbox, '/v1/store/orders', 'partner')).toBe(500)
    // 10,000 plans over HTTP: 10-23 s alone, past 60 s beside a loaded full run.
  }, 180_000)

  // Redis keeps its book in Redis: test/redis/planned-answers.test.ts has its own.
  it.runIf(kind.name !== 'redis')('answers 503 plan_book_full with Retry-After to a plan past the planner’s share of a full book, takes room from a holder for a planner below it, and keeps the partner’s plan', async () => {
    const sandbox = await startSandbox({ anyKey: true })
    expect((await plan(sandbox, { operation: 'listOrders', status: 500, times: 100 }, 'partner')).status).toBe(201)
    // The book filled in the process, as plans over HTTP would fill it (10,000 of them are the full run's).
    const fill = async (key: string, count: number) => {
      const tenant = (await sandbox.sandbox.tenants.resolve(key))!
      for (let i = 0; i < count; i++) await tenant.answers.plan({ operation: 'listOrders', status: 500, times: 1000 })
    }
    for (let i = 0; i < MAX_BOOK_PLANS / MAX_PLANNED_ANSWERS - 1; i++) await fill(`earlier-${i}`, MAX_PLANNED_ANSWERS)
    await fill('flood', MAX_PLANNED_ANSWERS - 2)
    expect((await plan(sandbox, { operation: 'listOrders', status: 500 }, 'flood')).status).toBe(201)
    // Full: every tenant holds at most what the flood would after its next plan, 100.
    const refused = await plan(sandbox, { operation: 'listOrders', status: 500 }, 'flood')
    expect(refused.status).toBe(503)
    expect(refused.headers.get('retry-after')).toBe('1')
    const body = await jsonOf(refused)
    expectErrorBody(body, 503, 'plan_book_full')
    expect((body as { message: string }).message).toContain(`holds ${MAX_BOOK_PLANS} planned answers over all tenants`)
    // A key holding fewer than the holders takes the newest plan of one of them.
    expect((await plan(sandbox, { operation: 'listCategories', status: 503 }, 'newcomer')).status).toBe(201)
    expect(await statusOf(sandbox, '/v1/categories', 'newcomer')).toBe(503)
    expect(await jsonOf(await sandbox.fetch('/__sandbox/answers', { headers: auth('partner') }))).toEqual([{ operation: 'listOrders', status: 500, code: 'internal_error', times: 100 }])
    expect(await statusOf(sandbox, '/v1/store/orders', 'partner')).toBe(500)
  })

  it('drops pending plans on DELETE /__sandbox/answers and on POST /__sandbox/reset', async () => {
    const sandbox = await startSandbox()
    await plan(sandbox, { operation: 'listCategories', status: 500 })
    expect((await sandbox.fetch('/__sandbox/answers', { method: 'DELETE', headers: auth() })).status).toBe(204)
    expect(await statusOf(sandbox, '/v1/categories')).toBe(200)
    await plan(sandbox, { operation: 'listCategories', status: 500 })
    expect((await sandbox.fetch('/__sandbox/reset', { method: 'POST', headers: auth() })).status).toBe(200)
    expect(await jsonOf(await sandbox.fetch('/__sandbox/answers', { headers: auth() }))).toEqual([])
    expect(await statusOf(sandbox, '/v1/categories')).toBe(200)
  })

  it.each([
    { name: 'an unknown operation', body: '{"operation":"deleteCategory","status":500}', code: 'invalid_field', says: 'operation must be an operation name (listCategories, createCategory, getPetById, listOrders)' },
    { name: 'a status the operation cannot answer', body: '{"operation":"listCategories","status":404}', code: 'invalid_field', says: 'use one of 200, 401, 500, 503' },
    { name: 'times 0', body: '{"operation":"listCategories","status":500,"times":0}', code: 'invalid_field', says: 'times must be a whole number from 1 to 1000' },
    { name: 'an unknown field', body: '{"operation":"listCategories","status":500,"tmes":2}', code: 'invalid_field', says: '"tmes" is not a field of a planned answer' },
    { name: 'network with a status', body: '{"operation":"listCategories","status":500,"network":true}', code: 'invalid_field', says: 'cannot go with status or code' },
    { name: 'a delay beyond the request timeout', body: '{"operation":"listCategories","delayMs":30001}', code: 'invalid_field', says: 'delayMs must be a whole number of milliseconds from 0 to ' },
    { name: 'malformed JSON', body: '{"operation":', code: 'invalid_json', says: 'Request body is not valid JSON' },
    { name: 'an array', body: '[{"operation":"listCategories","status":500}]', code: 'invalid_body', says: 'The body must be a JSON object, got an array' },
  ])('refuses $name with 400 $code saying what is allowed', async ({ body, code, says }) => {
    const sandbox = await startSandbox()
    const response = await plan(sandbox, body)
    expect(response.status).toBe(400)
    const error = await jsonOf(response)
    expectErrorBody(error, 400, code)
    expect((error as { message: string }).message).toContain(says)
    expect(await jsonOf(await sandbox.fetch('/__sandbox/answers', { headers: auth() }))).toEqual([])
  })

  it('refuses a plan past the most a tenant may hold with 409 answer_limit', async () => {
    const sandbox = await startSandbox()
    for (let i = 0; i < 100; i++) expect((await plan(sandbox, { operation: 'listOrders', status: 500 })).status).toBe(201)
    const refused = await plan(sandbox, { operation: 'listOrders', status: 500 })
    expect(refused.status).toBe(409)
    const error = (await jsonOf(refused)) as { message: string }
    expectErrorBody(error, 409, 'answer_limit')
    expect(error.message).toContain('DELETE /__sandbox/answers')
  })
})

describe.each(STORES)('POST /__sandbox/reset onto a scenario ($name store)', (kind) => {
  useStore(kind)

  const reset = (sandbox: RunningSandbox, body?: string) =>
    sandbox.fetch('/__sandbox/reset', { method: 'POST', headers: body === undefined ? auth() : auth(undefined, true), ...(body === undefined ? {} : { body }) })

  it('resets onto a named scenario in one call: its seed, an empty journal, no plans', async () => {
    const sandbox = await startSandbox()
    await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"x"}' })
    await plan(sandbox, { operation: 'listCategories', status: 500 })
    const response = await reset(sandbox, '{"scenario":"empty"}')
    expect(response.status).toBe(200)
    expect(await jsonOf(response)).toEqual({ scenario: expect.objectContaining({ name: 'empty' }), categories: 0 })
    expect(await jsonOf(await sandbox.fetch('/__sandbox/requests', { headers: auth() }))).toEqual([])
    expect(await jsonOf(await sandbox.fetch('/v1/categories', { headers: auth() }))).toEqual([])
  })

  it('resets back to the scenario the sandbox started with on {"initial": true}; no body keeps the scenario in use', async () => {
    const sandbox = await startSandbox()
    await reset(sandbox, '{"scenario":"empty"}')
    expect(await jsonOf(await reset(sandbox))).toEqual({ scenario: expect.objectContaining({ name: 'empty' }), categories: 0 })
    expect(await jsonOf(await reset(sandbox, '{}'))).toEqual({ scenario: expect.objectContaining({ name: 'empty' }), categories: 0 })
    expect(await jsonOf(await reset(sandbox, '{"initial":true}'))).toEqual({ scenario: expect.objectContaining({ name: 'default' }), categories: 5 })
  })

  it.each([
    { name: 'malformed JSON', body: '{"scenario":', status: 400, code: 'invalid_json', says: 'not valid JSON' },
    { name: 'an unknown scenario', body: '{"scenario":"nope"}', status: 404, code: 'unknown_scenario', says: 'Unknown scenario "nope"; known: ' },
    { name: 'an unknown field', body: '{"scenarios":"empty"}', status: 400, code: 'invalid_field', says: '"scenarios" is not a field of the reset body; fields: scenario, initial' },
    { name: 'scenario and initial together', body: '{"scenario":"empty","initial":true}', status: 400, code: 'invalid_field', says: 'give scenario or initial, not both' },
    { name: 'initial false', body: '{"initial":false}', status: 400, code: 'invalid_field', says: 'initial must be true' },
  ])('refuses $name with $status $code and changes nothing', async ({ body, status, code, says }) => {
    const sandbox = await startSandbox()
    await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(undefined, true), body: '{"name":"x"}' })
    const response = await reset(sandbox, body)
    expect(response.status).toBe(status)
    const error = await jsonOf(response)
    expectErrorBody(error, status, code)
    expect((error as { message: string }).message).toContain(says)
    expect((error as { message: string }).message).not.toContain('(root)')
    expect(await jsonOf(await sandbox.fetch('/v1/categories', { headers: auth() }))).toHaveLength(6)
  })

  it('refuses a scenario the operator did not allow tenants to switch to', async () => {
    const sandbox = await startSandbox({ scenarioAllow: ['empty'] })
    const response = await reset(sandbox, '{"scenario":"large-catalog"}')
    expectErrorBody(await jsonOf(response), 403, 'scenario_not_allowed')
  })
})

describe('the plan book (planned answers in the server process: memory and SQLite)', () => {
  const junk: PendingAnswer = { operation: 'listOrders', status: 500, code: 'internal_error', times: 1000 }
  const fill = async (book: AnswerBook, id: string, plans = MAX_PLANNED_ANSWERS) => {
    for (let i = 0; i < plans; i++) await book.of(id).plan(junk)
  }

  it('holds at most its cap of plans over all tenants, a new tenant\'s plan taking the newest of one holding the most', async () => {
    const book = new AnswerBook()
    const tenants = MAX_BOOK_PLANS / MAX_PLANNED_ANSWERS
    for (let key = 0; key < tenants; key++) await fill(book, `junk-${key}`)
    expect(book.held).toBe(MAX_BOOK_PLANS)
    await book.of('new').plan(junk)
    expect(book.held).toBe(MAX_BOOK_PLANS)
    expect(await book.of('junk-0').pending()).toHaveLength(MAX_PLANNED_ANSWERS - 1)
    expect(await book.of('junk-1').pending()).toHaveLength(MAX_PLANNED_ANSWERS)
    expect(await book.of('new').pending()).toHaveLength(1)
  })

  it('keeps a partner\'s plans through a flood of other keys\' plans (attack 4 H6): its next answer is still the planned one', async () => {
    const book = new AnswerBook({ maxPlans: 200 })
    await book.of('partner').plan({ operation: 'listOrders', status: 500, code: 'internal_error', times: 100 })
    expect(await book.of('partner').take('listOrders')).toEqual({ operation: 'listOrders', status: 500, code: 'internal_error' })
    let refused = 0
    for (let key = 0; key < 400; key++) {
      for (let plan = 0; plan < 3; plan++) {
        try {
          await book.of(`flood-${key}`).plan(junk)
        } catch (error) {
          expect(error).toBeInstanceOf(PlanBookFullError)
          refused++
        }
      }
    }
    expect(refused).toBeGreaterThan(0)
    expect(book.held).toBe(200)
    expect(await book.of('partner').pending()).toEqual([{ operation: 'listOrders', status: 500, code: 'internal_error', times: 99 }])
    expect(await book.of('partner').take('listOrders')).toEqual({ operation: 'listOrders', status: 500, code: 'internal_error' })
  })

  it('makes room from the tenant holding the most, down to the planner\'s share, and never refuses a partner below it', async () => {
    const book = new AnswerBook({ maxPlans: 200 })
    await fill(book, 'hog')
    await fill(book, 'other', 90)
    await fill(book, 'partner', 10)
    // Full: each new plan of the partner takes the newest of the hog's (holding the most), not the other's.
    await fill(book, 'partner', 20)
    expect(book.held).toBe(200)
    // Down to 90 the hog gives way alone; then the two holding the most take turns, the one that came to that many first giving way first.
    expect(await book.of('hog').pending()).toHaveLength(85)
    expect(await book.of('other').pending()).toHaveLength(85)
    // The hog, already holding the most, is refused: nobody holds more than it would.
    expect(() => book.of('hog').plan(junk)).toThrow('the sandbox holds the most planned answers allowed over all tenants (200), and no tenant holds more than this one would')
    // The partner plans on until it holds as many as the others (its share of the cap), and is refused then.
    let planned = 30
    while (planned < MAX_PLANNED_ANSWERS) {
      try {
        await book.of('partner').plan(junk)
        planned++
      } catch (error) {
        expect(error).toBeInstanceOf(PlanBookFullError)
        break
      }
    }
    expect(planned).toBe(66)
    expect((await book.of('hog').pending()).length + (await book.of('other').pending()).length).toBe(134)
    expect(await book.of('other').pending()).toHaveLength(67)
  })
})
