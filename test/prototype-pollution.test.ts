/** Prototype-pollution payloads through createCategory: nothing outside the request changes. */
import { afterEach, describe, expect, it } from 'vitest'
import type { Category } from '../src/index.js'
import { BASE, call, KEY, petstoreHarness, readConformant } from './support/petstore-harness.js'

const harness = petstoreHarness()
const PROTOTYPE_NAMES = Object.getOwnPropertyNames(Object.prototype).sort()

afterEach(() => {
  expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(PROTOTYPE_NAMES)
  expect(({} as Record<string, unknown>)['polluted']).toBeUndefined()
})

/** Asserts a category is a plain object holding exactly `expected`, nothing inherited or extra. */
function expectClean(category: Category | undefined, expected: Category): void {
  expect(category).toEqual(expected)
  expect(Object.getPrototypeOf(category)).toBe(Object.prototype)
  expect(Object.keys(category!).sort()).toEqual(Object.keys(expected).sort())
  expect('polluted' in category!).toBe(false)
}

describe('createCategory with prototype-pollution payloads', () => {
  it.each([
    { name: '__proto__ holding a field', body: '{"__proto__":{"polluted":1},"name":"x"}' },
    { name: '__proto__ after the name', body: '{"name":"x","__proto__":{"polluted":1,"description":"from proto"}}' },
    { name: 'constructor.prototype', body: '{"constructor":{"prototype":{"polluted":1}},"name":"x"}' },
    { name: 'nested __proto__ in an unknown field', body: '{"name":"x","extra":{"__proto__":{"polluted":1}}}' },
    { name: 'prototype as a field', body: '{"prototype":{"polluted":1},"name":"x"}' },
  ])('stores and echoes a clean category for $name', async ({ body }) => {
    const petstore = await harness.use({ scenario: 'empty' })
    const created = await call<Category>('/categories', { body })
    expect(created.status).toBe(201)
    expectClean(created.body, { id: 1, name: 'x' })
    expectClean((await petstore.categories.list())[0], { id: 1, name: 'x' })
  })

  it('does not take the name from a __proto__ object', async () => {
    const petstore = await harness.use({ scenario: 'empty' })
    const answer = await call<{ code: string }>('/categories', { body: '{"__proto__":{"name":"Dogs"}}' })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe('missing_field')
    expect(await petstore.categories.list()).toEqual([])
  })

  it.each([
    { name: '__proto__', body: '{"__proto__":{"polluted":1},"name":"x"}', field: '"__proto__"' },
    { name: 'constructor', body: '{"constructor":{"prototype":{"polluted":1}},"name":"x"}', field: '"constructor"' },
  ])('refuses $name as an unknown field in strict mode', async ({ body, field }) => {
    const petstore = await harness.use({ scenario: 'empty', strict: true })
    const answer = await call<{ code: string; message: string }>('/categories', { body })
    expect(answer.status).toBe(400)
    expect(answer.body.code).toBe('unknown_field')
    expect(answer.body.message).toContain(field)
    expect(await petstore.categories.list()).toEqual([])
  })

  it('journals the request body as sent without polluting the journal entries', async () => {
    const petstore = await harness.use({ scenario: 'empty' })
    await call('/categories', { body: '{"__proto__":{"polluted":1},"name":"x"}' })
    const body = petstore.requests.all()[0]!.request.body as object
    expect(Object.getPrototypeOf(body)).toBe(Object.prototype)
    expect('polluted' in body).toBe(false)
    expect(JSON.stringify(body)).toBe('{"__proto__":{"polluted":1},"name":"x"}')
  })

  it('journals a header named __proto__ instead of dropping it', async () => {
    const petstore = await harness.use({ scenario: 'empty' })
    // @note A header record would lose the key in `new Headers()` itself; pairs keep it.
    const response = await fetch(`${BASE}/categories`, { headers: [['authorization', `Bearer ${KEY}`], ['__proto__', 'header-value']] })
    await readConformant('GET', '/categories', response)
    const headers = petstore.requests.all()[0]!.request.headers
    expect(Object.getPrototypeOf(headers)).toBe(Object.prototype)
    expect(Object.hasOwn(headers, '__proto__')).toBe(true)
    expect(JSON.stringify(headers)).toContain('"__proto__":"header-value"')
  })
})
