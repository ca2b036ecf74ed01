import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { showCategories } from './app.js'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1' })
const server = setupServer(...petstore.handlers)
beforeAll(() => server.listen())
afterEach(() => petstore.reset()) // drops the answers a test planned and did not use
afterAll(() => server.close())

it('shows an error when the list answers 401, and retried once', async () => {
  petstore.answers.next({ operation: 'listCategories', status: 401, times: 2 })
  expect(await showCategories()).toBe('Sign in again')
  expect(petstore.requests.all({ operation: 'listCategories' })).toHaveLength(2)
})

it('shows the list when only the first try answers 401', async () => {
  petstore.answers.next({ operation: 'listCategories', status: 401 })
  expect(await showCategories()).toBe('Dogs, Cats, Rabbits, Birds, Fish')
  expect(petstore.requests.all({ operation: 'listCategories' }).map((entry) => entry.response.status)).toEqual([401, 200])
})

it('shows an error when the list answers 500 twice, and never when a plan was left for another operation', async () => {
  petstore.answers.next({ operation: 'createCategory', status: 500 })
  petstore.answers.next({ operation: 'listCategories', status: 500, times: 2 })
  expect(await showCategories()).toBe('Something went wrong')
  expect(petstore.answers.pending()).toEqual([{ operation: 'createCategory', status: 500, code: 'internal_error', times: 1 }])
})
