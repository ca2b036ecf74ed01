/**
 * The sandbox as the throughput bench runs it: `createSandboxApp` on the default scenario, one
 * key, no request log, bound to 127.0.0.1 port 0 as the CLI binds it. `--bridge middleware` puts
 * the API behind express and `@mswjs/http-middleware` instead of the lean bridge, for comparison.
 * Prints its port.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createSandboxApp } from '../../src/server/create-sandbox-app.js'

const KEY = process.argv[2] ?? 'bench-key'
const sandbox = await createSandboxApp({ apiKeys: [KEY], demoDir: false })
const server = createServer(sandbox.listener)
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`${(server.address() as AddressInfo).port}\n`)
})
