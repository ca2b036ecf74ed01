/**
 * docs/real-service.md's `scenarios record` block, run word for word in a shell, `npx petstore-sandbox`
 * being the built binary (`dist/cli.js`): record a running sandbox, validate the file, serve it,
 * and the served list is the recorded one.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { expect, it, onTestFinished } from 'vitest'
import { NPX, readmeBlock, serveLine } from '../support/readme-shell.js'
import { auth, jsonOf, startSandbox } from '../support/sandbox-server.js'

/** The command lines of the sh block that records a scenario. */
const recordBlock = () => readmeBlock('docs/real-service.md', 'test/cli/readme-record.test.ts').filter((line) => line.startsWith('npx '))

function runLine(line: string, cwd: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('sh', ['-c', `${NPX}\n${line}`], { cwd, env: { ...process.env, NO_COLOR: '1', ...env } }, (error, stdout, stderr) => {
      resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr })
    })
  })
}

it("runs docs/real-service.md's record, validate and serve lines word for word: the served categories are the recorded service's", async () => {
  const [record, validate, serve] = recordBlock()
  expect([record, validate, serve].every((line) => line !== undefined)).toBe(true)
  const cwd = await mkdtemp(join(tmpdir(), 'sandbox-readme-record-'))
  onTestFinished(() => rm(cwd, { recursive: true, force: true }))
  const upstream = await startSandbox({ apiKeys: ['staging-key'] })
  await upstream.fetch('/v1/categories', { method: 'POST', headers: auth('staging-key', true), body: '{"name":"Hamsters 🐹"}' })
  const env = { STAGING_URL: `${upstream.origin}/v1`, STAGING_KEY: 'staging-key' }

  const recorded = await runLine(record!, cwd, env)
  expect(recorded.stderr).toBe('')
  expect(recorded.code).toBe(0)
  const validated = await runLine(validate!, cwd, env)
  expect(validated.stdout).toBe('ok   scenarios/staging.json: staging 1.0.0\n')

  const banner = await serveLine(serve!, { cwd })
  const api = /API\s+(http:\/\/\S+\/v1)/.exec(banner)?.[1]
  const served = await fetch(`${api}/categories`, { headers: auth() }).then(jsonOf)
  expect(served).toEqual(await upstream.fetch('/v1/categories', { headers: auth('staging-key') }).then(jsonOf))
  expect(served).toContainEqual({ id: 6, name: 'Hamsters 🐹' })
})
