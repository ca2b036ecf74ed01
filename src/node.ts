/** The Node.js runtime: a msw `setupServer` already wired to a Petstore. */
import { setupServer, type SetupServer } from 'msw/node'
import { createPetstore, type Petstore, type PetstoreOptions } from './index.js'

/** What {@link setupPetstoreServer} returns: the msw server and the petstore behind it. */
export interface PetstoreServer {
  /** msw's server, wired to the petstore's handlers: `listen()` it in `beforeAll`, `close()` it in `afterAll`. */
  readonly server: SetupServer
  /** The store and journal behind the handlers. */
  readonly petstore: Petstore
}

/**
 * Creates a Petstore and an msw `setupServer` serving it.
 * @note Only one `setupServer` may be active per process: for several petstores, spread all
 * their handlers (with distinct base URLs) into one server instead of calling this twice.
 *
 * @example
 * const { server, petstore } = setupPetstoreServer({ apiKeys: ['t0ken'] })
 * beforeAll(() => server.listen({ onUnhandledRequest: 'error' })) // msw 3: onUnhandledFrame
 * afterEach(() => petstore.reset())
 * afterAll(() => server.close())
 */
export function setupPetstoreServer(options: PetstoreOptions = {}): PetstoreServer {
  const petstore = createPetstore(options)
  return { server: setupServer(...petstore.handlers), petstore }
}

export type { Petstore, PetstoreOptions, ResetOptions } from './library/petstore.js'
