/**
 * A TCP proxy on loopback in front of a real redis-server that can act out how a Redis dies
 * under kill -9: its open connections drop, and the next connections it accepts are reset a
 * moment later, before it has answered anything (the dying process's listening socket still
 * completes TCP handshakes). Stopped when the test that started it ends.
 */
import { createServer, connect, type Server, type Socket } from 'node:net'
import { onTestFinished } from 'vitest'

export interface FlakyProxy {
  readonly port: number
  /** `redis://127.0.0.1:<proxy port>` */
  readonly url: string
  /**
   * Drops every open connection (a reset, as when the server dies), and resets the next `count`
   * connections accepted `afterMs` after they open, without passing anything to Redis.
   */
  crash(count: number, afterMs?: number): void
  /** How many connections were reset without reaching Redis so far. */
  readonly resets: number
  /** How many connections were passed on to Redis so far. */
  readonly passed: number
  /**
   * Arms one cut of the connection that next sends a command containing `marker`: `after` passes
   * the command to Redis and resets the connection in place of its reply (a Redis that applied a
   * write and died before answering), then runs `onCut`; `before` resets it without passing the
   * command on.
   */
  cut(marker: string, when: 'before' | 'after', onCut?: () => void): void
  /** Runs `hook` once, just before passing on the next command containing `marker` (to freeze Redis as it arrives). */
  onCommand(marker: string, hook: () => void): void
  /**
   * Stops passing anything either way on the connections open now, without closing them (a
   * connection a middlebox silently forgot, or a peer wedged): Redis stays healthy and new
   * connections are served as before.
   */
  stall(): void
}

export async function startFlakyProxy(upstreamPort: number): Promise<FlakyProxy> {
  const open = new Set<Socket>()
  let doomed = 0
  let resetAfterMs = 20
  let resets = 0
  let passed = 0
  let armed: { marker: string; when: 'before' | 'after' | (() => void); onCut?: (() => void) | undefined } | undefined
  /** Client sockets whose traffic is no longer passed on (see `stall`). */
  const stalled = new WeakSet<Socket>()
  const server: Server = createServer((client) => {
    open.add(client)
    client.once('close', () => open.delete(client))
    client.on('error', () => undefined)
    if (doomed > 0) {
      doomed--
      // Accepted but never served: what reaches a dying Redis is read and then reset.
      client.on('data', () => undefined)
      setTimeout(() => {
        resets++
        client.resetAndDestroy()
      }, resetAfterMs)
      return
    }
    passed++
    const upstream = connect(upstreamPort, '127.0.0.1')
    open.add(upstream)
    upstream.once('close', () => {
      open.delete(upstream)
      if (!client.destroyed) client.resetAndDestroy()
    })
    upstream.on('error', () => undefined)
    client.once('close', () => upstream.destroy())
    let cutting: { onCut?: (() => void) | undefined } | undefined
    client.on('data', (chunk: Buffer) => {
      if (stalled.has(client)) return
      if (armed !== undefined && chunk.includes(armed.marker)) {
        const { when, onCut } = armed
        armed = undefined
        if (when === 'before') return void client.resetAndDestroy()
        if (when === 'after') cutting = { onCut }
        else when()
      }
      upstream.write(chunk)
    })
    upstream.on('data', (chunk: Buffer) => {
      if (stalled.has(client)) return
      if (cutting === undefined) return void client.write(chunk)
      client.resetAndDestroy()
      cutting.onCut?.()
      cutting = undefined
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  onTestFinished(async () => {
    for (const socket of open) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    crash(count, afterMs = 20) {
      doomed = count
      resetAfterMs = afterMs
      for (const socket of [...open]) socket.resetAndDestroy()
    },
    get resets() {
      return resets
    },
    get passed() {
      return passed
    },
    cut(marker, when, onCut) {
      armed = { marker, when, onCut }
    },
    onCommand(marker, hook) {
      armed = { marker, when: hook }
    },
    stall() {
      for (const socket of open) stalled.add(socket)
    },
  }
}
