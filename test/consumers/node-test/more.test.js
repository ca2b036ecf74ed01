// Beyond the excerpt in docs/recipes.md: scenarios, the store, the contract's errors, and isolation.
import assert from 'node:assert/strict'
import { after, afterEach, before, test } from 'node:test'
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { addCategory, categoryNames } from './categories.js'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)

before(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset()
})
after(() => server.close())

test('lists the default scenario’s categories', async () => {
  assert.deepEqual(await categoryNames(), ['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})

test('shows an empty shop on the empty scenario, arranged through the store', async () => {
  await petstore.useScenario('empty')
  assert.deepEqual(await categoryNames(), [])
  await petstore.categories.create({ name: 'Ferret' })
  assert.deepEqual(await categoryNames(), ['Ferret'])
})

test('is back on the default scenario in the next test, with an empty journal', async () => {
  assert.equal(petstore.requests.all().length, 0)
  assert.equal((await categoryNames()).length, 5)
})

test('rejects a nameless category with the contract’s 400 message', async () => {
  await assert.rejects(addCategory(''), /name/)
  assert.equal(petstore.requests.all({ method: 'POST' })[0]?.response.status, 400)
})
