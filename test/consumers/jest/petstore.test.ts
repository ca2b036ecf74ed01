// A Jest user's test: their msw, their Jest (jsdom), the packed petstore-sandbox through require().
import { setupServer } from 'msw/node'
import { createPetstore, PetstoreError, type Category } from 'petstore-sandbox'
import { setupPetstoreServer } from 'petstore-sandbox/node'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)
const auth = { authorization: 'Bearer t0ken', 'content-type': 'application/json' }

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset()
})
afterAll(() => server.close())

test('lists the default scenario and creates a category (201), in jsdom', async () => {
  expect(typeof document).toBe('object')
  const listed = await fetch('https://api.shop.test/v1/categories', { headers: auth })
  expect(listed.status).toBe(200)
  expect(((await listed.json()) as Category[]).map((category) => category.name)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])

  const created = await fetch('https://api.shop.test/v1/categories', { method: 'POST', headers: auth, body: JSON.stringify({ name: 'Ferret' }) })
  expect(created.status).toBe(201)
  expect(await created.json()).toEqual({ id: 6, name: 'Ferret' })
})

test('answers 400 with the Error body and 401 without a key', async () => {
  const invalid = await fetch('https://api.shop.test/v1/categories', { method: 'POST', headers: auth, body: '{}' })
  expect(invalid.status).toBe(400)
  expect(await invalid.json()).toMatchObject({ status: 400, code: expect.any(String), message: expect.any(String) })
  expect((await fetch('https://api.shop.test/v1/categories')).status).toBe(401)
})

test('switches to the empty scenario in one test…', async () => {
  await petstore.useScenario('empty')
  expect(await petstore.categories.list()).toEqual([])
})

test('…and the next test is back on the scenario it was created with', async () => {
  expect(await petstore.categories.list()).toHaveLength(5)
})

test('throws PetstoreError on misuse, from both entries', () => {
  expect(() => createPetstore({ scenario: 'nope' })).toThrow(PetstoreError)
  expect(() => setupPetstoreServer({ scenario: 'nope' })).toThrow(PetstoreError)
})
