/**
 * The Node server a sandbox listens with: its timeouts actually enforced, a connection cap that
 * still lets health checks through, and Node's own error answers stamped like ours. The app never
 * listens; this builds the server the CLI (or a test) binds.
 */
import { closeAfter, closedAfter } from './conversation.js'
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http'
import { readdirSync, readFileSync } from 'node:fs'
import type { Socket } from 'node:net'
import { answerClientErrors, stampPlainly, type RefusalHooks } from './client-errors.js'
import { resetConnection, sendError } from '../node-bridge/http-errors.js'
import { WAITING } from '../node-bridge/node-request.js'
import { readBearer } from '../core/auth.js'
import { monotonicNow } from '../core/clock.js'

/** How long a client may take to send its headers, in ms; then 408 and the connection closes. @default 10000 */
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000
/** How long a client may take to send its whole request, in ms; then 408. @default 30000 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000
/** Open connections served; past it, requests other than health checks get 503 `over_capacity`. @default 1000 */
export const DEFAULT_MAX_CONNECTIONS = 1000
/**
 * Connections accepted past the cap, so that a health check can still get in and others learn
 * why they are refused; past cap + reserve, a new connection takes the place of one that costs its
 * client least, or is closed at once (`ConnectionShares.door`).
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

/** An open connection, as the cap shares connections between the keys using them. */
interface Connection {
  readonly socket: Socket
  /** The key of its latest request ('' without one): the tenant it counts for. */
  key: string | undefined
  /** Requests not yet answered (or dropped). */
  inFlight: number
  /** The client sent its FIN: it sends nothing more. */
  halfClosed: boolean
  /** Ends its request's delay, while it waits one. */
  cut: ((reason: string) => void) | undefined
  /** Its latest request: while its body is still arriving, nothing of it has run. */
  request: IncomingMessage | undefined
  /** When its latest request's head arrived ({@link monotonicNow} ms). */
  requestAt: number
  /** When it was accepted ({@link monotonicNow} ms). */
  readonly openedAt: number
}

/** A connection that has sent no request this long (ms) after connecting may be ended for a new one past the hard limit. */
const SILENT_MS = 1000

/**
 * The connections by the key of their latest request, and the share rule at the cap (attack7 K3):
 * one key's connections, delayed requests or not, never keep another key's request out.
 */
/** How many health checks' connections are sheltered at once ({@link ConnectionShares.probes}). */
const PROBES = 4

class ConnectionShares {
  readonly #byKey = new Map<string, Set<Connection>>()
  /** Since when each key has held connections without a break ({@link monotonicNow} ms): a key's age, for the door. */
  readonly #since = new Map<string, number>()

  /**
   * The connections of the latest health checks ({@link PROBES} at most, the latest last), each while it asks nothing
   * else: never ended for another (a health probe's keep-alive connection), whatever its key's share.
   * @note Closed idle for a partner past the cap, the probe's next check raced its close and
   * failed (`other side closed`: a health check lost during a crowd of delayed requests, stop 41's
   * CI). A few only: a crowd sending health checks cannot shelter its connections so.
   * @note One only, any other client asking health (a second balancer node, a liveness and a readiness probe, a
   * monitor) took it from the balancer's probe, whose connection was closed for partners again (attack51 F3).
   */
  readonly probes = new Set<Connection>()

  /** `connection` asked health last (sheltered), or something else (not). */
  noteProbe(connection: Connection, health: boolean): void {
    this.probes.delete(connection)
    if (!health) return
    this.probes.add(connection)
    if (this.probes.size > PROBES) this.probes.delete(this.probes.values().next().value!)
  }

  constructor(readonly maxConnections: number) {}

  /** `connection` now counts for `key`. */
  assign(connection: Connection, key: string): void {
    if (connection.key === key) return
    this.remove(connection)
    connection.key = key
    let set = this.#byKey.get(key)
    if (set === undefined) {
      this.#byKey.set(key, (set = new Set()))
      this.#since.set(key, monotonicNow())
    }
    set.add(connection)
  }

  remove(connection: Connection): void {
    if (connection.key === undefined) return
    const set = this.#byKey.get(connection.key)
    set?.delete(connection)
    if (set?.size === 0) {
      this.#byKey.delete(connection.key)
      this.#since.delete(connection.key)
    }
    connection.key = undefined
  }

  /** A key's fair share of the cap: the cap split between the keys with connections, at least 1. */
  share(): number {
    return Math.max(1, Math.floor(this.maxConnections / Math.max(1, this.#byKey.size)))
  }

  /** How many connections count for `key`. */
  held(key: string): number {
    return this.#byKey.get(key)?.size ?? 0
  }

  /**
   * The connection to end for a new one when every place up to Node's hard limit (cap + reserve)
   * is taken, or undefined when none may be. The first found, in this order, of: one that has sent
   * no request for {@link SILENT_MS} since it connected (the oldest: a client that connects and
   * sends nothing); of a key that is none (no accepted key) or beyond its share, an idle one (no
   * request in flight), one waiting out a delay, one whose request body is still arriving (of the
   * key holding the most, the one arriving longest); with more keys than the cap (every key at its
   * share of 1), an idle one of the youngest key; then one that has sent nothing yet, however
   * young (the oldest: a partner's whose request is on its way is the youngest); then of any key,
   * an idle one (of the youngest key), a delay, a body arriving. Never a request running nor an
   * answer being read.
   * @note Node refused every new connection past the hard limit before reading it: cap + reserve
   * connections that sent nothing for the headers timeout, renewed, or (with `--any-key`) slow
   * bodies under as many keys, kept every partner and the health probe out (attack11 K3, C5).
   * @note A partner's idle keep-alive connection came before a silent connection younger than a
   * second: a flood reopening its connections within the second reset partners' connections and
   * kept the health probe out (attack14 D1).
   * @note With `--any-key`, a crowd of invented tokens, each one request then idle, made every key
   * one at its share: the young silent connection went first (a partner's fresh connection, the
   * health probe), then the oldest idle one (a partner's keep-alive connection) (attack16 K1). A
   * key's age is how long it has held connections: a crowd that reopens its connections is young.
   */
  door(all: Iterable<Connection>): Connection | undefined {
    const now = monotonicNow()
    const share = this.share()
    const crowded = this.#byKey.size > this.maxConnections
    /** The idle connection whose latest request came longest ago: a crowd's, not a partner's busy keep-alive one. */
    let youngestIdle: Connection | undefined
    // [idle, delayed, receiving], of keys none or beyond their share, then of any key.
    const expendable: (Connection | undefined)[] = [undefined, undefined, undefined]
    const any: (Connection | undefined)[] = [undefined, undefined, undefined]
    let young: Connection | undefined
    for (const connection of all) {
      if (connection.socket.destroyed || this.probes.has(connection)) continue
      if (connection.request === undefined) {
        // Oldest first: the first silent one found is the oldest.
        if (now - connection.openedAt >= SILENT_MS) return connection
        young ??= connection
        continue
      }
      const kind = connection.cut !== undefined ? 1 : connection.inFlight === 0 ? 0 : connection.request.complete === false ? 2 : -1
      if (kind === -1) continue
      const over = connection.key === undefined || connection.key === '' || this.held(connection.key) > share
      // @note By the time of its latest request, not its key's age: a crowd that keeps its tokens is
      // older than a partner arriving after it, and took the partner's keep-alive connection (attack19 D1).
      if (kind === 0 && connection.key !== undefined && (youngestIdle === undefined || connection.requestAt < youngestIdle.requestAt)) youngestIdle = connection
      for (const found of over ? [expendable, any] : [any]) {
        const held = found[kind]
        if (held === undefined || (kind === 2 && (this.#weight(connection) > this.#weight(held) || (this.#weight(connection) === this.#weight(held) && connection.requestAt < held.requestAt)))) found[kind] = connection
      }
    }
    return expendable.find((connection) => connection !== undefined) ?? (crowded ? youngestIdle : undefined) ?? young ?? youngestIdle ?? any.find((connection) => connection !== undefined)
  }

  /** How many connections the key of `connection` holds. */
  #weight(connection: Connection): number {
    return connection.key === undefined ? 0 : this.held(connection.key)
  }

  /** Ends `connection` as {@link makeRoom} ends one (a delay cut, an idle one closed, a body reset). */
  end(connection: Connection): void {
    this.#end(connection)
  }

  /**
   * Makes room for a request of `key` (within its share) past the cap: ends one connection of the
   * key holding the most beyond its share (or, when there are more keys than the cap, so that
   * every key's share is 1, of any other key: attack9 C3), the first found of a half-closed one
   * waiting in a delay, an idle one (no request in flight), one waiting in a delay (`Prefer:
   * delay`, latency, a planned answer's), one whose request body is still arriving, one whose
   * answer its client does not take (Node's buffer for it is full). A delayed request's wait is
   * cut (answered 503 `over_capacity`, nothing run, its connection closed); an idle connection is
   * closed; one still sending its body (nothing of it has run: attack9 C2, slow bodies), or not
   * taking its answer (a long read: attack9 C4), is reset, of a key beyond its share only. False
   * when no such key has any of these (its requests are running in the store).
   */
  makeRoom(key: string): boolean {
    const share = this.share()
    const crowded = this.#byKey.size > this.maxConnections
    const candidates = [...this.#byKey].filter(([other, set]) => other !== key && (set.size > share || (crowded && set.size >= share)))
    // The largest first; of keys as large, the youngest (a crowd of invented tokens is younger than a partner: attack16 K1).
    candidates.sort(([aKey, a], [bKey, b]) => b.size - a.size || (this.#since.get(bKey) ?? 0) - (this.#since.get(aKey) ?? 0))
    // The first found of each kind, the largest key's first: the kind that costs its client least goes first, whichever key holds it.
    let idle: Connection | undefined
    let delayed: Connection | undefined
    let receiving: Connection | undefined
    let unread: Connection | undefined
    for (const [, set] of candidates) {
      // @note A key at its share (more keys than the cap) loses only what costs its client least
      // (an idle connection, a simulated delay): a crowd of keys each at its share reset a
      // partner's only upload or download, the oldest first (attack10 C1).
      const beyond = set.size > share
      for (const connection of set) {
        if (this.probes.has(connection)) continue
        if (connection.cut !== undefined && connection.halfClosed) return this.#end(connection)
        if (idle === undefined && connection.inFlight === 0) idle = connection
        if (delayed === undefined && connection.cut !== undefined) delayed = connection
        if (!beyond) continue
        if (receiving === undefined && connection.inFlight > 0 && connection.request?.complete === false) receiving = connection
        if (unread === undefined && connection.inFlight > 0 && connection.socket.writableNeedDrain) unread = connection
      }
      if (idle !== undefined) break
    }
    const chosen = idle ?? delayed ?? receiving ?? unread
    return chosen !== undefined && this.#end(chosen)
  }

  /**
   * Closes an idle connection (no request in flight) other than `except`, of `key` itself or else
   * of the key holding the most beyond its share: a key past its share may use the connection of
   * its own (or of a key past its share too) that waits for nothing. False when there is none.
   */
  closeIdle(key: string, except: Connection | undefined): boolean {
    // @note In a crowd (more keys than the cap, every key at its share of 1), a key that has held
    // connections longer keeps its own idle one, and a younger key's goes instead: a partner's
    // second connection closed its own keep-alive one among a crowd of invented tokens (attack16 K1).
    if (this.#byKey.size > this.maxConnections) {
      // The idle connection whose latest request came longest ago, of any key (attack19 D1: by key age, a crowd older than the partner won).
      let oldest: Connection | undefined
      for (const set of this.#byKey.values()) {
        for (const connection of set) {
          if (connection !== except && !this.probes.has(connection) && connection.inFlight === 0 && connection.cut === undefined && (oldest === undefined || connection.requestAt < oldest.requestAt)) oldest = connection
        }
      }
      if (oldest !== undefined) return this.#end(oldest)
    }
    const share = this.share()
    let most: Set<Connection> | undefined
    for (const [other, set] of this.#byKey) {
      if (other !== key && set.size > share && (most === undefined || set.size > most.size)) most = set
    }
    for (const set of [this.#byKey.get(key), most]) {
      for (const connection of set ?? []) {
        if (connection !== except && !this.probes.has(connection) && connection.inFlight === 0 && connection.cut === undefined) return this.#end(connection)
      }
    }
    return false
  }

  #end(connection: Connection): true {
    this.remove(connection)
    const cut = connection.cut
    connection.cut = undefined
    if (cut) cut(`another key needs a connection, and this key holds more than its share (${this.share()}) of ${this.maxConnections}`)
    else if (connection.inFlight === 0) connection.socket.destroy()
    // @note Reset: closed plainly, the kernel would go on sending megabytes to a client that reads nothing.
    else resetConnection(connection.socket)
    return true
  }
}

/** What the server is told beyond its refusals' hooks. */
export interface SandboxServerHooks extends RefusalHooks {
  /**
   * Whether a bearer token is a key the sandbox accepts (an API key, the admin token): only those
   * count as keys in the cap's shares; any other token counts with requests that carry none.
   * @default every token
   */
  readonly accepts?: ((token: string) => boolean) | undefined
  /**
   * Requests served past the cap whatever their key's share, as the health path is: answered at
   * once, holding nothing (a CORS preflight, which a browser sends without the key).
   * @default none
   */
  readonly pastCap?: ((req: IncomingMessage) => boolean) | undefined
  /** Told once, at creation, when the process may open fewer files than cap + reserve connections need. @default none */
  readonly warn?: ((message: string) => void) | undefined
  /** The process's limit on open files (`ulimit -n`), for the hard limit. @default read from /proc/self/limits (Linux), else none */
  readonly openFileLimit?: number | undefined
}

/** The most headers a request may carry, less one: one that carries this many is refused 400 (Node drops those past it unread). */
const MAX_HEADERS = 2000

/** Descriptors kept for what is not a client connection (the listener, the store's files, logs, Redis), at most. */
const FILE_HEADROOM = 64
/** Descriptors kept beyond those open when the server is built (files the store opens later, a Redis reconnecting). */
const FILE_MARGIN = 16

/**
 * How many descriptors to keep for what is not a client connection: those open now (the store's
 * files among them) and {@link FILE_MARGIN}, at most {@link FILE_HEADROOM}.
 * @note A fixed 64 served one connection at `ulimit -n 64`, where 26 were open (attack16 L1).
 */
function fileHeadroom(): number {
  try {
    return Math.min(FILE_HEADROOM, readdirSync('/proc/self/fd').length + FILE_MARGIN)
  } catch {
    return FILE_HEADROOM
  }
}

/** The soft limit on open files of this process (`ulimit -n`), from /proc/self/limits; undefined where it cannot be read or is unlimited. */
function readOpenFileLimit(): number | undefined {
  try {
    const line = /^Max open files\s+(\d+)/m.exec(readFileSync('/proc/self/limits', 'utf8'))
    return line === null ? undefined : Number(line[1])
  } catch {
    return undefined
  }
}

/** Builds (does not start) the HTTP server for `listener`; `healthPath` is answered even over the cap. */
export function createSandboxServer(listener: RequestListener, limits: ServerLimits, healthPath: string, hooks: SandboxServerHooks = {}): Server {
  let open = 0
  // @note Within the files the process may open: under a low `ulimit -n` accept() failed (EMFILE)
  // long before cap + reserve, so the door never opened and silent connections kept everyone out
  // (attack14 D2).
  const files = hooks.openFileLimit ?? readOpenFileLimit()
  let cap = limits.maxConnections
  let hardLimit = limits.maxConnections + CONNECTION_RESERVE
  const headroom = files !== undefined && files - FILE_HEADROOM < hardLimit ? fileHeadroom() : FILE_HEADROOM
  if (files !== undefined && files - headroom < hardLimit) {
    hardLimit = Math.max(2, files - headroom)
    // The cap below it, keeping a fifth as the reserve is kept above the cap.
    cap = Math.min(cap, hardLimit - Math.max(1, Math.floor(hardLimit / 5)))
    hooks.warn?.(`the process may open ${files} files (ulimit -n): it serves ${cap} connections (${hardLimit} open at most), not ${limits.maxConnections} + ${CONNECTION_RESERVE}; raise the limit (ulimit -n ${limits.maxConnections + CONNECTION_RESERVE + FILE_HEADROOM}) or lower --max-connections`)
  }
  const shares = new ConnectionShares(cap)
  const connections = new WeakMap<Socket, Connection>()
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: checkingInterval(limits),
      // @note Node's own refusal of a request without Host was a bare 400 with no body and no log
      // line (trial5 P8): refused here, as the error table says.
      requireHostHeader: false,
    },
    (req: IncomingMessage, res: ServerResponse) => {
      // A request pipelined behind one answered with `Connection: close`: not handled (see closeAfter).
      if (closedAfter(req)) return
      if (req.rawHeaders.length >= 2 * MAX_HEADERS) {
        ;(hooks.stamp ?? stampPlainly)(req, res)
        closeAfter(res)
        sendError(res, 'bad_request', { reason: `the request carries ${MAX_HEADERS} headers or more; the server reads fewer` })
        return
      }
      if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
        ;(hooks.stamp ?? stampPlainly)(req, res)
        closeAfter(res)
        sendError(res, 'bad_request', { reason: 'an HTTP/1.1 request must carry a Host header' })
        return
      }
      // @note Node reads nothing more of a connection after a request asking for an upgrade (no
      // `upgrade` listener: it is answered as any other): what the client pipelined behind it got no
      // answer until the keep-alive timeout (attack42 F5). Answered, the connection closes, saying so
      // (the conversation gives up what waits behind an answer that closes; not closeAfter, which
      // would give up this request too).
      if (req.headers.upgrade !== undefined && /(?:^|,)\s*upgrade\s*(?:,|$)/i.test(req.headers.connection ?? '')) {
        res.setHeader('Connection', 'close')
        res.shouldKeepAlive = false
      }
      const connection = connections.get(req.socket)
      const bearer = readBearer(req.headers.authorization ?? null)
      // @note Invented tokens are one key, not one each: a crowd of them, needing no key, shrank a
      // partner's share and got its connections reset (attack11 K1).
      const key = bearer.ok && (hooks.accepts?.(bearer.token) ?? true) ? bearer.token : ''
      const path = (req.url ?? '').split('?', 1)[0]
      if (connection !== undefined) {
        shares.assign(connection, key)
        shares.noteProbe(connection, path === healthPath)
      }
      // @note Past the cap, a key within its share is served, and a connection another key holds
      // beyond its own share is ended for it when one can be (attack7 K3: one key's 1,000 delayed
      // requests refused every partner); a key past its share is refused, unless an idle connection
      // of its own (or of a key past its share) can be closed for it. Node's hard cap (cap +
      // reserve) still bounds the connections.
      // @note A browser partner's preflights carry no key: refused with the anonymous crowd's
      // requests past the cap, its app's every fetch failed as a CORS error (attack12 K4).
      if (open > cap && path !== healthPath && hooks.pastCap?.(req) !== true) {
        if (shares.held(key) > shares.share() && !shares.closeIdle(key, connection)) {
          if (connection !== undefined) shares.remove(connection)
          ;(hooks.stamp ?? stampPlainly)(req, res)
          res.setHeader('Retry-After', '1')
          closeAfter(res)
          sendError(res, 'over_capacity', { reason: `more than ${cap} connections are open`, retryAfter: 1 })
          return
        }
        if (shares.held(key) <= shares.share()) shares.makeRoom(key)
      }
      if (connection !== undefined) {
        connection.request = req
        connection.requestAt = monotonicNow()
        connection.inFlight++
        res.once('close', () => connection.inFlight--)
        ;(req as IncomingMessage & { [WAITING]?: unknown })[WAITING] = (cut: (reason: string) => void) => {
          connection.cut = (reason) => {
            closeAfter(res)
            cut(reason)
          }
          return () => {
            connection.cut = undefined
          }
        }
      }
      listener(req, res)
    },
  )
  // @note A client that half-closes its connection (sends FIN) after a complete request still
  // gets its answer: by default Node ends the connection at the FIN, and an answer not yet written
  // (a create being committed to SQLite or Redis) never left, though the write was applied.
  // Allowed half open, Node ends the connection after the last answer instead.
  ;(server as Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true
  // @note Node reads this many headers and drops the rest unread (1,000 by default: a key after them
  // was answered 401 missing_api_key, attack36 F2); a request that reaches it is refused below. Not
  // unbounded: within the 16 KiB of names and values, 16,000 empty headers held ~1.6 MB a head.
  server.maxHeadersCount = MAX_HEADERS
  /** Every open connection, the oldest first. */
  const all = new Set<Connection>()
  server.on('connection', (socket: Socket) => {
    // @note The hard limit (cap + reserve, within the open-file limit) keeps the process within its
    // file descriptors however many sockets clients open: past it, a new connection takes the place
    // of one that costs its client least (see ConnectionShares.door), or is closed at once when none may be ended.
    if (all.size >= hardLimit) {
      const ended = shares.door(all)
      if (ended === undefined) {
        socket.destroy()
        return
      }
      all.delete(ended)
      if (ended.request === undefined) ended.socket.destroy()
      else shares.end(ended)
    }
    open++
    const connection: Connection = { socket, key: undefined, inFlight: 0, halfClosed: false, cut: undefined, request: undefined, requestAt: 0, openedAt: monotonicNow() }
    connections.set(socket, connection)
    all.add(connection)
    socket.once('end', () => (connection.halfClosed = true))
    socket.once('close', () => {
      open--
      all.delete(connection)
      shares.probes.delete(connection)
      shares.remove(connection)
    })
  })
  answerClientErrors(server, hooks)
  return server
}
