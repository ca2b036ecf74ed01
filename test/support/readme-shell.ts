/**
 * Runs a README's `sh` lines as a user would, `npx petstore-sandbox` being the built binary
 * (`dist/cli.js`): a shell function stands in for npx, nothing else is changed.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { onTestFinished } from 'vitest'
import { READY_LINE } from '../../src/cli/serve-command.js'
import { CLI_BINARY } from './sandbox-cli.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** The README, as the tests read it. */
export const README = readFileSync(join(ROOT, 'README.md'), 'utf8')

/** `npx petstore-sandbox …` as the installed binary would run, defined ahead of a README line in the shell. */
export const NPX = `npx() { [ "$1" = petstore-sandbox ] || exit 99; shift; exec "${process.execPath}" "${join(ROOT, CLI_BINARY)}" "$@"; }`

/**
 * The lines of the `sh` block the README marks `<!-- run by <testFile> -->`.
 * @example readmeBlock('test/cli/readme-proxy.test.ts')
 */
export function readmeBlock(testFile: string): string[] {
  const marker = `<!-- run by ${testFile} -->\n\`\`\`sh\n`
  const start = README.indexOf(marker)
  if (start === -1) throw new Error(`the README has no sh block marked as run by ${testFile}`)
  const body = README.slice(start + marker.length, README.indexOf('```', start + marker.length))
  return body.split('\n').filter((line) => line !== '')
}

/**
 * Runs a README's `serve` line in a shell on a free port (`PETSTORE_SANDBOX_PORT=0`, quiet) until
 * its banner's last line; killed when the test ends. Resolves with the banner.
 */
export async function serveLine(line: string, options: { cwd?: string; env?: Record<string, string | undefined> } = {}): Promise<string> {
  const env = { ...process.env, NO_COLOR: '1', ...options.env, PETSTORE_SANDBOX_PORT: '0', PETSTORE_SANDBOX_QUIET: 'true' }
  const child = spawn('sh', ['-c', `${NPX}\n${line}`], { cwd: options.cwd, env })
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
  return banner
}
