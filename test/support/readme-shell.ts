/**
 * Runs the `sh` lines of the README or a guide under docs/ as a user would, `npx petstore-sandbox`
 * being the built binary (`dist/cli.js`): a shell function stands in for npx, nothing else is changed.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { onTestFinished } from 'vitest'
import { READY_LINE } from '../../src/cli/serve-command.js'
import { CLI_BINARY } from './sandbox-cli.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** `npx petstore-sandbox …` as the installed binary would run, defined ahead of a document's line in the shell. */
export const NPX = `npx() { [ "$1" = petstore-sandbox ] || exit 99; shift; exec "${process.execPath}" "${join(ROOT, CLI_BINARY)}" "$@"; }`

/**
 * The lines of the `sh` block that `document` (a path from the package root) marks
 * `<!-- run by <testFile> -->`.
 * @example readmeBlock('docs/real-service.md', 'test/cli/readme-proxy.test.ts')
 */
export function readmeBlock(document: string, testFile: string): string[] {
  const text = readFileSync(join(ROOT, document), 'utf8')
  const marker = `<!-- run by ${testFile} -->\n\`\`\`sh\n`
  const start = text.indexOf(marker)
  if (start === -1) throw new Error(`${document} has no sh block marked as run by ${testFile}`)
  const body = text.slice(start + marker.length, text.indexOf('```', start + marker.length))
  return body.split('\n').filter((line) => line !== '')
}

/**
 * Runs a document's `serve` line in a shell on a free port (`PETSTORE_SANDBOX_PORT=0`, quiet) until
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
