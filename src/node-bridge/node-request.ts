/**
 * Node's `IncomingMessage` as the pipeline's {@link ApiRequest}: headers read in place and the
 * body read from the stream, bounded, with the core's own rules for size and UTF-8.
 */
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http'
import { decodeUtf8, payloadTooLarge, type RawBody } from '../pipeline/request-body.js'
import type { ApiRequest, HeaderReader } from '../pipeline/api-request.js'
import { headerWeight } from '../core/journal.js'
import type { ErrorCode, ErrorParams } from '../contract/errors.js'
import { OverCapacityError } from '../core/capacity.js'
import { loopTurns } from './event-loop-turns.js'

/** A Host header that can stand in a URL as it is (a name or address, an optional port). */
export const PLAIN_HOST = /^(?:[\w.-]+|\[[\da-f:.]+\])(?::\d{1,5})?$/i

/** The parts of a request's URL the pipeline reads, as a URL parser normalises them. */
export interface RequestUrl {
  /** The absolute URL. */
  readonly href: string
  /** Its path, without the query. */
  readonly pathname: string
}

/**
 * URLs recently read, by protocol, Host and target: clients ask for the same few URLs over and
 * over, and parsing one cost as much as the rest of routing. Emptied when full.
 */
const parsedUrls = new Map<string, RequestUrl | undefined>()
const PARSED_URLS_KEPT = 512
const CACHED_TARGET_LENGTH = 256

/** The request's URL parts, or undefined when its target cannot be parsed. */
export function requestUrl(req: IncomingMessage): RequestUrl | undefined {
  const protocol = 'encrypted' in req.socket && req.socket.encrypted ? 'https' : 'http'
  const target = req.url ?? '/'
  const host = req.headers.host
  // Long targets (queries) are parsed each time: the map stays small.
  if (target.length + (host?.length ?? 0) > CACHED_TARGET_LENGTH) return parseUrl(protocol, host, target)
  const key = `${protocol} ${host ?? ''} ${target}`
  let url = parsedUrls.get(key)
  if (url === undefined && !parsedUrls.has(key)) {
    url = parseUrl(protocol, host, target)
    if (parsedUrls.size >= PARSED_URLS_KEPT) parsedUrls.clear()
    parsedUrls.set(key, url)
  }
  return url
}

function parseUrl(protocol: string, host: string | undefined, target: string): RequestUrl | undefined {
  let url: URL | undefined
  if (host !== undefined && PLAIN_HOST.test(host) && URL.canParse(target, `${protocol}://${host}`)) {
    url = new URL(target, `${protocol}://${host}`)
  } else if (URL.canParse(target, `${protocol}://localhost`)) {
    // @note The sandbox does not route by host: a Host it cannot use (`a b`, `[`, `x:99999`) is read as localhost.
    url = new URL(target, `${protocol}://localhost`)
  }
  return url && { href: url.href, pathname: url.pathname }
}

/** `req` as an {@link ApiRequest} for the URL {@link requestUrl} read, answered with the id `id`. */
export function fromNodeRequest(req: IncomingMessage, url: RequestUrl, id: string | undefined): ApiRequest {
  return {
    id,
    method: req.method ?? 'GET',
    url: url.href,
    path: url.pathname,
    headers: new NodeHeaders(req.headers, req.rawHeaders),
    readBody: (limit, owner) => readNodeBody(req, limit, owner),
    waiting: (req as IncomingMessage & { [WAITING]?: ApiRequest['waiting'] })[WAITING],
  }
}

/** Where the server puts a request's {@link ApiRequest.waiting} hook on its `IncomingMessage`. */
export const WAITING = Symbol('waiting')

/** Node's parsed headers (names already lower-case) as a {@link HeaderReader}, without copying them. */
class NodeHeaders implements HeaderReader {
  readonly #headers: IncomingHttpHeaders
  readonly #raw: readonly string[]

  constructor(headers: IncomingHttpHeaders, raw: readonly string[]) {
    this.#headers = headers
    this.#raw = raw
  }

  get(name: string): string | null {
    const value = this.#headers[name]
    if (value === undefined) return null
    return Array.isArray(value) ? value.join(', ') : value
  }

  heldBytes(): number {
    let weight = 0
    for (const name in this.#headers) {
      const value = this.get(name)
      if (value !== null) weight += headerWeight(name, value)
    }
    const proto = protoHeader(this.#raw)
    return proto === undefined ? weight : weight + headerWeight('__proto__', proto)
  }

  *[Symbol.iterator](): Iterator<[string, string]> {
    for (const name of Object.keys(this.#headers)) {
      const value = this.get(name)
      if (value !== null) yield [name, value]
    }
    const proto = protoHeader(this.#raw)
    if (proto !== undefined) yield ['__proto__', proto]
  }
}

/**
 * The value of the headers named `__proto__` in `raw` (Node's `rawHeaders`), joined with `, `, or undefined: Node's
 * parsed headers cannot hold that name (assigned, it hits the prototype setter), and the journal listed every header
 * sent but it (attack73 F2).
 */
function protoHeader(raw: readonly string[]): string | undefined {
  let value: string | undefined
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.length === 9 && raw[i]!.toLowerCase() === '__proto__') value = value === undefined ? raw[i + 1]! : `${value}, ${raw[i + 1]!}`
  }
  return value
}

const CUT_OFF: RawBody = { ok: false, code: 'invalid_body', params: { reason: 'The request body was cut off before its end' }, gone: true }

/** Requests the server refused while their body was still arriving (a 408 at the request timeout), with that refusal. */
const refusedBodies = new WeakMap<IncomingMessage, RawBody>()
/** How to end the read of a body under way, by request. */
const bodyReads = new WeakMap<IncomingMessage, (result: RawBody) => void>()

/**
 * Marks `req`, whose body is still arriving, as refused with `code`: its body reads (now, if a
 * read is under way) as that failure, so that the pipeline journals the answer its client got
 * rather than a dropped connection.
 * @note The read cannot wait for the stream to end: once its answer is written, Node no longer
 * ends or closes a request whose rest never comes.
 */
export function refuseBody(req: IncomingMessage, code: ErrorCode, params: ErrorParams): void {
  const refusal: RawBody = { ok: false, code, params }
  refusedBodies.set(req, refusal)
  bodyReads.get(req)?.(refusal)
}

/**
 * After a 413, the rest of the body is read and dropped, up to this many bytes, so that the
 * client (still sending) gets to read the answer; a body declared larger is not read at all.
 * @default 16 MiB
 */
export const DRAIN_MAX_BYTES = 16 * 1024 * 1024
/** A client that sends nothing for this long while its rest is being dropped is disconnected. */
export const DRAIN_IDLE_MS = 1000

/**
 * Requests whose unread rest is being dropped after a 413 (their connection may stay open), with
 * what waits for the rest to be read.
 */
const draining = new WeakMap<IncomingMessage, (() => void)[]>()

/**
 * Whether the connection of a request answered before its body was read in full must close:
 * yes, unless its rest is being read and dropped (then the client can read the answer), or it
 * has no body (no `Transfer-Encoding`, no `Content-Length` above 0).
 * @note A request without a body answered in its own headers' tick (the admin API's 401 and 405)
 * is not `complete` yet: its answer said `Connection: close`, the API's did not (new-user trial P2).
 */
export function mustCloseAfter(req: IncomingMessage): boolean {
  if (req.complete || draining.has(req)) return false
  const length = req.headers['content-length']
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && Number(length) !== 0)
}

/**
 * Runs `write` once the rest of `req`'s body has been read and dropped (or the drop was cut
 * off), and returns true; returns false, having done nothing, when no rest is being dropped.
 * @note For a connection that closes after its answer (`Connection: close`): answered at once,
 * it closed while the client still sent, and the client saw `EPIPE` instead of the 413.
 */
export function afterDrained(req: IncomingMessage, write: () => void): boolean {
  const waiting = draining.get(req)
  if (waiting === undefined) return false
  waiting.push(write)
  return true
}

/**
 * Each request's body's place among the turns, set as the server starts on the request: when it
 * must have had its turn ({@link performance.now}; past it, the body is let go without being
 * handled: see {@link turnWaitFor}), and its client's address (bodies take turns by address, then
 * by tenant: see EventLoopTurns).
 */
export const turnTickets = new WeakMap<IncomingMessage, { readonly deadline: number; readonly client: string | undefined }>()

/**
 * The address of `req`'s client: its connection's, or behind a trusted proxy (`trustProxy`) the
 * last `X-Forwarded-For` entry (the address the proxy itself saw; entries before it are the
 * client's own say). Undefined when the socket has none (closed).
 */
export function clientAddress(req: IncomingMessage, trustProxy: boolean): string | undefined {
  if (trustProxy) {
    const forwarded = req.headers['x-forwarded-for']
    const last = (Array.isArray(forwarded) ? forwarded.at(-1) : forwarded)?.split(',').at(-1)?.trim()
    if (last !== undefined && last !== '') return last
  }
  return req.socket.remoteAddress
}

/** Why a body let go for its wait is refused (503 over_capacity). */
const TURN_WAIT_REASON = "other requests' bodies kept this one waiting for its turn past half its request timeout; nothing of it was handled"

/** How long `req`'s body may wait for its turn (ms): until its deadline, or for good without one. */
function turnWaitFor(req: IncomingMessage): number {
  const ticket = turnTickets.get(req)
  return ticket === undefined ? Number.POSITIVE_INFINITY : ticket.deadline - performance.now()
}

function waitedTooLong(): never {
  throw new OverCapacityError(TURN_WAIT_REASON, 1)
}

/**
 * Reads the body as UTF-8 text, at most `limit` bytes. Over the limit it answers 413 at once and
 * reads and drops the rest, up to {@link DRAIN_MAX_BYTES}.
 * @note Closing the connection while the client still sends made it see `EPIPE` (7 of 30 `fetch`
 * POSTs of 5 MiB) instead of our 413.
 * `owner` (a tenant): a body past a turn's bytes waits in turn with other owners' (see EventLoopTurns).
 */
export function readNodeBody(req: IncomingMessage, limit: number, owner?: object): Promise<RawBody> {
  const declared = Number(req.headers['content-length'] ?? Number.NaN)
  if (declared > limit) {
    if (declared <= DRAIN_MAX_BYTES) drainRest(req)
    return Promise.resolve(payloadTooLarge(limit))
  }
  const refused = refusedBodies.get(req)
  if (refused !== undefined) return Promise.resolve(refused)
  if (req.readableEnded) return Promise.resolve({ ok: true, text: '' })
  // @note A client gone before the body was asked for (a tenant read from Redis first): its
  // stream will say nothing more, and listeners added now would wait for good.
  if (req.destroyed && !req.complete) return Promise.resolve(CUT_OFF)
  // @note A small body usually arrives with its headers: by the time the pipeline asks for it,
  // Node has parsed all of it into the stream's buffer, and it is taken from there at once,
  // without listeners or a switch to flowing mode.
  if (req.complete && !req.readableFlowing) {
    const chunks: Buffer[] = []
    let size = 0
    for (let chunk = req.read() as Buffer | null; chunk !== null; chunk = req.read() as Buffer | null) {
      chunks.push(chunk)
      size += chunk.byteLength
    }
    if (size > limit) return Promise.resolve(payloadTooLarge(limit))
    const turn = loopTurns.admit(size, owner, turnWaitFor(req), turnTickets.get(req)?.client)
    return turn === undefined ? Promise.resolve(decodeUtf8(chunks, size)) : turn.then((given) => (given ? decodeUtf8(chunks, size) : waitedTooLong()))
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const finish = (result: RawBody) => {
      req.off('data', onData).off('end', onEnd).off('error', onCut).off('close', onCut)
      bodyReads.delete(req)
      resolve(result)
    }
    const onData = (chunk: Buffer) => {
      size += chunk.byteLength
      if (size <= limit) {
        chunks.push(chunk)
        return
      }
      finish(payloadTooLarge(limit))
      drainRest(req, size)
    }
    const onEnd = () => {
      const turn = loopTurns.admit(size, owner, turnWaitFor(req), turnTickets.get(req)?.client)
      if (turn === undefined) return finish(decodeUtf8(chunks, size))
      // @note Past a turn's bytes, a body is decoded (and then parsed and handled) in a turn of the
      // event loop of its own: requests that arrived meanwhile are served between (attack16 P1).
      req.off('data', onData).off('end', onEnd).off('error', onCut).off('close', onCut)
      void turn.then((given) => {
        if (given) return finish(decodeUtf8(chunks, size))
        bodyReads.delete(req)
        reject(new OverCapacityError(TURN_WAIT_REASON, 1))
      })
    }
    const onCut = () => finish(CUT_OFF)
    bodyReads.set(req, finish)
    req.on('data', onData).on('end', onEnd).on('error', onCut).on('close', onCut)
  })
}

/**
 * Reads and drops what is left of `req`'s body (`read` bytes of it already read). Past
 * {@link DRAIN_MAX_BYTES}, or after {@link DRAIN_IDLE_MS} without a byte, the connection closes
 * once the answer is written.
 */
function drainRest(req: IncomingMessage, read = 0): void {
  if (req.complete) return
  const waiting: (() => void)[] = []
  draining.set(req, waiting)
  let drained = read
  let idle: NodeJS.Timeout | undefined
  const stop = (cut: boolean) => {
    clearTimeout(idle)
    req.off('data', onData).off('end', onEnd).off('close', onEnd)
    draining.delete(req)
    // Answers held until now go out before a cut connection closes.
    for (const write of waiting.splice(0)) write()
    if (cut) req.socket.destroySoon()
  }
  // @note The idle timer is judged after the next read of the socket (setImmediate runs after
  // the poll phase): after the process itself stalled for longer than DRAIN_IDLE_MS (a long
  // collection, a starved CPU), Node runs expired timers before reading what arrived meanwhile,
  // and a client that kept sending was cut off (it saw EPIPE instead of the 413).
  const arm = () => {
    clearTimeout(idle)
    idle = setTimeout(() => {
      const before = drained
      setImmediate(() => {
        if (draining.get(req) === waiting && drained === before) stop(true)
      })
    }, DRAIN_IDLE_MS)
  }
  const onData = (chunk: Buffer) => {
    drained += chunk.byteLength
    if (drained > DRAIN_MAX_BYTES) stop(true)
    else arm()
  }
  const onEnd = () => stop(false)
  req.on('data', onData).once('end', onEnd).once('close', onEnd)
  arm()
  req.resume()
}
