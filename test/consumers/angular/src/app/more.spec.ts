// Beyond the excerpt in docs/recipes.md: isolation between tests, and the contract's 401.
import { provideHttpClient, withFetch } from '@angular/common/http'
import { TestBed } from '@angular/core/testing'
import { setupServer } from 'msw/node'
import { createPetstore } from 'petstore-sandbox'
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'
import { Categories } from './categories'

// A key the app does not send: every request answers the contract's 401.
const petstore = createPetstore({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['another-key'] })
const server = setupServer(...petstore.handlers)

beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
afterEach(async () => {
  server.resetHandlers()
  await petstore.reset()
})
afterAll(() => server.close())

it('shows the 401 the sandbox answers to a key it does not know', async () => {
  TestBed.configureTestingModule({ providers: [provideHttpClient(withFetch())] })
  const fixture = TestBed.createComponent(Categories)
  await fixture.whenStable()
  expect((fixture.nativeElement as HTMLElement).querySelector('[role="alert"]')?.textContent).toBe('The shop answered 401')
  expect(petstore.requests.all({ status: 401 })).toHaveLength(1)
})
