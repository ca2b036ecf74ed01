/**
 * docs/real-service.md's `serve --proxy` block, run in a shell, `npx petstore-sandbox` being the built
 * binary (`dist/cli.js`) and `curl` the real one: the proxy in front of a divergent service, whose
 * departure the answer's header and the summary name. The port is the one the server got (the
 * guide's 4010 is replaced), nothing else.
 */
import { execFile } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { expect, it, onTestFinished } from 'vitest'
import { readmeBlock, serveLine } from '../support/readme-shell.js'

const proxyBlock = () => readmeBlock('docs/real-service.md', 'test/cli/readme-proxy.test.ts')

it("runs docs/real-service.md's serve --proxy lines: the real service's answer comes back with its departures named", async () => {
  const [serve, list, summary] = proxyBlock()
  expect(serve).toBe('npx petstore-sandbox serve --proxy "$STAGING_URL"')
  // The real service: its list gives a category without an id.
  const real = createServer((req, res) => {
    const known = req.headers.authorization === 'Bearer staging-key'
    res.writeHead(known ? 200 : 401, { 'content-type': 'application/json' }).end(known ? '[{"name":"Dogs"}]' : '{"code":"no","message":"no","status":401}')
  })
  await new Promise<void>((resolve) => real.listen(0, '127.0.0.1', resolve))
  onTestFinished(() => new Promise<void>((resolve) => real.close(() => resolve())))
  const env = { ...process.env, NO_COLOR: '1', STAGING_URL: `http://127.0.0.1:${(real.address() as AddressInfo).port}/v1`, STAGING_KEY: 'staging-key' }

  const banner = await serveLine(serve!, { env })
  expect(banner).toContain(`proxy      every API request passed on to ${env.STAGING_URL}`)
  expect(banner).toContain("scenario   none used: every API answer is the real service's")
  const origin = /API\s+(http:\/\/[^/\s]+)\/v1/.exec(banner)![1]!
  const run = (line: string) =>
    new Promise<string>((resolve, reject) =>
      execFile('sh', ['-c', line.replaceAll('http://127.0.0.1:4010', origin)], { env }, (error, stdout) => (error ? reject(error) : resolve(stdout))),
    )
  const answer = await run(list!)
  expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/)
  expect(answer).toMatch(/\r\nsandbox-violations: \["response: 200 body \[0\]: id: id must be a safe integer"\]\r\n/)
  expect(answer.endsWith('\r\n\r\n[{"name":"Dogs"}]')).toBe(true)
  expect(JSON.parse(await run(summary!))).toMatchObject({ proxy: env.STAGING_URL, exchanges: 1, violating: 1, violations: [{ operation: 'listCategories', count: 1 }] })
})
