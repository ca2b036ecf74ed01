import { setupPactMswAdapter } from '@pactflow/pact-msw-adapter'
import { getResponse, http } from 'msw'
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { afterAll, afterEach, beforeAll, beforeEach, expect, it } from 'vitest'
import { addCategory, categoryNames } from './categories.js'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
// The adapter reads each request's body when it writes the Pact file: the petstore reads a clone.
const server = setupServer(http.all('*', ({ request }) => getResponse(petstore.handlers, request.clone())))
// Records every request the petstore answers as a Pact interaction.
const pact = setupPactMswAdapter({
  server,
  options: { consumer: 'shop-web', providers: { 'petstore-api': ['api.shop.test/v1'] }, pactOutDir: './pacts' },
})

beforeAll(() => server.listen())
beforeEach(() => pact.newTest())
afterEach(async () => {
  pact.verifyTest() // throws if a request of this test went unanswered or timed out
  server.resetHandlers()
  await petstore.reset() // back to the scenario it was created with
})
afterAll(async () => {
  await pact.writeToFile() // ./pacts/shop-web-petstore-api.json
  pact.clear()
  server.close()
})

it('lists the categories', async () => {
  expect(await categoryNames()).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
})

it('adds a category', async () => {
  expect(await addCategory('Ferrets')).toEqual({ id: 6, name: 'Ferrets' })
})

it('shows the contract’s 400 for a nameless category', async () => {
  await expect(addCategory('')).rejects.toThrow(/name/)
})
