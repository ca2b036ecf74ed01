/**
 * The Node server a sandbox listens with: its timeouts actually enforced, a connection cap that
 * still lets health checks through, and Node's own error answers stamped like ours. The app never
 * listens; this builds the server the CLI (or a test) binds.
 */
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { answerClientErrors, stampPlainly, type RefusalHooks } from './client-errors.js'
import { sendError } from '../node-bridge/http-errors.js'

/** How long a client may take to send its headers, in ms; then 408 and the connection closes. @default 10000 */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000
/** How long a client may take to send its whole request, in ms; then 408. @default 30000 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** Open connections served; past it, requests other than health checks get 503 `over_capacity`. @default 1000 */
export const DEFAULT_MAX_CONNECTIONS = 1000
/**
 * Connections accepted past the cap, so that a health check can still get in and others learn
 * why they are refused; past cap + reserve, Node closes new connections at once.
 */
export const CONNECTION_RESERVE = 256

/** The server-level limits. */
export interface ServerLimits {
  readonly headersTimeoutMs: number
  readonly requestTimeoutMs: number
  readonly maxConnections: number
}

/**
 * How often Node checks its timeouts: a tenth of the shorter one, from 50 ms to 1 s.
 * @note Node checks `headersTimeout` and `requestTimeout` only every `connectionsCheckingInterval`,
 * 30 s by default: a 10 s header timeout then cut trickled headers at 29.9 s, a 30 s request
 * timeout bodies at 56.8 s.
 */
export function checkingInterval(limits: ServerLimits): number {
  return Math.max(50, Math.min(1000, Math.floor(Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs) / 10)))
}

/** Builds (does not start) the HTTP server for `listener`; `healthPath` is answered even over the cap. */
export function createSandboxServer(listener: RequestListener, limits: ServerLimits, healthPath: string, hooks: RefusalHooks = {}): Server {
  let open = 0
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: checkingInterval(limits),
    },
    (req: IncomingMessage, res: ServerResponse) => {
      if (open > limits.maxConnections && (req.url ?? '').split('?', 1)[0] !== healthPath) {
        ;(hooks.stamp ?? stampPlainly)(req, res)
        res.setHeader('Retry-After', '1')
        res.setHeader('Connection', 'close')
        sendError(res, 'over_capacity', { reason: `more than ${limits.maxConnections} connections are open`, retryAfter: 1 })
        return
      }
      listener(req, res)
    },
  )
  // @note A client that half-closes its connection (sends FIN) after a complete request still
  // gets its answer: by default Node ends the connection at the FIN, and an answer not yet written
  // (a create being committed to SQLite or Redis) never left, though the write was applied.
  // Allowed half open, Node ends the connection after the last answer instead.
  ;(server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true
  server.on('connection', (socket: Socket) => {
    open++
    socket.once('close', () => open--)
  })
  // @note The hard cap: past it Node closes new connections before reading them, which keeps the
  // process within its file descriptors however many sockets a client opens.
  server.maxConnections = limits.maxConnections + CONNECTION_RESERVE
  answerClientErrors(server, hooks)
  return server
}
