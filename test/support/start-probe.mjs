/**
 * Run in a fresh process by test/server/start.test.ts, on the built package (dist/, rebuilt by the
 * tests' global setup when src/ is newer) as users load it: builds the sandbox, sends requests in the
 * order given on the command line (`api`, `admin`, `app`), and prints after each one whether
 * express has been loaded into this process yet, as JSON lines.
 */
import { request } from 'node:http'
import { createRequire } from 'node:module'
import { createSandboxApp } from '../../dist/server.js'

const require = createRequire(import.meta.url)
const expressLoaded = () => Object.keys(require.cache).some((file) => /[/\\]node_modules[/\\]express[/\\]/.test(file))

const sandbox = await createSandboxApp({ apiKeys: ['probe-key'], demoDir: false })
const server = sandbox.createServer()
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const { port } = server.address()
const paths = { api: '/v1/categories', admin: '/__sandbox/health', missing: '/nowhere' }

/** @returns {Promise<{ status: number, body: string }>} */
function get(path) {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path, headers: { authorization: 'Bearer probe-key' } }, (res) => {
      let body = ''
      res.setEncoding('utf8').on('data', (chunk) => (body += chunk))
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
  const { status, body } = await get(paths[step])
  process.stdout.write(`${JSON.stringify({ step, status, body: JSON.parse(body), express: expressLoaded() })}\n`)
}
server.close()
await sandbox.close()
