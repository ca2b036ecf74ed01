import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import '../src/vitest.js'
import { createPetstore, PetstoreError } from '../src/index.js'
import { call, petstoreHarness } from './support/petstore-harness.js'

const harness = petstoreHarness()
const GUIDE = readFileSync(new URL('../docs/library.md', import.meta.url), 'utf8')

/** The message a user reads when the assertion fails (colours left out). */
function failureOf(assertion: () => void): string {
  try {
    assertion()
  } catch (error) {
    // eslint-disable-next-line no-control-regex -- the runner's colour codes
    return (error as Error).message.replace(/\u001b\[\d+m/g, '')
  }
  throw new Error('expected the assertion to fail')
}

describe('expect(petstore).toHaveReceived()', () => {
  it('passes for a request matching the filter and a deep-partial body, asymmetric matchers included', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Ferrets', description: 'Small and curious' } })
    expect(petstore).toHaveReceived({ operation: 'createCategory', status: 201, body: { name: 'Ferrets' } })
    expect(petstore).toHaveReceived({ method: 'post', path: '/v1/categories', body: expect.objectContaining({ description: expect.stringContaining('curious') }) })
    expect(petstore).toHaveReceived({ headers: { 'Content-Type': 'application/json' } })
    expect(petstore).toHaveReceived()
    expect(petstore).not.toHaveReceived({ operation: 'listCategories' })
  })

  it('lists what the journal did receive, closest first, when no request matches', async () => {
    const petstore = await harness.use()
    await call('/categories')
    await call('/categories', { body: { name: '' } })
    await call('/pets/1')
    const message = failureOf(() => expect(petstore).toHaveReceived({ operation: 'createCategory', status: 201, body: { name: 'Ferrets' } }))
    // The library guide shows this very message.
    expect(GUIDE).toContain(`\`\`\`text\n${message}\n\`\`\``)
    expect(message).toBe(
      [
        'expect(petstore).toHaveReceived(match)',
        '',
        'Expected: a request matching { operation: "createCategory", status: 201, body: {"name": "Ferrets"} }',
        'Received, closest first:',
        '       1: POST /v1/categories (createCategory) → 400, body {"name": ""} (differs in status, body)',
        '       2: GET /v1/categories (listCategories) → 200 (differs in operation, status, body)',
        '       3: GET /v1/pets/1 (getPetById) → 200 (differs in operation, status, body)',
        '',
        'Number of matching requests: 0 of 3',
      ].join('\n'),
    )
  })

  it('says when a header asked for is one the journal keeps as [redacted] (a trial user matched on authorization)', async () => {
    const petstore = await harness.use()
    await call('/categories')
    const message = failureOf(() => expect(petstore).toHaveReceived({ headers: { authorization: 'Bearer t0ken' } }))
    expect(message).toContain('(differs in headers; the journal keeps authorization as [redacted])')
  })

  it('says the journal is empty when it is', async () => {
    const petstore = await harness.use()
    expect(failureOf(() => expect(petstore).toHaveReceived({ method: 'GET' }))).toBe(
      ['expect(petstore).toHaveReceived(match)', '', 'Expected: a request matching { method: "GET" }', 'Received: no requests', '', 'Number of requests: 0'].join('\n'),
    )
  })

  it('with .not, fails listing the requests that match first', async () => {
    const petstore = await harness.use()
    await call('/categories')
    await call('/categories', { body: { name: 'Owls' } })
    expect(failureOf(() => expect(petstore).not.toHaveReceived({ method: 'POST' }))).toBe(
      [
        'expect(petstore).not.toHaveReceived(match)',
        '',
        'Expected: no request matching { method: "POST" }',
        'Received, closest first:',
        '       1: POST /v1/categories (createCategory) → 201, body {"name": "Owls"} (matches)',
        '       2: GET /v1/categories (listCategories) → 200 (differs in method)',
        '',
        'Number of matching requests: 1 of 2',
      ].join('\n'),
    )
  })

  it('lists ten requests and says how many more there are', async () => {
    const petstore = await harness.use()
    for (let i = 0; i < 12; i++) await call('/categories')
    const message = failureOf(() => expect(petstore).toHaveReceived({ status: 201 }))
    expect(message).toContain('      10: GET /v1/categories (listCategories) → 200 (differs in status)\n          … and 2 more\n')
    expect(message).toContain('Number of matching requests: 0 of 12')
  })

  it.each([
    { name: 'a path no operation has', match: { path: '/categories' }, message: /^Invalid requests filter path: expected the full URL path of an operation/ },
    { name: 'a method no client sends', match: { method: 'FETCH' }, message: /^Invalid requests filter method: expected an HTTP method/ },
    { name: 'an unknown field', match: { bodyy: {} }, message: /^Invalid toHaveReceived\(\) match bodyy: expected a match field: method, path, operation, status, body, headers, query$/ },
    { name: 'a query that is no object', match: { query: 'a=1' }, message: /^Invalid toHaveReceived\(\) match query: expected an object of query parameter names to values$/ },
  ])('throws invalid_option for a match that can never hold: $name', async ({ match, message }) => {
    const petstore = await harness.use()
    expect(() => expect(petstore).toHaveReceived(match as never)).toThrow(message)
    expect(() => expect(petstore).not.toHaveReceived(match as never)).toThrow(PetstoreError)
  })

  it('shows asymmetric matchers in the expected match as the runner names them', async () => {
    const petstore = await harness.use()
    await call('/categories', { body: { name: 'Owls' } })
    expect(failureOf(() => expect(petstore).toHaveReceived({ body: { name: expect.stringContaining('Ferr') }, headers: { 'x-trace': expect.any(String) } }))).toContain(
      'Expected: a request matching { body: {"name": StringContaining "Ferr"}, headers: {"x-trace": Any<String>} }\n',
    )
  })

  it('throws when given something other than a petstore', () => {
    expect(() => expect({}).toHaveReceived()).toThrow('toHaveReceived() expects a petstore (createPetstore(), setupPetstoreWorker()), received {}')
  })

  it('matches the query of the URL', async () => {
    const petstore = createPetstore({ baseUrl: 'https://q.test/v1', apiKeys: ['t0ken'] })
    harness.server.resetHandlers(...petstore.handlers)
    await fetch('https://q.test/v1/categories?page=2&tag=a&tag=b', { headers: { authorization: 'Bearer t0ken' } })
    expect(petstore).toHaveReceived({ query: { page: '2', tag: ['a', 'b'] } })
    expect(petstore).not.toHaveReceived({ query: { page: '3' } })
    harness.server.resetHandlers()
  })
})

describe('expect(petstore).toHaveReceivedTimes()', () => {
  it('passes for exactly that many matching requests', async () => {
    const petstore = await harness.use()
    await call('/categories')
    await call('/categories')
    await call('/categories', { body: { name: 'Owls' } })
    expect(petstore).toHaveReceivedTimes(2, { operation: 'listCategories' })
    expect(petstore).toHaveReceivedTimes(3)
    expect(petstore).toHaveReceivedTimes(0, { status: 404 })
    expect(petstore).not.toHaveReceivedTimes(1, { method: 'GET' })
  })

  it('lists the journal, the matching requests first, when the count differs', async () => {
    const petstore = await harness.use()
    await call('/categories')
    await call('/categories', { body: { name: 'Owls' } })
    await call('/categories', { body: { name: 'Owls' } })
    expect(failureOf(() => expect(petstore).toHaveReceivedTimes(1, { operation: 'createCategory', body: { name: 'Owls' } }))).toBe(
      [
        'expect(petstore).toHaveReceivedTimes(times, match)',
        '',
        'Expected: 1 request matching { operation: "createCategory", body: {"name": "Owls"} }',
        'Received, closest first:',
        '       1: POST /v1/categories (createCategory) → 201, body {"name": "Owls"} (matches)',
        '       2: POST /v1/categories (createCategory) → 201, body {"name": "Owls"} (matches)',
        '       3: GET /v1/categories (listCategories) → 200 (differs in operation, body)',
        '',
        'Number of matching requests: 2 of 3',
      ].join('\n'),
    )
    expect(failureOf(() => expect(petstore).not.toHaveReceivedTimes(2, { method: 'POST' }))).toMatch(/^expect\(petstore\)\.not\.toHaveReceivedTimes\(times, match\)\n\nExpected: not 2 requests matching \{ method: "POST" \}\n/)
  })

  it('throws for a count that is not a whole number', async () => {
    const petstore = await harness.use()
    expect(() => expect(petstore).toHaveReceivedTimes(-1)).toThrow('Invalid toHaveReceivedTimes() count: expected a whole number of requests (0, 1, 2, …), received -1')
  })
})
