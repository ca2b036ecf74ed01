// A user's own test: their msw (2 or 3), their vitest, the packed petstore-sandbox.
import { createRequire } from 'node:module'
import { setupServer } from 'msw/node'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { createPetstore, PetstoreError, type Category } from 'petstore-sandbox'
import { setupPetstoreServer } from 'petstore-sandbox/node'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)
const auth = { authorization: 'Bearer t0ken', 'content-type': 'application/json' }

// @note No onUnhandledRequest: msw 3 renamed it onUnhandledFrame, and this file runs with both.
beforeAll(() => server.listen())
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset()
})
afterAll(() => server.close())

it('lists, creates, resets and switches scenario through the public API', async () => {
  const created = await fetch('https://api.shop.test/v1/categories', {
    method: 'POST',
    headers: auth,
    body: JSON.stringify({ name: 'Ferret' }),
  })
  expect(created.status).toBe(201)
  const category = (await created.json()) as Category
  expect(category.name).toBe('Ferret')
  expect((await petstore.categories.list()).map((c) => c.name)).toContain('Ferret')
  expect(petstore.requests.all()).toHaveLength(1)
  expect(petstore.requests.all()[0]).toMatchObject({ method: 'POST', response: { status: 201 } })
  petstore.requests.clear()
  expect(petstore.requests.all()).toEqual([])

  await petstore.reset()
  expect((await petstore.categories.list()).map((c) => c.name)).not.toContain('Ferret')

  await petstore.useScenario('empty')
  const listed = await fetch('https://api.shop.test/v1/categories', { headers: auth })
  expect(await listed.json()).toEqual([])
  await petstore.categories.create({ name: 'Ferret' })
  expect(await petstore.categories.list()).toHaveLength(1)
})

it('answers 401 without a key and throws PetstoreError on misuse', async () => {
  const response = await fetch('https://api.shop.test/v1/categories')
  expect(response.status).toBe(401)
  expect(() => createPetstore({ scenario: 'nope' })).toThrow(PetstoreError)
  expect(typeof setupPetstoreServer).toBe('function')
})

it('loads through require() as well, sharing nothing with the ESM entry', async () => {
  const required = createRequire(import.meta.url)('petstore-sandbox/node') as typeof import('petstore-sandbox/node')
  const { petstore: other } = required.setupPetstoreServer({ scenario: 'empty' })
  expect(await other.categories.list()).toEqual([])
  expect(() => required.setupPetstoreServer({ scenario: 'nope' })).toThrow(/no such scenario/)
})

it('resets to the scenario it was created with', async () => {
  await petstore.useScenario('empty')
  await petstore.reset()
  expect(petstore.scenario.name).toBe('default')
  expect(await petstore.categories.list()).toHaveLength(5)
})
