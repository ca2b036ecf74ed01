import { afterAll, afterEach, beforeAll, expect, test } from 'bun:test'
import { setupServer } from 'msw/node' // msw 2: msw 3 intercepts nothing under Bun
import { createPetstore } from 'petstore-sandbox'
import { addCategory, categoryNames } from './categories'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset() // back to the scenario it was created with
})
afterAll(() => server.close())

test('adds a category, and the journal holds what the app sent', async () => {
  await addCategory('Ferrets')
  expect(await categoryNames()).toContain('Ferrets')
  expect(petstore.requests.all({ method: 'POST' })[0]?.request.body).toEqual({ name: 'Ferrets' })
})
