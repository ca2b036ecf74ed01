/**
 * The admin API block of docs/server.md, run word for word: every curl line against a running
 * sandbox, in the order the guide gives them (a partner's QA suite copies these), each answered with a
 * success status. The block's own comments name what each answers.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { startSandbox } from '../support/sandbox-server.js'

const GUIDE = readFileSync(fileURLToPath(new URL('../../docs/server.md', import.meta.url)), 'utf8')

/** The sh block that plans answers: the admin API's curl lines, continuations joined. */
function adminCommands(): string[] {
  const block = [...GUIDE.matchAll(/```sh\n([\s\S]*?)```/g)].map(([, body]) => body!).find((body) => body.includes('$SANDBOX/__sandbox/answers'))
  if (block === undefined) throw new Error('docs/server.md has no sh block with the planned answers admin call')
  return block
    .replace(/\\\n\s*/g, '')
    .split('\n')
    .filter((line) => line.startsWith('curl '))
}

/** Runs one line of the guide with its variables set; curl prints only the status (a function in front of it). */
function run(line: string, env: Record<string, string>): Promise<string> {
  const script = `curl() { command curl -s -o /dev/null -w '%{http_code}' "$@"; }\n${line}`
  return new Promise((resolve, reject) => {
    execFile('sh', ['-c', script], { env: { ...process.env, ...env } }, (error, stdout) => (error ? reject(error) : resolve(stdout.trim())))
  })
}

it("answers every curl line of docs/server.md's admin API block with the success its comment names, in order", async () => {
  // @note `k1` is the key whose tenant id the block's admin lines name (6ab9f1eb8f7d…).
  const sandbox = await startSandbox({ apiKeys: ['k1'], adminToken: 'admin-secret' })
  const env = { SANDBOX: sandbox.origin, KEY: 'k1', ADMIN: 'admin-secret' }
  const commands = adminCommands()
  expect(commands.length).toBeGreaterThanOrEqual(15)
  const answered: string[] = []
  for (const line of commands) answered.push(`${await run(line, env)} ${line.split('#')[0]!.trim()}`)
  const expected = (line: string) => {
    if (/-X (POST|PUT)\b.*__sandbox\/answers/.test(line)) return '201'
    if (/-X DELETE/.test(line)) return '204'
    return '200'
  }
  expect(answered).toEqual(commands.map((line) => `${expected(line)} ${line.split('#')[0]!.trim()}`))
})
