/** The real standalone server for the demo page test, on 127.0.0.1 port 0, closed after the suite. */
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll } from 'vitest'
import { createSandboxApp } from '../../src/server.js'

export const DEMO_DIR = fileURLToPath(new URL('../../demo/', import.meta.url))

/** Serves `apiKey`'s tenant, the API and the demo page for the suite. */
export function useDemoSandbox(apiKey: string): { url(): string } {
  let server: Server | undefined
  let base = ''
  beforeAll(async () => {
    const { app } = await createSandboxApp({ apiKeys: [apiKey], demoDir: DEMO_DIR })
    server = createServer(app)
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    server?.closeAllConnections()
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
  })
  return { url: () => base }
}
