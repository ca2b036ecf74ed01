// The standalone sandbox on a free loopback port (`serve --port 0` prints its URL), then the Next
// app on another, told the sandbox's URL through PETSTORE_API_URL. The tests read both URLs from
// the environment set here.
import { spawn, type ChildProcess } from 'node:child_process'
import { createServer } from 'node:net'

function start(command: string, args: string[], env: Record<string, string> = {}): { child: ChildProcess; output: () => string } {
  const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
  let output = ''
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()))
  return { child, output: () => output }
}

async function until<T>(what: string, found: () => T | undefined | Promise<T | undefined>, log: () => string): Promise<T> {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const value = await found()
    if (value !== undefined) return value
    await new Promise((resolve) => setTimeout(resolve, 200))
  }
  throw new Error(`${what} did not start within 60 s:\n${log()}`)
}

async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

export default async function globalSetup(): Promise<() => Promise<void>> {
  const started: ChildProcess[] = []
  const stop = async () => {
    for (const child of started.reverse()) if (child.pid && child.exitCode === null) process.kill(-child.pid, 'SIGTERM')
  }
  try {
    const sandbox = start('node_modules/.bin/petstore-sandbox', ['serve', '--port', '0', '--api-key', 't0ken'])
    started.push(sandbox.child)
    const api = await until('petstore-sandbox serve', () => /API +(http:\/\/\S+)/.exec(sandbox.output())?.[1], sandbox.output)

    const port = await freePort()
    const mode = process.env['NEXT_DEV'] === '1' ? 'dev' : 'start'
    const next = start('node_modules/.bin/next', [mode, '--port', String(port), '--hostname', '127.0.0.1'], {
      PETSTORE_API_URL: api,
      PETSTORE_API_KEY: 't0ken',
    })
    started.push(next.child)
    const app = `http://127.0.0.1:${port}`
    await until(`next ${mode}`, async () => ((await fetch(app).catch(() => undefined))?.ok ? true : undefined), next.output)

    process.env['APP_URL'] = app
    process.env['PETSTORE_API_URL'] = api
    return stop
  } catch (error) {
    await stop() // nothing left running when a server fails to start
    throw error
  }
}
