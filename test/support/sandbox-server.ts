/**
 * Starts the real sandbox app on 127.0.0.1, port 0, for one test, and closes it when that test
 * finishes. Requests go over real HTTP with `fetch`.
 */
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, onTestFinished } from 'vitest'
import type { StoreKind } from './stores.js'
import type { CategoryLimits } from '../../src/contract/limits.js'
import { expectConformantResponse } from './openapi-validator.js'
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

let currentStore: StoreKind | undefined

/**
 * Runs the sandboxes of the enclosing `describe` on `kind`'s storage (a fresh data directory
 * per sandbox for SQLite), unless a test passes its own `dataDir`.
 * @example describe.each(STORES)('tenancy ($name store)', (kind) => { useStore(kind); it(…) })
 */
export function useStore(kind: StoreKind): void {
  beforeAll(() => {
    currentStore = kind
  })
  afterAll(() => {
    currentStore = undefined
  })
}

/**
 * Starts the app (no demo page unless `demoDir` is given) on the server the CLI uses
 * (`sandbox.createServer()`: timeouts, connection cap) and registers its teardown.
 */
export async function startSandbox(options: SandboxAppOptions = {}): Promise<RunningSandbox> {
  const logs: RequestLogEntry[] = []
  const store = options.dataDir === undefined && options.redisUrl === undefined ? currentStore?.sandboxOptions() : undefined
  const sandbox = await createSandboxApp({ demoDir: false, log: (entry) => logs.push(entry), ...store, ...options })
  const server = sandbox.createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  onTestFinished(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await sandbox.close()
  })
  const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { origin, sandbox, server, logs, fetch: (path, init) => fetchConformant(origin, path, init, sandbox.limits) }
}

/** `fetch`, and every answer of the API checked against the OpenAPI document on the way. */
async function fetchConformant(origin: string, path: string, init: RequestInit | undefined, limits: CategoryLimits): Promise<Response> {
  const response = await fetch(`${origin}${path}`, init)
  const { pathname } = new URL(path, origin)
  const method = init?.method ?? 'GET'
  if ((pathname === '/v1' || pathname.startsWith('/v1/')) && method !== 'OPTIONS') {
    await expectConformantResponse(method, pathname.slice('/v1'.length) || '/', response.clone(), limits)
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
