/** The suite's one petstore and msw server, imported by the setup file and the tests. */
import { setupServer } from 'msw/node'
import { createPetstore } from '../../src/index.js'

export const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })

// Listening once: with `isolate: false` this module is loaded once for every file.
const server = setupServer(...petstore.handlers)
server.listen({ onUnhandledRequest: 'error' })

/** What the app would show: the category names `GET /categories` answers. */
export async function categoryNames(): Promise<string[]> {
  const response = await fetch('https://api.shop.test/v1/categories', { headers: { authorization: 'Bearer t0ken' } })
  return ((await response.json()) as { name: string }[]).map((category) => category.name)
}
