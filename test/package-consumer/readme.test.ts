import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers) // your own msw

beforeAll(() => server.listen())
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset() // back to the scenario it was created with: no test sees another's data
})
afterAll(() => server.close())

it('shows a new category', async () => {
  await petstore.useScenario('empty') // for this test only
  await petstore.categories.create({ name: 'Ferret' }) // arrange through the store…
  const response = await fetch('https://api.shop.test/v1/categories', { headers: { authorization: 'Bearer t0ken' } })
  expect(await response.json()).toEqual([{ id: 1, name: 'Ferret' }]) // …or through your app's own fetch calls
  expect(petstore.requests.all({ method: 'GET' })).toHaveLength(1)
})

it('shows the categories seeded for this test', async () => {
  await petstore.seed({ categories: [{ name: 'Ferrets' }] }) // this test's data: the list holds only Ferrets
  const response = await fetch('https://api.shop.test/v1/categories', { headers: { authorization: 'Bearer t0ken' } })
  expect(await response.json()).toEqual([{ id: 1, name: 'Ferrets' }]) // reset() in afterEach undoes it
})
