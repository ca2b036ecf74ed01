/**
 * The console streams as `petstore-sandbox` writes to them: one that can no longer be written (a
 * full disk or a file-size limit under `serve > sandbox.log`, a log pipe whose reader left) costs
 * its lines, never the server (attack33 F2: exit 1 at the first request line after it failed).
 */
import { spawn } from 'node:child_process'
import { EventEmitter } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'
import { consoleWriters, MAX_QUEUED_CONSOLE_BYTES } from '../../src/cli/console-streams.js'
import { READY_LINE as READY } from '../../src/cli/serve-command.js'
import { CLI_BINARY, runCli } from '../support/sandbox-cli.js'
import { freePort } from '../support/redis-server.js'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

/** A console stream that takes text until `failAt` writes, then fails each write: throwing, or emitting 'error' (as Node's do). */
class FailingStream extends EventEmitter {
  readonly taken: string[] = []
  constructor(
    readonly failAt: number,
    readonly how: 'throws' | 'emits',
    readonly code = 'EPIPE',
  ) {
    super()
  }

  write(text: string): boolean {
    if (this.taken.length < this.failAt) {
      this.taken.push(text)
      return true
    }
    const error = Object.assign(new Error(`write ${this.code}`), { code: this.code })
    if (this.how === 'throws') throw error
    process.nextTick(() => this.emit('error', error))
    return false
  }
}

/** The status of a list of the development key's categories at `origin`. */
async function listed(origin: string): Promise<number> {
  return (await fetch(`${origin}/v1/categories`, { headers: { authorization: 'Bearer sandbox-dev-key' } })).status
}

describe('the CLI’s console streams', () => {
  it.each(['throws', 'emits'] as const)('drops the lines of a stream that %s an error from then on, said once on the other, never thrown', async (how) => {
    const stdout = new FailingStream(1, how)
    const stderr = new FailingStream(100, 'throws')
    const output = consoleWriters({ stdout, stderr })
    output.stdout('first\n')
    for (let i = 0; i < 5; i++) expect(() => output.stdout(`line ${i}\n`)).not.toThrow()
    await new Promise((resolve) => setImmediate(resolve))
    expect(stdout.taken).toEqual(['first\n'])
    expect(stderr.taken).toEqual(['petstore-sandbox: standard output (the request log) can no longer be written (EPIPE): its lines are dropped from now on; the sandbox serves on\n'])
    output.stderr('still said\n')
    expect(stderr.taken.at(-1)).toBe('still said\n')
  })

  it('says nothing of a one-shot command’s reader that left (`scenarios list | head -1`), and no "serves on" of other errors (trial41 R6)', async () => {
    const stdout = new FailingStream(1, 'emits')
    const stderr = new FailingStream(100, 'throws')
    const output = consoleWriters({ stdout, stderr }, false)
    output.stdout('first\n')
    output.stdout('second\n')
    await new Promise((resolve) => setImmediate(resolve))
    // Before: "… standard output (the request log) can no longer be written (EPIPE): … the sandbox serves on".
    expect(stderr.taken).toEqual([])
    const full = new FailingStream(0, 'throws', 'ENOSPC')
    const told: string[] = []
    const other = consoleWriters({ stdout: full, stderr: { write: (text: string) => told.push(text), on: () => undefined } }, false)
    other.stdout('a\n')
    expect(told).toEqual(['petstore-sandbox: standard output can no longer be written (ENOSPC): its lines are dropped from now on\n'])
  })

  it('drops the lines of a stream whose reader does not read once a MiB waits for it, said once, and counts them once it reads again (attack67 F3)', () => {
    // A pipe whose reader is alive and reads nothing: Node queues every write (its writableLength).
    const stalled = { taken: [] as string[], writableLength: 0, write(text: string) {
      this.taken.push(text)
      this.writableLength += text.length
      return false
    }, on: () => undefined }
    const told: string[] = []
    const output = consoleWriters({ stdout: stalled, stderr: { write: (text: string) => told.push(text), on: () => undefined } })
    const line = `${'x'.repeat(99)}\n`
    for (let i = 0; i < 30_000; i++) output.stdout(line)
    // Before: all 30,000 lines (3 MB) queued in the process.
    expect(stalled.writableLength).toBeLessThanOrEqual(MAX_QUEUED_CONSOLE_BYTES + line.length)
    const written = stalled.taken.length
    expect(told).toEqual([expect.stringMatching(/^petstore-sandbox: standard output \(the request log\) is not being read \(\d+ bytes waiting for its reader\): its lines are dropped until it is; the sandbox serves on\n$/)])
    // The reader takes what waited: the next line comes after the count of those dropped.
    stalled.writableLength = 0
    output.stdout('next\n')
    expect(stalled.taken.slice(written)).toEqual([`petstore-sandbox: ${30_000 - written} lines of standard output (the request log) dropped while it was not read\n`, 'next\n'])
    expect(told).toHaveLength(1)
    // A one-shot command's output is never dropped: it is written whole, and drains before the command exits.
    const list = { taken: [] as string[], writableLength: 0, write(text: string) {
      this.taken.push(text)
      this.writableLength += text.length
      return false
    }, on: () => undefined }
    const oneShot = consoleWriters({ stdout: list, stderr: { write: (text: string) => told.push(text), on: () => undefined } }, false)
    for (let i = 0; i < 30_000; i++) oneShot.stdout(line)
    // Before: about a MiB of it, the rest dropped, "not being read" (review53 R2: `tenants list | cat`).
    expect(list.taken).toHaveLength(30_000)
    expect(told).toHaveLength(1)
  })

  it('says nothing, and throws nothing, when both streams fail', () => {
    const stdout = new FailingStream(0, 'throws')
    const stderr = new FailingStream(0, 'throws')
    const output = consoleWriters({ stdout, stderr })
    expect(() => output.stdout('a\n')).not.toThrow()
    expect(() => output.stderr('b\n')).not.toThrow()
    expect([stdout.taken, stderr.taken]).toEqual([[], []])
  })

  it('serves on while its terminal is not read (Ctrl-S, a stalled ssh session): before, every request was held once the terminal took no more (attack67 F4)', async () => {
    const port = await freePort()
    // A terminal (a pseudo-terminal, python's) whose output nobody reads: the server's standard output and error.
    const terminal = 'import pty, subprocess, sys\nm, s = pty.openpty()\np = subprocess.Popen(sys.argv[1:], stdout=s, stderr=s, stdin=subprocess.DEVNULL)\nprint(p.pid, flush=True)\np.wait()\n'
    const child = spawn('python3', ['-c', terminal, process.execPath, join(ROOT, CLI_BINARY), 'serve', '--port', String(port), '--any-key'], { stdio: ['ignore', 'pipe', 'inherit'] })
    let pid = 0
    child.stdout.setEncoding('utf8').on('data', (text: string) => (pid ||= Number.parseInt(text, 10)))
    onTestFinished(() => {
      if (pid > 0) process.kill(pid, 'SIGKILL')
      child.kill('SIGKILL')
    })
    const origin = `http://127.0.0.1:${port}`
    const list = () => fetch(`${origin}/v1/categories`, { headers: { authorization: 'Bearer tty' }, signal: AbortSignal.timeout(5000) }).then((response) => response.status)
    await expect.poll(() => list().catch(() => 0), { timeout: 20_000, interval: 200 }).toBe(200)
    // A few hundred lines fill what the terminal takes (before: stuck after about 150 requests).
    for (let i = 0; i < 600; i++) expect(await list()).toBe(200)
    expect((await fetch(`${origin}/__sandbox/health`, { signal: AbortSignal.timeout(5000) })).status).toBe(200)
  })

  it('serves on once the reader of its request log’s pipe has gone (`serve | head`): before, exit 1 at the next request (attack33 F2)', async () => {
    const run = runCli(['serve', '--port', '0'])
    await run.waitFor(READY)
    const origin = /http:\/\/127\.0\.0\.1:\d+/.exec(run.stdout())![0]
    // The pipe's read end closed: the server's next line fails with EPIPE.
    run.child.stdout!.destroy()
    for (let i = 0; i < 20; i++) expect(await listed(origin)).toBe(200)
    // @note Polled 10 s: by vitest's default second, missed under a loaded run (the line comes after the failed write).
    await expect.poll(() => run.stderr(), { timeout: 10_000 }).toContain('standard output (the request log) can no longer be written (EPIPE)')
    expect(await listed(origin)).toBe(200)
    expect(run.child.exitCode).toBe(null)
  })

  it('serves on once its request log’s file can no longer grow (a file-size limit, as a full disk): before, exit 1 (attack33 F2)', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'petstore-log-'))
    onTestFinished(() => rm(dir, { recursive: true, force: true }))
    const port = await freePort()
    // 16 KiB of log at most (bash's ulimit -f counts KiB): the banner and about a hundred request lines.
    const child = spawn('bash', ['-c', `ulimit -f 16 && exec "${process.execPath}" ${CLI_BINARY} serve --port ${port} > "${join(dir, 'sandbox.log')}"`], { cwd: ROOT, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'ignore', 'pipe'] })
    let stderr = ''
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk))
    onTestFinished(() => void child.kill('SIGKILL'))
    const origin = `http://127.0.0.1:${port}`
    await expect.poll(() => listed(origin).catch(() => 0), { timeout: 30_000 }).toBe(200)
    const statuses: number[] = []
    for (let i = 0; i < 300; i++) statuses.push(await listed(origin))
    expect(statuses.filter((status) => status !== 200)).toEqual([])
    expect(stderr).toContain('standard output (the request log) can no longer be written (EFBIG)')
    expect(child.exitCode).toBe(null)
  })
})
