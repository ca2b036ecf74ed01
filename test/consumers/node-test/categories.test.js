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
  await petstore.reset() // back to the scenario it was created with
})
after(() => server.close())

test('adds a category, and the journal holds what the app sent', async () => {
  await addCategory('Ferrets')
  assert.ok((await categoryNames()).includes('Ferrets'))
  assert.deepEqual(petstore.requests.all({ method: 'POST' })[0]?.request.body, { name: 'Ferrets' })
})
