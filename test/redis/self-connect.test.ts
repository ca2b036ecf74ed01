/**
 * A sandbox on a Redis of the same host whose port is inside the ephemeral range: while Redis is
 * down, a connection to its port may meet itself (a TCP self-connect). The sandbox drops it and
 * dials again, and serves its tenants' data once Redis is back (attack78 F2). Real processes in a
 * network namespace of their own (`unshare -rn`), whose ephemeral range is narrowed to Redis's port
 * while it is down, so that every connection to it meets itself.
 */
import { execFileSync, spawnSync } from 'node:child_process'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createServer, type Socket } from 'node:net'
import { describe, expect, it } from 'vitest'
import { HAVE_REDIS, removeDir, REQUIRE_REDIS, startRedis } from '../support/redis-server.js'
import { auth, startSandbox } from '../support/sandbox-server.js'

const CLI = fileURLToPath(new URL('../../dist/cli.js', import.meta.url))
const RIG = fileURLToPath(new URL('../support/self-connect-rig.mjs', import.meta.url))

/** Whether this machine gives a process a network namespace of its own (Linux, user namespaces allowed, iproute2). */
const CAN_UNSHARE = process.platform === 'linux' && spawnSync('unshare', ['-rn', 'ip', 'link', 'set', 'lo', 'up']).status === 0

interface RigResult {
  readonly sockets: string
  readonly created: number[]
  readonly whileDown: number[]
  readonly restarted: boolean
  readonly restartTries: number
  readonly after: { readonly status: number; readonly body: string }
  readonly log: string
}

describe('a TCP self-connect to Redis’s port while Redis is down', () => {
  it.runIf(REQUIRE_REDIS || (HAVE_REDIS && CAN_UNSHARE))(
    'is reset and dialed again: Redis restarts on its port at once, and the sandbox serves what its tenant created before (attack78 F2, attack81 F1)',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'petstore-self-connect-'))
      try {
        const output = execFileSync('unshare', ['-rn', 'sh', '-c', 'ip link set lo up && exec "$0" "$@"', process.execPath, RIG, CLI, dir], { encoding: 'utf8', timeout: 60_000 })
        const result = JSON.parse(output) as RigResult
        const said = `sockets while Redis was down:\n${result.sockets}\nsandbox's output:\n${result.log}`
        expect(result.created, said).toEqual([201, 201, 201])
        expect(result.whileDown.every((status) => status === 503), said).toBe(true)
        // Before: the sandbox held Redis's port, joined to itself, and Redis could not bind it (10 tries of 10); then, the
        // connection closed rather than reset, its TIME-WAIT held the port 60 s (attack81 F1).
        expect(result.restarted, said).toBe(true)
        // Before: 503 "until the sandbox is restarted": its own GET of the epoch token, read back, was taken for another token (storage lost).
        expect(result.after.status, said).toBe(200)
        expect((JSON.parse(result.after.body) as { name: string }[]).map((category) => category.name).slice(-3)).toEqual(['one', 'two', 'three'])
        expect(result.log).not.toContain('storage lost')
      } finally {
        removeDir(dir)
      }
    },
    90_000,
  )

  it.runIf(REQUIRE_REDIS || HAVE_REDIS).each(['sends every byte back', 'answers +OK to everything'])(
    'takes a peer on Redis’s port that %s for no Redis: dials again, never storage lost, and serves once Redis is back (attack81 F2)',
    async (what) => {
      const redis = await startRedis({ aof: true })
      const warnings: string[] = []
      const sandbox = await startSandbox({ redisUrl: redis.url, apiKeys: ['k1'], warn: (line) => warnings.push(line) })
      for (const name of ['one', 'two', 'three']) {
        const created = await sandbox.fetch('/v1/categories', { method: 'POST', headers: auth('k1', true), body: JSON.stringify({ name }) })
        expect(created.status).toBe(201)
      }
      await redis.stop('SIGKILL')
      // What answers on Redis's port meanwhile: a forwarder whose own connection met itself sends the commands back.
      const peers = new Set<Socket>()
      const peer = createServer((socket) => {
        peers.add(socket)
        socket.on('error', () => undefined)
        if (what === 'sends every byte back') socket.pipe(socket)
        else socket.on('data', (data: Buffer) => socket.write('+OK\r\n'.repeat(Math.max(1, data.toString('latin1').split('*').length - 1))))
      })
      await new Promise<void>((resolve) => peer.listen(redis.port, '127.0.0.1', resolve))
      for (let i = 0; i < 12; i++) {
        await sandbox.fetch('/v1/categories', { headers: auth('k1') }).then((response) => response.arrayBuffer())
        await new Promise((resolve) => setTimeout(resolve, 250))
      }
      for (const socket of peers) socket.destroy()
      await new Promise((resolve) => peer.close(resolve))
      await redis.start()
      let status = 0
      let names: string[] = []
      for (let i = 0; i < 60 && status !== 200; i++) {
        const response = await sandbox.fetch('/v1/categories', { headers: auth('k1') })
        status = response.status
        if (status === 200) names = ((await response.json()) as { name: string }[]).map((category) => category.name)
        else await new Promise((resolve) => setTimeout(resolve, 250))
      }
      // Before: "storage lost: ... holds another token", every request 503 until the sandbox was restarted.
      expect(warnings.filter((line) => line.includes('storage lost'))).toEqual([])
      expect(status).toBe(200)
      expect(names.slice(-3)).toEqual(['one', 'two', 'three'])
    },
    60_000,
  )
})
