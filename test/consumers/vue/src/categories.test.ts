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
  await petstore.reset() // back to the scenario it was created with
})
afterAll(() => server.close())

it('lists the categories and adds one', async () => {
  render(Categories)
  expect(await screen.findAllByRole('listitem')).toHaveLength(5)
  await fireEvent.update(screen.getByLabelText('Name'), 'Ferrets')
  await fireEvent.click(screen.getByRole('button', { name: 'Add' }))
  expect(await screen.findByText('Ferrets')).toBeDefined()
  expect(petstore.requests.all({ method: 'POST' })[0]?.request.body).toEqual({ name: 'Ferrets' })
})
