/**
 * The README's `serve --proxy` block, run in a shell, `npx petstore-sandbox` being the built
 * binary (`dist/cli.js`) and `curl` the real one: the proxy in front of a divergent service, whose
 * departure the answer's header and the summary name. The port is the one the server got (the
 * README's 4010 is replaced), nothing else.
 */
import { execFile, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it, onTestFinished } from 'vitest'
import { READY_LINE } from '../../src/cli/serve-command.js'
import { CLI_BINARY } from '../support/sandbox-cli.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const README = readFileSync(join(ROOT, 'README.md'), 'utf8')
const NPX = `npx() { [ "$1" = petstore-sandbox ] || exit 99; shift; exec "${process.execPath}" "${join(ROOT, CLI_BINARY)}" "$@"; }`

function proxyBlock(): string[] {
  const block = /<!-- run by test\/cli\/readme-proxy\.test\.ts -->\n```sh\n([\s\S]*?)```/.exec(README)?.[1]
  if (block === undefined) throw new Error('the README has no sh block marked as run by test/cli/readme-proxy.test.ts')
  return block.split('\n').filter((line) => line !== '')
}

it("runs the README's serve --proxy lines: the real service's answer comes back with its departures named", async () => {
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

  const child = spawn('sh', ['-c', `${NPX}\n${serve!}`], { env: { ...env, PETSTORE_SANDBOX_PORT: '0', PETSTORE_SANDBOX_QUIET: 'true' } })
  onTestFinished(() => {
    child.kill('SIGKILL')
  })
  let banner = ''
  await new Promise<void>((resolve, reject) => {
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      banner += chunk
      if (banner.includes(READY_LINE)) resolve()
    })
    child.once('exit', (code) => reject(new Error(`serve exited with ${code}:\n${banner}`)))
  })
  expect(banner).toContain(`proxy      every API request passed on to ${env.STAGING_URL}`)
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
