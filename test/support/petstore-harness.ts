/**
 * One msw server per test file, a fresh Petstore per test, and a `call()` that sends a real
 * `fetch` and validates whatever comes back against the OpenAPI document.
 */
import { setupServer } from 'msw/node'
import { afterAll, beforeAll, onTestFinished } from 'vitest'
import { createPetstore, type Petstore, type PetstoreOptions } from '../../src/index.js'
import { expectConformant } from './openapi-validator.js'

export const BASE = 'https://api.shop.test/v1'
export const KEY = 't0ken'

export interface Answer<T = unknown> {
  readonly status: number
  readonly headers: Headers
  readonly body: T
}

/** Starts one msw server for the file; `use()` gives each test its own petstore. */
export function petstoreHarness() {
  const server = setupServer()
  beforeAll(() => server.listen({ onUnhandledRequest: 'error' }))
  afterAll(() => server.close())

  return {
    server,
    /** A fresh petstore (default: scenario `default`, key `t0ken`, base `BASE`) serving this test. */
    async use(options: PetstoreOptions = {}): Promise<Petstore> {
      const petstore = createPetstore({ baseUrl: BASE, apiKeys: [KEY], ...options })
      server.resetHandlers(...petstore.handlers)
      onTestFinished(() => server.resetHandlers())
      await petstore.ready
      return petstore
    },
  }
}

export interface CallInit {
  readonly method?: string
  /** Sent as is when a string; JSON-encoded otherwise. */
  readonly body?: unknown
  /** `null` sends no Authorization header. @default `Bearer t0ken` */
  readonly auth?: string | null
  readonly headers?: Record<string, string>
  /** @default 'application/json' when a body is sent */
  readonly contentType?: string | null
  readonly base?: string
}

/** Sends a request to `path` under the base and validates the answer against the contract. */
export async function call<T = unknown>(path: string, init: CallInit = {}): Promise<Answer<T>> {
  const method = init.method ?? (init.body === undefined ? 'GET' : 'POST')
  const headers = new Headers(init.headers)
  const auth = init.auth === undefined ? `Bearer ${KEY}` : init.auth
  if (auth !== null) headers.set('authorization', auth)
  if (init.body !== undefined && init.contentType !== null) headers.set('content-type', init.contentType ?? 'application/json')
  const text = init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body)
  // @note fetch labels a string body text/plain; bytes go out with no Content-Type at all.
  const body = text !== undefined && init.contentType === null ? new TextEncoder().encode(text) : text
  const response = await fetch(`${init.base ?? BASE}${path}`, { method, headers, body })
  return readConformant<T>(method, path, response)
}

/** Reads a response and validates it against the contract; for tests that call `fetch` themselves. */
export async function readConformant<T = unknown>(method: string, path: string, response: Response): Promise<Answer<T>> {
  const responseText = await response.text()
  const parsed: unknown = responseText === '' ? undefined : JSON.parse(responseText)
  expectConformant(method, path.split('?')[0]!, response.status, response.headers.get('content-type'), parsed)
  return { status: response.status, headers: response.headers, body: parsed as T }
}
