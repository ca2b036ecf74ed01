/**
 * Issue 21, point 5: a file-wide scenario against a shared setup file's `afterEach(reset)`.
 * Runs the project in test/shared-setup/ (a shared setup file, `isolate: false`, files in name
 * order) in a vitest of its own, as a user's suite would run.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it, onTestFinished } from 'vitest'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

interface JsonReport {
  readonly testResults: readonly { readonly assertionResults: readonly { readonly title: string; readonly status: string }[] }[]
}

it('keeps a file on its baseline through the shared afterEach(reset), and the next file on the default', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'petstore-shared-setup-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  const report = join(dir, 'report.json')
  // @note The outer run's VITEST_* variables would make the inner vitest think it is a worker.
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('VITEST')))
  const args = [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', '--config', 'test/shared-setup/vitest.config.ts', '--reporter=json', `--outputFile=${report}`]
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()))
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  const results = (JSON.parse(await readFile(report, 'utf8')) as JsonReport).testResults.flatMap((file) => file.assertionResults)
  expect(results.map(({ title, status }) => `${status}: ${title}`), stderr).toEqual([
    'passed: shows no categories in the first test',
    'passed: shows no categories in the second test either',
    'passed: shows the default categories in the next file, which set no baseline',
  ])
  expect(code).toBe(0)
})
