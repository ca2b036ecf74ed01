// Beyond the excerpt in docs/recipes.md: the contract's 400 message, scenarios, and isolation.
import { cleanup, fireEvent, render, screen } from '@testing-library/vue'
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import Categories from './Categories.vue'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  cleanup()
  server.resetHandlers()
  await petstore.reset()
})
afterAll(() => server.close())

it('shows the sandbox’s 400 message', async () => {
  render(Categories)
  await screen.findAllByRole('listitem')
  await fireEvent.click(screen.getByRole('button', { name: 'Add' }))
  expect((await screen.findByRole('alert')).textContent).toMatch(/name/)
})

it('shows an empty shop on the empty scenario', async () => {
  await petstore.useScenario('empty')
  render(Categories)
  expect(await screen.findByText('No categories yet')).toBeDefined()
})

it('is back on the default scenario in the next test', async () => {
  render(Categories)
  expect(await screen.findAllByRole('listitem')).toHaveLength(5)
})
