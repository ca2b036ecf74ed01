/**
 * A TCP proxy on loopback in front of a real redis-server that can act out how a Redis dies
 * under kill -9: its open connections drop, and the next connections it accepts are reset a
 * moment later, before it has answered anything (the dying process's listening socket still
 * completes TCP handshakes); or that holds one connection's bytes and delivers them later, as a
 * stuck network path and the kernel's retransmissions do. Stopped when the test that started it ends.
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
  /**
   * Resets every client connection open now while keeping its connection to Redis open and silent
   * (a NAT or load balancer that failed over: the client reconnects, and Redis keeps the old link
   * until its own timeout).
   */
  forsake(): void
  /**
   * Holds the connection that next sends a command containing `marker`, from that command on: what
   * it sends, and its close, are kept from Redis (a network path that stalls one flow), while its
   * other connections are served. {@link deliver} passes them on.
   */
  hold(marker: string): void
  /**
   * Passes on, in order, what the held connection sent and its close (the kernel's retransmission
   * of an abandoned socket's bytes); settles once Redis has answered them or closed it.
   */
  deliver(): Promise<void>
  /**
   * Points the proxy at another server on loopback (a virtual IP or DNS name moved): every
   * connection open now is reset, and the next ones go to `upstreamPort`.
   */
  moveTo(upstreamPort: number): void
}

export async function startFlakyProxy(firstPort: number): Promise<FlakyProxy> {
  let upstreamPort = firstPort
  const open = new Set<Socket>()
  let doomed = 0
  let resetAfterMs = 20
  let resets = 0
  let passed = 0
  let armed: { marker: string; when: 'before' | 'after' | 'hold' | (() => void); onCut?: (() => void) | undefined } | undefined
  /** The held connection: its chunks not passed on yet, and whether it closed meanwhile. */
  let held: { client: Socket; upstream: Socket; chunks: Buffer[]; closed: boolean } | undefined
  /** Client sockets whose traffic is no longer passed on (see `stall`). */
  const stalled = new WeakSet<Socket>()
  /** Client sockets reset with their Redis side left open (see `forsake`), by their Redis side. */
  const forsaken = new WeakSet<Socket>()
  const clients = new Map<Socket, Socket>()
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
    clients.set(client, upstream)
    client.once('close', () => {
      clients.delete(client)
      if (held?.client === client) held.closed = true
      else if (!forsaken.has(client)) upstream.destroy()
    })
    let cutting: { onCut?: (() => void) | undefined } | undefined
    client.on('data', (chunk: Buffer) => {
      if (stalled.has(client)) return
      if (held?.client === client) return void held.chunks.push(chunk)
      if (armed !== undefined && chunk.includes(armed.marker)) {
        const { when, onCut } = armed
        armed = undefined
        if (when === 'hold') return void (held = { client, upstream, chunks: [chunk], closed: false })
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
    forsake() {
      for (const client of [...clients.keys()]) {
        forsaken.add(client)
        stalled.add(client)
        client.resetAndDestroy()
      }
    },
    hold(marker) {
      armed = { marker, when: 'hold' }
    },
    moveTo(port) {
      upstreamPort = port
      for (const socket of [...open]) socket.resetAndDestroy()
    },
    async deliver() {
      if (held === undefined) throw new Error('no connection is held')
      const { upstream, chunks, closed } = held
      held = undefined
      const answered = new Promise<void>((resolve) => {
        upstream.once('data', () => resolve())
        upstream.once('close', () => resolve())
      })
      for (const chunk of chunks) upstream.write(chunk)
      if (closed) upstream.end()
      await answered
      // Redis runs what one read brought in before it reads the close.
      if (closed && !upstream.closed) await new Promise((resolve) => upstream.once('close', resolve))
    },
  }
}
