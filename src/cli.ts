#!/usr/bin/env node
/**
 * The `petstore-sandbox` command: `serve` binds the sandbox app and owns ports, console output,
 * signals and exit codes; `scenarios list|validate` check scenario files; `tenants list|delete`
 * read a data directory; `verify <base-url>` checks a live deployment against the contract. Every option of `serve` also reads `PETSTORE_SANDBOX_<OPTION>`
 * (`PETSTORE_SANDBOX_PORT=4011`). The commands themselves are in `cli/run-cli.ts`; this file only
 * connects them to the process.
 */
import { hideBin } from 'yargs/helpers'
import { runWorkers } from './cli/serve-workers.js'
import { runCli } from './cli/run-cli.js'
import { consoleWriters } from './cli/console-streams.js'

const args = hideBin(process.argv)
// The command: the first word that is not an option (`serve`, `scenarios`, …).
const serving = args.find((arg) => !arg.startsWith('-')) === 'serve'
// @note Node.js writes to a terminal synchronously: one not read (Ctrl-S, a stalled ssh session) held the server's every
// request once its buffer filled, health included (attack67 F4: stuck after ~150 requests). A server writes to it as to
// a pipe, what the terminal does not take queued, at most a MiB of it (consoleWriters); a one-shot command keeps
// writing synchronously, so that nothing of its output is lost at exit.
if (serving) for (const stream of [process.stdout, process.stderr]) if (stream.isTTY) (stream as unknown as { _handle?: { setBlocking?: (blocking: boolean) => unknown } })._handle?.setBlocking?.(false)
const output = consoleWriters({ stdout: process.stdout, stderr: process.stderr }, serving)
const result = await runCli(args, {
  stdout: output.stdout,
  stderr: output.stderr,
  env: process.env,
  color: process.stderr.isTTY && !process.env['NO_COLOR'],
  columns: process.stdout.columns,
})

const { server } = result
if (result.workers !== undefined) {
  const red = (text: string) => (process.stderr.isTTY && !process.env['NO_COLOR'] ? `\x1b[31m${text}\x1b[39m` : text)
  await runWorkers(result.workers, output.stdout, (line) => output.stderr(`${red(line)}\n`))
} else if (server === undefined) {
  // @note A failure exits at once, as something it opened (a Redis client retrying) may still hold
  // the event loop; a success lets stdout drain first (pipes are written asynchronously on macOS).
  if (result.exitCode !== 0) process.exit(result.exitCode)
  process.exitCode = 0
} else {
  const stop = (signal: NodeJS.Signals) => {
    void server.stop(signal).then(
      () => process.exit(0),
      (error: unknown) => {
        output.stderr(`petstore-sandbox: ${error instanceof Error ? error.message : String(error)}\n`)
        process.exit(1)
      },
    )
  }
  process.once('SIGINT', stop)
  process.once('SIGTERM', stop)
}
if (server !== undefined || result.workers !== undefined) stopWithNpm()

/**
 * Under `npm start` (an npm script), stops as on SIGTERM once npm has exited: npm passes a
 * signal to the shell it runs the script in, which exits without passing it on, and the server
 * was left running on its port, its parent gone (new-user trial P6: `npm start & … kill $!`).
 * Seen by the parent process changing (the orphan is adopted), checked every second.
 */
function stopWithNpm(): void {
  if (process.env['npm_lifecycle_event'] === undefined) return
  const parent = process.ppid
  const timer = setInterval(() => {
    if (process.ppid === parent) return
    clearInterval(timer)
    output.stderr('petstore-sandbox: the npm script that started it has ended: stopping\n')
    process.kill(process.pid, 'SIGTERM')
  }, 1000)
  timer.unref()
}
