import { test as base } from '@playwright/test'
import { defineNetworkFixture, type NetworkFixture } from '@msw/playwright'
import { createPetstore } from 'petstore-sandbox'

export const petstore = createPetstore({ baseUrl: '*/v1', apiKeys: ['t0ken'] })

export const test = base.extend<{ network: NetworkFixture }>({
  network: [
    async ({ context }, use) => {
      const network = defineNetworkFixture({ context, handlers: petstore.handlers })
      await network.enable()
      await use(network)
      await network.disable()
      await petstore.reset()
    },
    { auto: false },
  ],
})
export { expect } from '@playwright/test'
