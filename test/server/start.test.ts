/**
 * What a start loads (issue 14, target 4): the API answers before express is read, and whatever
 * needs express (the admin API, 404s, `sandbox.app`) still answers as before, even as the very
 * first request. Each case runs in a fresh process, since a module once loaded stays loaded.
 */
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it, onTestFinished } from 'vitest'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

async function probe(...steps: string[]): Promise<Array<Record<string, unknown>>> {
  const { stdout } = await promisify(execFile)(process.execPath, ['test/support/start-probe.mjs', ...steps], { cwd: ROOT })
  return stdout.trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>)
}

describe('start: express loads on first use', () => {
  it('answers the API without loading express, and the admin API after it, loading express then', async () => {
    const [start, api, admin] = await probe('api', 'admin')
    expect(start).toEqual({ step: 'start', express: false })
    expect(api).toMatchObject({ step: 'api', status: 200, express: false })
    expect((api!['body'] as unknown[]).length).toBeGreaterThan(0)
    expect(admin).toMatchObject({ step: 'admin', status: 200, body: { status: 'ok', storage: { kind: 'memory', ok: true } }, express: true })
  }, 30_000)

  it('serves an admin request that comes first, and a 404 in the Error body', async () => {
    const [, admin, missing, api] = await probe('admin', 'missing', 'api')
    expect(admin).toMatchObject({ status: 200, body: { status: 'ok' } })
    expect(missing).toMatchObject({ status: 404, body: { code: 'not_found', status: 404 } })
    expect(api).toMatchObject({ status: 200 })
  }, 30_000)

  it('loads express when sandbox.app is first read, and it is an express app', async () => {
    const [, app] = await probe('app')
    expect(app).toEqual({ step: 'app', express: false, appIsFunction: true, after: true })
  }, 30_000)
})

describe('npm start', () => {
  it('stops once npm has ended, as a script does with `npm start & … kill $!`, instead of keeping its port (new-user trial P6)', async () => {
    const { spawn } = await import('node:child_process')
    const { freePort } = await import('../support/redis-server.js')
    const port = await freePort()
    // Its own process group, so that whatever it leaves running is stopped after the test.
    const npm = spawn('npm', ['start', '--', '--port', String(port)], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], detached: true })
    onTestFinished(() => {
      try {
        process.kill(-npm.pid!, 'SIGKILL')
      } catch {
        // Every process of the group has exited.
      }
    })
    let out = ''
    npm.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk))
    npm.stderr.setEncoding('utf8').on('data', (chunk: string) => (out += chunk))
    const answers = () => fetch(`http://127.0.0.1:${port}/__sandbox/health`).then((response) => response.status, () => 0)
    for (let attempt = 0; (await answers()) !== 200; attempt++) {
      if (attempt > 200) throw new Error(`npm start did not answer:\n${out}`)
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    npm.kill('SIGTERM')
    let status = 200
    for (let attempt = 0; attempt < 100 && status !== 0; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      status = await answers()
    }
    expect(status).toBe(0)
    expect(out).toContain('the npm script that started it has ended: stopping')
  }, 40_000)
})
