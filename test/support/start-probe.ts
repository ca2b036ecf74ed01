/**
 * Run in a fresh process by test/server/start.test.ts: builds the sandbox, sends requests in the
 * order given on the command line (`api`, `admin`, `app`), and prints after each one whether
 * express has been loaded into this process yet, as JSON lines.
 */
import { request } from 'node:http'
import { createRequire } from 'node:module'
import type { AddressInfo } from 'node:net'
import { createSandboxApp } from '../../src/server/create-sandbox-app.js'

const require = createRequire(import.meta.url)
const expressLoaded = () => Object.keys(require.cache).some((file) => /[/\\]node_modules[/\\]express[/\\]/.test(file))

const sandbox = await createSandboxApp({ apiKeys: ['probe-key'], demoDir: false })
const server = sandbox.createServer()
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
const { port } = server.address() as AddressInfo
const paths = { api: '/v1/categories', admin: '/__sandbox/health', missing: '/nowhere' } as const

function get(path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, headers: { authorization: 'Bearer probe-key' } }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (chunk: string) => (body += chunk))
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
      .on('error', reject)
      .end()
  })
}

process.stdout.write(`${JSON.stringify({ step: 'start', express: expressLoaded() })}\n`)
for (const step of process.argv.slice(2)) {
  if (step === 'app') {
    process.stdout.write(`${JSON.stringify({ step, express: expressLoaded(), appIsFunction: typeof sandbox.app === 'function', after: expressLoaded() })}\n`)
    continue
  }
  const { status, body } = await get(paths[step as keyof typeof paths])
  process.stdout.write(`${JSON.stringify({ step, status, body: JSON.parse(body) as unknown, express: expressLoaded() })}\n`)
}
server.close()
await sandbox.close()
