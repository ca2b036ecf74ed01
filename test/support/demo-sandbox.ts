/**
 * The standalone server for the demo page test, on 127.0.0.1 port 0, closed after the suite.
 * Uses `createSandboxApp` from src/server.ts when it exists, else the test stand-in.
 */
import { existsSync } from 'node:fs'
import { createServer, type RequestListener, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll } from 'vitest'
import { createStandInApp } from '../browser/fixtures/sandbox-stand-in.js'

export const DEMO_DIR = fileURLToPath(new URL('../../demo/', import.meta.url))
const REAL_SERVER = fileURLToPath(new URL('../../src/server.ts', import.meta.url))

type CreateSandboxApp = (options: { apiKeys: string[]; demoDir: string }) => { app: RequestListener }

function hasCreateSandboxApp(module: unknown): module is { createSandboxApp: CreateSandboxApp } {
  return typeof module === 'object' && module !== null && typeof Reflect.get(module, 'createSandboxApp') === 'function'
}

/** The app serving `apiKey`'s tenant, the API and the demo page. */
async function sandboxApp(apiKey: string): Promise<RequestListener> {
  if (existsSync(REAL_SERVER)) {
    const module: unknown = await import(/* @vite-ignore */ REAL_SERVER)
    if (!hasCreateSandboxApp(module)) throw new Error(`${REAL_SERVER} does not export createSandboxApp`)
    return module.createSandboxApp({ apiKeys: [apiKey], demoDir: DEMO_DIR }).app
  }
  return createStandInApp({ apiKey, demoDir: DEMO_DIR })
}

export function useDemoSandbox(apiKey: string): { url(): string } {
  let server: Server | undefined
  let base = ''
  beforeAll(async () => {
    server = createServer(await sandboxApp(apiKey))
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    server?.closeAllConnections()
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()))
  })
  return { url: () => base }
}
