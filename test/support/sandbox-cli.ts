/**
 * The `petstore-sandbox` command two ways: in this process through `runCli` (what most CLI tests
 * use: no process to start), and as the installed binary, `node dist/cli.js`, in a child process
 * killed when the test finishes if it is still running. `dist/` is rebuilt before the run when
 * `src/` is newer (test/support/global-build.ts), so a child never runs stale code.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { onTestFinished } from 'vitest'
import { runCli as runCliInProcess, type RunningSandbox } from '../../src/cli/run-cli.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** The binary as published (`bin` in package.json). */
export const CLI_BINARY = 'dist/cli.js'

/** How long a child may take to print what a test waits for, however loaded the machine. */
const WAIT_MS = 30_000

export interface CliRun {
  readonly child: ChildProcess
  /** Everything written to stdout so far. */
  stdout(): string
  stderr(): string
  /** Resolves with the exit code once the process has exited. */
  readonly exited: Promise<number | null>
  /** Resolves once stdout contains `text`; rejects if the process exits first, or after 30 s. */
  waitFor(text: string): Promise<void>
}

/** Starts `petstore-sandbox <args>` (the built binary) with `env` added to the environment. */
export function runCli(args: readonly string[], env: Record<string, string> = {}): CliRun {
  const child = spawn(process.execPath, [CLI_BINARY, ...args], {
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
        const signal = AbortSignal.timeout(WAIT_MS)
        const check = () => {
          if (stdout.includes(text)) {
            child.stdout.off('data', check)
            resolve()
          }
        }
        child.stdout.on('data', check)
        check()
        signal.addEventListener('abort', () => {
          child.stdout.off('data', check)
          reject(new Error(`no ${JSON.stringify(text)} within ${WAIT_MS} ms\n${stdout}\n${stderr}`))
        })
        void exited.then((code) => reject(new Error(`exited with ${code} before printing ${JSON.stringify(text)}\n${stdout}\n${stderr}`)))
      }),
  }
}

/** Runs the binary to completion. */
export async function runCliToEnd(args: readonly string[], env: Record<string, string> = {}) {
  const run = runCli(args, env)
  const code = await run.exited
  return { code, stdout: run.stdout(), stderr: run.stderr() }
}

export interface InProcessRun {
  /** The exit code: set once a command has finished, 0 for a `serve` that is running. */
  readonly code: number
  /** Everything written to stdout so far. */
  readonly stdout: () => string
  readonly stderr: () => string
  /** `serve`'s running sandbox, stopped when the test finishes. */
  readonly server: RunningSandbox | undefined
}

/**
 * Runs `petstore-sandbox <args>` in this process, with only `env` as its environment; resolves
 * when the command has finished, or once `serve` answers (its sandbox is stopped when the test finishes).
 */
export async function runCliHere(args: readonly string[], env: Record<string, string> = {}): Promise<InProcessRun> {
  let stdout = ''
  let stderr = ''
  const result = await runCliInProcess(args, { stdout: (text) => (stdout += text), stderr: (text) => (stderr += text), env })
  const { server } = result
  if (server) onTestFinished(() => server.stop('test finished'))
  return { code: result.exitCode, stdout: () => stdout, stderr: () => stderr, server }
}
