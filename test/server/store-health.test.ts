/**
 * The operator is told (issue 20): with a data directory on a full disk, health says degraded for
 * as long as writes fail, and the operator's log says failing once and recovered once.
 */
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { expectErrorBody } from '../support/openapi-validator.js'
import { auth, jsonOf, startSandbox, type RunningSandbox } from '../support/sandbox-server.js'
import { smallDisk, smallDiskAvailable } from '../support/small-disk.js'
import { unhandledRejections } from '../support/unhandled-rejections.js'

function post(sandbox: RunningSandbox, key: string, name: string): Promise<Response> {
  return sandbox.fetch('/v1/categories', { method: 'POST', headers: auth(key, true), body: JSON.stringify({ name }) })
}

async function health(sandbox: RunningSandbox): Promise<{ status: number; body: unknown }> {
  const response = await sandbox.fetch('/__sandbox/health')
  return { status: response.status, body: await jsonOf(response) }
}

describe.skipIf(!smallDiskAvailable)('health on a real small disk (tmpfs)', () => {
  it('says 503 degraded while creates fail on a full disk, and logs failing once and recovered once (issue 20 F09)', async () => {
    const rejections = unhandledRejections()
    const disk = smallDisk(512)
    const warnings: string[] = []
    const sandbox = await startSandbox({ apiKeys: ['k1'], scenario: 'empty', dataDir: join(disk.dir, 'data'), warn: (message) => warnings.push(message), nameMaxLength: 10_000, maxCategories: 1_000 })
    expect((await post(sandbox, 'k1', 'before')).status).toBe(201)
    expect(await health(sandbox)).toMatchObject({ status: 200, body: { status: 'ok', storage: { kind: 'sqlite', ok: true } } })
    disk.fill()
    let refused: Response | undefined
    for (let i = 0; i < 200 && !refused; i++) {
      const response = await post(sandbox, 'k1', `big-${i}-${'x'.repeat(8000)}`)
      if (response.status !== 201) refused = response
    }
    expectErrorBody(await jsonOf(refused!), 503, 'storage_unavailable')
    // Health probes and creates, in turn: every probe says degraded while the creates fail.
    for (let round = 0; round < 5; round++) {
      expect(await health(sandbox)).toMatchObject({ status: 503, body: { status: 'degraded', storage: { kind: 'sqlite', ok: false } } })
      expect((await post(sandbox, 'k1', `more-${round}-${'x'.repeat(8000)}`)).status).toBe(503)
    }
    const failing = () => warnings.filter((line) => line.startsWith('storage failing'))
    const recovered = () => warnings.filter((line) => line.startsWith('storage recovered'))
    expect(failing()).toHaveLength(1)
    expect(recovered()).toEqual([])
    disk.free()
    // Once there is room, the probe finds it: healthy again without waiting for a partner's write.
    expect(await health(sandbox)).toMatchObject({ status: 200, body: { status: 'ok' } })
    expect((await post(sandbox, 'k1', `after-${'x'.repeat(8000)}`)).status).toBe(201)
    expect(await health(sandbox)).toMatchObject({ status: 200, body: { status: 'ok' } })
    expect(failing()).toHaveLength(1)
    expect(recovered()).toHaveLength(1)
    expect(rejections).toEqual([])
  })
})
