import 'petstore-sandbox/vitest' // once, in a setupFiles file or atop a test file: the matchers and their types
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)
beforeAll(() => server.listen())
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset()
})
afterAll(() => server.close())

/** Your app: saves a category without waiting (a click handler), then reloads the list. */
function onSave(name: string): void {
  const headers = { authorization: 'Bearer t0ken', 'content-type': 'application/json' }
  void fetch('https://api.shop.test/v1/categories', { method: 'POST', headers, body: JSON.stringify({ name, description: 'From the form' }) })
    .then(() => fetch('https://api.shop.test/v1/categories', { headers }))
}

it('saves the category, then reloads the list once', async () => {
  onSave('Ferrets')
  await petstore.requests.waitFor({ operation: 'listCategories' }) // the last request the app makes
  expect(petstore).toHaveReceived({ operation: 'createCategory', status: 201, body: { name: 'Ferrets' } })
  expect(petstore).toHaveReceived({ method: 'POST', body: expect.objectContaining({ description: expect.any(String) }) })
  expect(petstore).toHaveReceivedTimes(1, { operation: 'listCategories' })
  expect(petstore).not.toHaveReceived({ status: 400 })
})

it('says what the app sent instead', async () => {
  onSave('')
  await petstore.requests.waitFor({ operation: 'listCategories' })
  expect(() => expect(petstore).toHaveReceived({ operation: 'createCategory', status: 201 })).toThrow(
    '1: POST /v1/categories (createCategory) → 400, body {"name": "", "description": "From the form"} (differs in status)',
  )
})

it('waitFor() rejects after its timeout, listing what arrived meanwhile', async () => {
  onSave('Owls')
  await expect(petstore.requests.waitFor({ operation: 'getPetById' }, { timeout: 300 })).rejects.toThrow(
    /^No request matched \{ operation: "getPetById" \} within 300 ms\. Arrived meanwhile \(2\):\n {2}1: POST \/v1\/categories/,
  )
})
