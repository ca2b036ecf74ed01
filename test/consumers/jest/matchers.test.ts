// A Jest user's journal assertions: the one registration line, then expect(petstore) matchers
// whose failure messages list what the journal received.
import 'petstore-sandbox/jest'
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)
const auth = { authorization: 'Bearer t0ken', 'content-type': 'application/json' }
const create = (name: string) => fetch('https://api.shop.test/v1/categories', { method: 'POST', headers: auth, body: JSON.stringify({ name }) })

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset()
})
afterAll(() => server.close())

/** The message a user reads when the assertion fails (colours left out). */
function failureOf(assertion: () => void): string {
  try {
    assertion()
  } catch (error) {
    // eslint-disable-next-line no-control-regex
    return (error as Error).message.replace(/\u001b\[\d+m/g, '')
  }
  throw new Error('expected the assertion to fail')
}

test('toHaveReceived matches a filter and a deep-partial body with Jest asymmetric matchers, .not included', async () => {
  await create('Ferrets')
  expect(petstore).toHaveReceived({ operation: 'createCategory', status: 201, body: { name: 'Ferrets' } })
  expect(petstore).toHaveReceived({ body: expect.objectContaining({ name: expect.stringMatching(/^Fer/) }) })
  expect(petstore).not.toHaveReceived({ operation: 'listCategories' })
  expect(petstore).toHaveReceivedTimes(1, { method: 'POST' })
})

test('a failure lists what the journal received, closest first', async () => {
  await fetch('https://api.shop.test/v1/categories', { headers: auth })
  await create('')
  expect(failureOf(() => expect(petstore).toHaveReceived({ operation: 'createCategory', body: { name: expect.stringContaining('Ferr') } }))).toBe(
    [
      'expect(petstore).toHaveReceived(match)',
      '',
      'Expected: a request matching { operation: "createCategory", body: {"name": StringContaining "Ferr"} }',
      'Received, closest first:',
      '       1: POST /v1/categories (createCategory) → 400, body {"name": ""} (differs in body)',
      '       2: GET /v1/categories (listCategories) → 200 (differs in operation, body)',
      '',
      'Number of matching requests: 0 of 2',
    ].join('\n'),
  )
  expect(failureOf(() => expect(petstore).toHaveReceivedTimes(2, { method: 'GET' }))).toContain('Number of matching requests: 1 of 2')
})

test('a filter that can never match throws rather than passing .not', () => {
  expect(() => expect(petstore).not.toHaveReceived({ path: '/categories' })).toThrow(/^Invalid requests filter path: expected the full URL path of an operation, base path included: \/v1\/categories/)
})

test('requests.waitFor() resolves with a request still to come', async () => {
  const waiting = petstore.requests.waitFor({ operation: 'createCategory' }, { timeout: 2000 })
  void create('Owls')
  expect((await waiting).request.body).toEqual({ name: 'Owls' })
})
