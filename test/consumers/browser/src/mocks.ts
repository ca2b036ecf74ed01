// src/mocks.ts
import { setupPetstoreWorker } from 'petstore-sandbox/browser'

export const { worker, petstore } = setupPetstoreWorker({
  baseUrl: '/v1',           // this page's origin; or '*/v1' (any), 'https://api.shop.test/v1'
  apiKeys: ['t0ken'],       // default: the scenario's keys, else any non-empty key
  scenario: 'default',
})
