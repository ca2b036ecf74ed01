/**
 * Runs the real CLI (`src/cli.ts` through tsx's loader) as a child process, and kills it when
 * the test finishes if it is still running.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { onTestFinished } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

export interface CliRun {
  readonly child: ChildProcess
  /** Everything written to stdout so far. */
  stdout(): string
  stderr(): string
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>
  /** Resolves once stdout contains `text`; rejects if the process exits first. */
  waitFor(text: string): Promise<void>
}

/** Starts `petstore-sandbox <args>` with `env` added to the environment. */
export function runCli(args: readonly string[], env: Record<string, string> = {}): CliRun {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, NO_COLOR: '1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk))
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  onTestFinished(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    exited,
    waitFor: (text) =>
      new Promise((resolve, reject) => {
        const check = () => {
          if (stdout.includes(text)) {
            child.stdout.off('data', check)
            resolve()
          }
        }
        child.stdout.on('data', check)
        check()
        void exited.then((code) => reject(new Error(`exited with ${code} before printing ${JSON.stringify(text)}\n${stdout}\n${stderr}`)))
      }),
  }
}

/** Runs the CLI to completion. */
export async function runCliToEnd(args: readonly string[], env: Record<string, string> = {}) {
  const run = runCli(args, env)
  const code = await run.exited
  return { code, stdout: run.stdout(), stderr: run.stderr() }
}
