/**
 * Starts the real sandbox app on 127.0.0.1, port 0, for one test, and closes it when that test
 * finishes. Requests go over real HTTP with `fetch`.
 */
import { createServer, type Server, type ServerOptions } from 'node:http'
import type { AddressInfo } from 'node:net'
import { onTestFinished } from 'vitest'
import { answerClientErrors } from '../../src/server/client-errors.js'
import { expectConformantResponse } from './openapi-validator.js'
import { dataDir, redisPrefix, redisUrl } from './stores.js'
import { createSandboxApp, DEV_API_KEY, type RequestLogEntry, type SandboxApp, type SandboxAppOptions } from '../../src/server.js'

export interface RunningSandbox {
  /** `http://127.0.0.1:<port>` */
  readonly origin: string
  readonly sandbox: SandboxApp
  readonly server: Server
  /** Every request log entry, in order. */
  readonly logs: RequestLogEntry[]
  /** `fetch` of a path under the origin (`/v1/categories`, `/__sandbox/state`). */
  readonly fetch: (path: string, init?: RequestInit) => Promise<Response>
}

/**
 * Starts the app (no demo page unless `demoDir` is given) and registers its teardown. `http`
 * sets the Node server's own options (timeouts), as the CLI does.
 */
export async function startSandbox(
  options: SandboxAppOptions = {},
  http: ServerOptions & { headersTimeout?: number; requestTimeout?: number } = {},
): Promise<RunningSandbox> {
  const logs: RequestLogEntry[] = []
  const sandbox = await createSandboxApp({ demoDir: false, log: (entry) => logs.push(entry), ...storeFromEnvironment(options), ...options })
  const server = createServer(http, sandbox.listener)
  answerClientErrors(server)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await sandbox.close()
  })
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { origin, sandbox, server, logs, fetch: (path, init) => fetchConformant(origin, path, init) }
}

/**
 * `PETSTORE_TEST_STORE=redis` (or `sqlite`) runs every sandbox that picks no store itself
 * on that store: the server suites then run against it unchanged (`.ci/run` does so for Redis).
 */
function storeFromEnvironment(options: SandboxAppOptions): Pick<SandboxAppOptions, 'redisUrl' | 'redisPrefix' | 'dataDir'> {
  if (options.dataDir !== undefined || options.redisUrl !== undefined) return {}
  const store = process.env['PETSTORE_TEST_STORE']
  if (store === 'redis') return { redisUrl: redisUrl(), redisPrefix: redisPrefix() }
  if (store === 'sqlite') return { dataDir: dataDir() }
  return {}
}

/** `fetch`, and every answer of the API checked against the OpenAPI document on the way. */
async function fetchConformant(origin: string, path: string, init?: RequestInit): Promise<Response> {
  const response = await fetch(`${origin}${path}`, init)
  const { pathname } = new URL(path, origin)
  const method = init?.method ?? 'GET'
  if ((pathname === '/v1' || pathname.startsWith('/v1/')) && method !== 'OPTIONS') {
    await expectConformantResponse(method, pathname.slice('/v1'.length) || '/', response.clone())
  }
  return response
}

/** Headers with a bearer key (the development key unless given) and, when `json`, a JSON content type. */
export function auth(key: string = DEV_API_KEY, json = false): Record<string, string> {
  return json ? { authorization: `Bearer ${key}`, 'content-type': 'application/json' } : { authorization: `Bearer ${key}` }
}

/** Reads a response as JSON, failing the test with the text when it is not. */
export async function jsonOf(response: Response): Promise<unknown> {
  const text = await response.text()
  try {
    return JSON.parse(text)
  } catch {
    throw new Error(`expected a JSON body, got ${response.status} ${JSON.stringify(text.slice(0, 200))}`)
  }
}
