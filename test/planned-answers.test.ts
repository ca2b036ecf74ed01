import { describe, expect, it } from 'vitest'
import { PetstoreError, type AnswerPlan, type ApiError, type Category } from '../src/index.js'
import { call, petstoreHarness } from './support/petstore-harness.js'

const harness = petstoreHarness()

describe('petstore.answers (planned answers, in-process)', () => {
  it('answers the next two listCategories 401, then the list again', async () => {
    const petstore = await harness.use()
    petstore.answers.next({ operation: 'listCategories', status: 401, times: 2 })
    const first = await call<ApiError>('/categories')
    const second = await call<ApiError>('/categories')
    const third = await call<Category[]>('/categories')
    expect([first.status, second.status, third.status]).toEqual([401, 401, 200])
    expect(first.body).toEqual({ code: 'invalid_api_key', status: 401, message: 'Invalid API key: simulated (planned answer)' })
    expect(first.headers.get('www-authenticate')).toContain('Bearer')
    expect(third.body).toHaveLength(5)
    expect(petstore.answers.pending()).toEqual([])
  })

  it('answers a planned 500 on createCategory without storing the category', async () => {
    const petstore = await harness.use()
    petstore.answers.next({ operation: 'createCategory', status: 500 })
    const answer = await call<ApiError>('/categories', { body: { name: 'Ferret' } })
    expect(answer.status).toBe(500)
    expect(answer.body.code).toBe('internal_error')
    expect(answer.body.message).toContain('(planned answer)')
    expect((await petstore.categories.list()).map((category) => category.name)).not.toContain('Ferret')
  })

  it('answers the code asked for among those of the status', async () => {
    const petstore = await harness.use()
    petstore.answers.next({ operation: 'listCategories', status: 401, code: 'missing_api_key' })
    const answer = await call<ApiError>('/categories')
    expect(answer.body.code).toBe('missing_api_key')
  })

  it('drops the connection for a network answer (fetch rejects) and journals status 0', async () => {
    const petstore = await harness.use()
    petstore.answers.next({ operation: 'createCategory', network: true })
    await expect(call('/categories', { body: { name: 'Ferret' } })).rejects.toThrow(TypeError)
    expect(petstore.requests.all({ operation: 'createCategory' }).map((entry) => entry.response.status)).toEqual([0])
    expect((await petstore.categories.list()).map((category) => category.name)).not.toContain('Ferret')
  })

  it('answers normally after a planned delay, while other operations answer at once', async () => {
    const petstore = await harness.use()
    petstore.answers.next({ operation: 'listCategories', delayMs: 300 })
    let settled = false
    const slow = call<Category[]>('/categories').finally(() => (settled = true))
    const created = await call<Category>('/categories', { body: { name: 'Ferret' } })
    expect(created.status).toBe(201)
    expect(settled).toBe(false)
    expect((await slow).status).toBe(200)
    expect(petstore.requests.all({ operation: 'listCategories' })[0]!.durationMs).toBeGreaterThanOrEqual(290)
  })

  it('keeps plans of one operation first in, first out, and apart from the others', async () => {
    const petstore = await harness.use()
    petstore.answers.next({ operation: 'createCategory', status: 500 })
    petstore.answers.next({ operation: 'listCategories', status: 503 })
    petstore.answers.next({ operation: 'createCategory', status: 400 })
    expect((await call('/pets/1')).status).toBe(200)
    expect((await call('/categories', { body: { name: 'a' } })).status).toBe(500)
    expect(petstore.answers.pending()).toEqual([
      { operation: 'listCategories', status: 503, code: 'service_unavailable', times: 1 },
      { operation: 'createCategory', status: 400, code: 'invalid_body', times: 1 },
    ])
    expect((await call('/categories', { body: { name: 'a' } })).status).toBe(400)
    expect((await call('/categories')).status).toBe(503)
  })

  it('comes before Prefer and faults, and is taken only by requests with an accepted key', async () => {
    const petstore = await harness.use({ scenario: 'flaky', faults: { rate: 1, outcomes: ['503'] } })
    petstore.answers.next({ operation: 'listCategories', status: 200 })
    expect((await call('/categories', { auth: 'Bearer wrong' })).status).toBe(401)
    expect((await call('/categories', { headers: { prefer: 'code=500' } })).status).toBe(200)
    expect((await call('/categories')).status).toBe(503)
  })

  it('is dropped by reset() and by answers.clear()', async () => {
    const petstore = await harness.use()
    petstore.answers.next({ operation: 'listCategories', status: 500 })
    await petstore.reset()
    expect(petstore.answers.pending()).toEqual([])
    expect((await call('/categories')).status).toBe(200)
    await petstore.useScenario('empty')
    petstore.answers.next({ operation: 'listCategories', status: 500 })
    await petstore.reset()
    expect(petstore.answers.pending()).toEqual([])
    petstore.answers.next({ operation: 'listCategories', status: 500 })
    petstore.answers.clear()
    expect((await call('/categories')).status).toBe(200)
  })

  it.each<{ name: string; plan: unknown; message: string }>([
    { name: 'an unknown operation', plan: { operation: 'deleteCategory', status: 500 }, message: 'operation must be an operation name (listCategories, createCategory, getPetById, listOrders), got "deleteCategory"' },
    { name: 'a status the operation cannot answer', plan: { operation: 'listCategories', status: 404 }, message: 'status 404 is not an outcome of GET /categories (listCategories); use one of 200, 401, 500, 503' },
    { name: 'times 0', plan: { operation: 'listCategories', status: 500, times: 0 }, message: 'times must be a whole number from 1 to 1000, got 0' },
    { name: 'times not a whole number', plan: { operation: 'listCategories', status: 500, times: 1.5 }, message: 'times must be a whole number from 1 to 1000, got 1.5' },
    { name: 'an unknown field', plan: { operation: 'listCategories', status: 500, count: 2 }, message: '"count" is not a field of a planned answer; fields: operation, status, code, network, delayMs, times' },
    { name: 'network with a status', plan: { operation: 'listCategories', status: 500, network: true }, message: 'network drops the connection: it cannot go with status or code' },
    { name: 'a delay beyond the longest', plan: { operation: 'listCategories', delayMs: 60_001 }, message: 'delayMs must be a whole number of milliseconds from 0 to 60000, got 60001' },
    { name: 'a code of another status', plan: { operation: 'listCategories', status: 500, code: 'missing_api_key' }, message: 'code "missing_api_key" is a 401, not a 500; codes of 500: internal_error' },
    { name: 'a code the operation never answers', plan: { operation: 'listCategories', code: 'gone' }, message: 'code "gone" is not an error code listCategories answers; use one of invalid_api_key, missing_api_key, internal_error, service_unavailable, storage_unavailable, write_outcome_unknown, tenant_capacity, over_capacity' },
    { name: 'a status given as a string (a trial user sent "401")', plan: { operation: 'listCategories', status: '401' }, message: 'status must be an HTTP status as a number (401, not "401"); listCategories answers 200, 401, 500, 503' },
    { name: 'no answer at all', plan: { operation: 'listCategories' }, message: 'a planned answer needs status, code, network or delayMs (what should the answer be?)' },
    { name: 'an operation nested 300,000 deep (attack16 J1: a RangeError, 500 over HTTP)', plan: { operation: JSON.parse(`${'['.repeat(300_000)}${']'.repeat(300_000)}`) as unknown }, message: 'operation must be an operation name (listCategories, createCategory, getPetById, listOrders), got an array nested too deeply to show' },
  ])('refuses $name with invalid_option naming what is allowed', async ({ plan, message }) => {
    const petstore = await harness.use()
    let thrown: unknown
    try {
      petstore.answers.next(plan as AnswerPlan)
    } catch (error) {
      thrown = error
    }
    expect(thrown).toBeInstanceOf(PetstoreError)
    expect(thrown).toMatchObject({ code: 'invalid_option', message: `Cannot plan answer: ${message}` })
    expect(petstore.answers.pending()).toEqual([])
  })

  it('refuses a plan past the most a petstore holds, and takes one again once room is made', async () => {
    const petstore = await harness.use()
    for (let i = 0; i < 100; i++) petstore.answers.next({ operation: 'listOrders', status: 500 })
    expect(() => petstore.answers.next({ operation: 'listOrders', status: 500 })).toThrow(/100 planned answers pending.*petstore\.answers\.clear\(\)/)
    await call('/store/orders')
    expect(() => petstore.answers.next({ operation: 'listOrders', status: 503 })).not.toThrow()
  })

  it('types operation ids: an unknown one does not compile', () => {
    // @ts-expect-error 'deleteCategory' is not an operation of the contract
    const plan: AnswerPlan = { operation: 'deleteCategory', status: 500 }
    expect(plan.operation).toBe('deleteCategory')
  })
})
