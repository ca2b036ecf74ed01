/**
 * TCP self-connects to Redis's port dropped as they open. While nothing listens on a port of this
 * host inside the ephemeral range (Linux's 32768-60999: a Redis down), a connection to it may be
 * given that very port as its own end, and the kernel joins it to itself (a simultaneous open):
 * every byte sent comes back as the answer, and the port stays held. Go's `net` dials again in
 * that case; node-redis does not look.
 * @note A self-connected client read its own `CONFIG GET` as the eviction policy ("its
 * maxmemory-policy is GET"), then its own `GET` of the epoch token as another token: storage lost
 * for good, every request 503 until restarted, and Redis, restarted, could not bind its port while
 * the sandbox held it (attack78 F2, 4 of 4 runs with the port inside a narrowed range).
 */
import { subscribe, unsubscribe } from 'node:diagnostics_channel'
import type { Socket } from 'node:net'

/** Node's channel for each TCP (or pipe) client socket made by `net.connect`, before it connects. */
const CLIENT_SOCKETS = 'net.client.socket'

/** The error a self-connected socket is destroyed with: nothing written to it reached any server. */
export class SelfConnected extends Error {}

/** The ports watched, by who watches them (each link's clients: see {@link dropSelfConnects}). */
const watchers = new Set<() => Iterable<number>>()

const watched = (port: number): boolean => {
  for (const ports of watchers) for (const each of ports()) if (each === port) return true
  return false
}

const onClientSocket = (message: unknown): void => {
  const { socket } = message as { readonly socket: Socket }
  socket.once('connect', () => {
    const { localAddress, localPort, remoteAddress, remotePort } = socket
    if (remotePort === undefined || localPort !== remotePort || localAddress !== remoteAddress || !watched(remotePort)) return
    // @note In the next check phase, not now: the client's own 'connect' listener, which runs after
    // this one, would take a socket destroyed now for connected, and it would wait forever on it.
    // By then it listens for the socket's errors and has written none of the commands it was asked
    // for (node-redis writes them in an immediate set after this one; only its greeting, AUTH or
    // SELECT when the URL has them, may be out, read back by nobody), and the poll phase that would
    // read the echo is still to come: it sees a connection that failed, and dials again.
    // @note TLS (`rediss://`) sockets are not announced on this channel (`tls.connect`); meeting
    // itself, such a connection fails its handshake (its own ClientHello read back) and is dialed again.
    // @note Reset (RST), not closed: closed, the socket sat 60 s in TIME-WAIT on Redis's port, and Redis could not bind it
    // again for that long (attack81 F1: 4 of 4 runs). Its error said first, to the client's listener (a second error,
    // the reset failing, is nobody's to hear: never a crash).
    setImmediate(() => {
      socket.on('error', () => undefined)
      socket.emit('error', new SelfConnected(`the connection to ${remoteAddress}:${remotePort} met itself (a TCP self-connect: nothing listens on the port, which is inside this host's ephemeral range); dropped, dialing again`))
      try {
        socket.resetAndDestroy()
      } catch {
        socket.destroy()
      }
    })
  })
}

/**
 * Drops every client connection that meets itself on one of the ports `ports` gives (read at each
 * connection), until the returned function is called.
 */
export function dropSelfConnects(ports: () => Iterable<number>): () => void {
  if (watchers.size === 0) subscribe(CLIENT_SOCKETS, onClientSocket)
  const watcher = () => ports()
  watchers.add(watcher)
  return () => {
    if (!watchers.delete(watcher)) return
    if (watchers.size === 0) unsubscribe(CLIENT_SOCKETS, onClientSocket)
  }
}
