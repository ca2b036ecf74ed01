import { setupPetstoreWorker } from 'petstore-sandbox/browser'

export const { worker, petstore } = setupPetstoreWorker({
  baseUrl: '/v1', // this page's own origin
  apiKeys: ['t0ken'],
  scenario: 'default',
})
