import { provideHttpClient, withFetch } from '@angular/common/http'
import { TestBed } from '@angular/core/testing'
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { Categories } from './categories'

const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })
const server = setupServer(...petstore.handlers)

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset() // back to the scenario it was created with
})
afterAll(() => server.close())

async function render(): Promise<HTMLElement> {
  TestBed.configureTestingModule({ providers: [provideHttpClient(withFetch())] })
  const fixture = TestBed.createComponent(Categories)
  await fixture.whenStable() // HttpClient's requests hold the app unstable until they answer
  return fixture.nativeElement as HTMLElement
}

it('lists the categories', async () => {
  const page = await render()
  expect([...page.querySelectorAll('li')].map((item) => item.textContent)).toEqual(['Dogs', 'Cats', 'Rabbits', 'Birds', 'Fish'])
  expect(petstore.requests.all({ method: 'GET' })).toHaveLength(1)
})

it('shows an empty shop on the empty scenario', async () => {
  await petstore.useScenario('empty')
  expect((await render()).textContent).toContain('No categories yet')
})
