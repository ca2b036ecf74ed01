import { setupPetstoreWorker } from 'petstore-sandbox/browser'
import { test as base } from 'vitest'

// One worker, started for each test: its Service Worker serves the test page's fetch calls.
const { worker, petstore } = setupPetstoreWorker({ baseUrl: 'https://api.shop.test/v1', apiKeys: ['t0ken'] })

export const test = base.extend<{ petstore: typeof petstore }>({
  petstore: [
    async ({}, use) => {
      await worker.start({ onUnhandledRequest: 'error', quiet: true })
      await use(petstore)
      await petstore.reset() // back to the scenario it was created with
      worker.stop()
    },
    { auto: true },
  ],
})
export { expect } from 'vitest'
