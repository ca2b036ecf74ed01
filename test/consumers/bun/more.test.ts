// Beyond the excerpt in docs/recipes.md: scenarios, the store, the contract's errors, and isolation.
import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test'
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { addCategory, categoryNames } from './categories'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset()
})
afterAll(() => server.close())

test('lists the default scenario’s categories', async () => {
  expect(await categoryNames()).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})

test('shows an empty shop on the empty scenario, arranged through the store', async () => {
  await petstore.useScenario('empty')
  expect(await categoryNames()).toEqual([])
  await petstore.categories.create({ name: 'Ferret' })
  expect(await categoryNames()).toEqual(['Ferret'])
})

test('is back on the default scenario in the next test, with an empty journal', async () => {
  expect(petstore.requests.all()).toHaveLength(0)
  expect(await categoryNames()).toHaveLength(5)
})

test('rejects a nameless category with the contract’s 400 message', async () => {
  await expect(addCategory('')).rejects.toThrow(/name/)
  expect(petstore.requests.all({ method: 'POST' })[0]?.response.status).toBe(400)
})
