/**
 * One connection is one ordered conversation: the requests a client pipelines on one connection
 * are handled one after the other, each once the answer ahead of it has gone out, so that a GET
 * sent after a POST sees the POST's category and a create sent after a scenario switch lands in
 * the new scenario. Node parses pipelined requests as they arrive and hands each to the listener
 * at once; this module makes them wait their turn, stops reading a connection on which many wait
 * (by count or by their heads' bytes), and cuts one on which more wait than the limits allow, or
 * that holds most when what waits on every connection passes its budget: the requests waiting
 * are not run, the answer under way goes out in full, then the connection closes.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

/** Connections answered with `Connection: close` (see {@link closeAfter}): nothing more read on them is handled. */
const closing = new WeakSet<Socket>()

/**
 * Answers `res` with `Connection: close`, and has every request the client sent after it on that
 * connection (parsed already, pipelined) go unhandled and unlogged: the connection closes once
 * `res` is out. Node's own refusals (431, a bad head) stop the parser; ours must say so.
 * @note Answered 400 (2,000 headers), 417 (an `Expect`) or 503 (a connection ended for the cap)
 * with `close`, the request pipelined behind ran all the same: a create stored, a reset applied,
 * the client told nothing (attack40 F7; RFC 9112 §9.6).
 * @example closeAfter(res); sendError(res, 'bad_request', …)
 */
export function closeAfter(res: ServerResponse): void {
  res.setHeader('Connection', 'close')
  res.shouldKeepAlive = false
  closing.add(res.socket ?? res.req.socket)
}

/**
 * Whether the connection closes after `res`: it says `Connection: close` (ours, the client's, HTTP/1.0
 * without keep-alive), or Node decided so itself when writing its head (`_last`: an answer of no
 * length to an HTTP/1.0 keep-alive request, a list written in pieces).
 * @note Only `shouldKeepAlive` read, a create pipelined behind a list to HTTP/1.0 keep-alive ran,
 * its answer dropped with the socket (the review of attack40 F7's fix).
 */
function closes(res: ServerResponse | undefined): boolean {
  return res !== undefined && (res.shouldKeepAlive === false || (res as ServerResponse & { _last?: boolean })._last === true)
}

/** Whether `req` came on a connection answered with `Connection: close` (see {@link closeAfter}): it is not to be handled. */
export function closedAfter(req: IncomingMessage): boolean {
  return closing.has(req.socket)
}

/**
 * Requests that may wait behind the one being answered on one connection; with this many
 * waiting, the connection is read no further (the requests of one read, up to 64 KiB, still
 * wait, up to {@link PIPELINE_LIMIT}) until the client takes its answers.
 * @default 16
 */
export const PIPELINE_DEPTH = 16

/**
 * Requests that may wait on one connection at all (Node hands over every request of a read at
 * once, up to 64 KiB of them); with one more, the connection is cut: none of the requests waiting
 * on it is handled, and it closes once the answer under way is out.
 * @default 64 (4 × {@link PIPELINE_DEPTH})
 */
export const PIPELINE_LIMIT = 4 * PIPELINE_DEPTH

/**
 * Bytes of request heads (request line and headers) that may wait on one connection before it is
 * read no further, as {@link PIPELINE_DEPTH} requests do: a head may be 16 KiB, and Node keeps
 * each waiting request's head besides its own 2 KB or so.
 * @default 32768
 */
export const PIPELINE_DEPTH_BYTES = 32 * 1024

/**
 * Bytes of request heads that may wait on one connection at all; past them, the connection is cut
 * as past {@link PIPELINE_LIMIT}.
 * @default 131072 (4 × {@link PIPELINE_DEPTH_BYTES})
 */
export const PIPELINE_LIMIT_BYTES = 4 * PIPELINE_DEPTH_BYTES

/**
 * Heap a waiting request takes besides its head's bytes, as measured under Node 20 (1.8 KB and
 * 1.05 bytes a head byte: docs/decisions/0012); what waits is weighed by it.
 * @default 2048
 */
export const WAITING_REQUEST_BYTES = 2048

/**
 * The heap the requests waiting on every connection together may take, given the memory budget:
 * a quarter of it, and at least 1 MiB (about fifteen connections each holding a full read of
 * large heads), so that a tiny budget does not cut every pipelining client.
 * @example new Conversations({ lastAnswerMs: 30_000, waitingBudgetBytes: waitingBudgetFor(2 ** 30) })
 */
export function waitingBudgetFor(memoryBudgetBytes: number): number {
  return Math.max(memoryBudgetBytes / 4, 1024 * 1024)
}

/** Options of {@link Conversations}. */
export interface ConversationOptions {
  /**
   * How long the answer under way on a connection cut for pipelining may still take, in ms; then
   * the connection closes anyway (a client that does not read it, a handler that never ends).
   */
  readonly lastAnswerMs: number
  /**
   * Heap the requests waiting on every connection together may take (each weighed as
   * {@link WAITING_REQUEST_BYTES} plus its head); past it, the connection that adds is read no
   * further and the one holding most is cut. @default Infinity
   */
  readonly waitingBudgetBytes?: number | undefined
}

/** A request waiting for its turn: handled, or given up when its connection is gone first. */
interface Turn {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly handle: Handler
  readonly abandon: Handler
  /** Its head's bytes. */
  readonly headBytes: number
}

/** What runs a request (or gives it up), given its request and response. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => void
const nothing: Handler = () => undefined

/** One connection's conversation. */
interface Conversation {
  readonly socket: Socket
  /** The answer of the request handled last, until it is out. */
  current: ServerResponse | undefined
  readonly waiting: Turn[]
  /** Head bytes of the requests waiting. */
  headBytes: number
  /** What it counts in the waiting weight of all connections: until its `close` once it is cut (Node keeps what it parsed until then). */
  weight: number
}

/** Whether an answer is out: handed to the operating system in full, or its connection gone. */
const isOut = (res: ServerResponse | undefined) => res === undefined || res.writableFinished || res.destroyed

/** The bytes of a request's head as Node keeps them: its method, target and header lines. */
function headBytesOf(req: IncomingMessage): number {
  let bytes = (req.method?.length ?? 0) + (req.url?.length ?? 0) + 12
  for (const part of req.rawHeaders) bytes += part.length + 2
  return bytes
}

/**
 * The conversations of one server's connections: each handles its requests one after the other,
 * with bounded waiting lines, and what waits on all of them together is bounded too.
 * @example const conversations = new Conversations({ lastAnswerMs: 30_000 }); conversations.inOrder(req, res, listener, logDropped)
 */
export class Conversations {
  readonly #lastAnswerMs: number
  readonly #budget: number
  readonly #conversations = new WeakMap<Socket, Conversation>()
  /** Conversations with requests waiting (or cut, until their close): the ones weighed. */
  readonly #weighed = new Set<Conversation>()
  /** Connections cut for pipelining past the limits: what Node still parses of them is ignored. */
  readonly #cut = new WeakSet<Socket>()
  #waitingBytes = 0

  constructor(options: ConversationOptions) {
    this.#lastAnswerMs = options.lastAnswerMs
    this.#budget = options.waitingBudgetBytes ?? Number.POSITIVE_INFINITY
  }

  /** Heap the requests waiting on every connection take now, as weighed (cut connections' until their close). */
  get waitingBytes(): number {
    return this.#waitingBytes
  }

  /**
   * Runs `handle` for the request `req` once every request ahead of it on its connection has its
   * answer written out (or its connection closed), and calls `abandon` instead when the connection
   * is gone (or cut) before its turn: a request its client can no longer get the answer of is not handled.
   * @note Waiting for the answer to be out (handed to the operating system), not only made, also
   * keeps a client that does not read from making the server build the answers of every request
   * it pipelines: one is held at a time, not one per request.
   * @note A request that finds the answer ahead of it out (every request of a client that waits
   * for its answers) is handled at once: no listener, no allocation beyond the first per connection.
   * @note The handlers take the request and response rather than closing over them: no closure per request.
   * @example conversations.inOrder(req, res, listener, logDropped)
   */
  inOrder(req: IncomingMessage, res: ServerResponse, handle: Handler, abandon: Handler = nothing): void {
    const socket = req.socket
    if (this.#cut.has(socket) || closing.has(socket)) return
    let conversation = this.#conversations.get(socket)
    if (conversation === undefined) {
      conversation = { socket, current: undefined, waiting: [], headBytes: 0, weight: 0 }
      this.#conversations.set(socket, conversation)
    }
    // The answer ahead, out already, said `Connection: close` (the client's own, HTTP/1.0): nothing after it runs.
    if (closes(conversation.current)) {
      closing.add(socket)
      return
    }
    if (conversation.waiting.length === 0 && isOut(conversation.current)) {
      conversation.current = res
      handle(req, res)
      return
    }
    // @note Node parses every request of a read before it looks at a pause: one 64 KiB read of
    // tiny requests is 2,500 of them, each about 2 KB of heap (and its head besides) that Node
    // itself keeps until its connection closes. So a line past the limits is cut at once: the
    // requests waiting are given up (none has run), as is this one, and the rest of the read is
    // ignored, not logged one by one.
    const headBytes = headBytesOf(req)
    if (conversation.waiting.length >= PIPELINE_LIMIT || conversation.headBytes + headBytes > PIPELINE_LIMIT_BYTES) {
      this.#cutOff(conversation)
      abandon(req, res)
      return
    }
    conversation.waiting.push({ req, res, handle, abandon, headBytes })
    conversation.headBytes += headBytes
    this.#weigh(conversation, WAITING_REQUEST_BYTES + headBytes)
    if (conversation.waiting.length === 1) this.#whenOut(conversation)
    if (conversation.waiting.length >= PIPELINE_DEPTH || conversation.headBytes >= PIPELINE_DEPTH_BYTES) stopReading(socket)
    if (this.#waitingBytes > this.#budget) this.#overBudget(conversation)
  }

  /**
   * Whether `req` came on a connection cut for pipelining past the limits: Node still parses
   * the rest of that connection's last read, and such requests are ignored (not handled, not logged).
   * @example if (conversations.closedForPipelining(req)) return
   */
  closedForPipelining(req: IncomingMessage): boolean {
    return this.#cut.has(req.socket) || closing.has(req.socket)
  }

  #weigh(conversation: Conversation, bytes: number): void {
    conversation.weight += bytes
    this.#waitingBytes += bytes
    if (conversation.weight > 0) this.#weighed.add(conversation)
    else this.#weighed.delete(conversation)
  }

  /**
   * What waits on every connection passed the budget: the connection that added is read no
   * further, and the one holding most (not cut yet) is cut.
   * @note Only past the budget is every connection looked at; a cut one counts until its close.
   */
  #overBudget(adding: Conversation): void {
    stopReading(adding.socket)
    let most: Conversation | undefined
    for (const conversation of this.#weighed) {
      if (this.#cut.has(conversation.socket)) continue
      if (most === undefined || conversation.weight > most.weight) most = conversation
    }
    if (most !== undefined) this.#cutOff(most)
  }

  /**
   * Cuts a connection pipelining past the limits: the requests waiting are given up (none has
   * run), the rest of its read is ignored and it is read no further; the answer under way is
   * written out in full, saying `Connection: close`, and then the connection closes (within
   * `lastAnswerMs` at most).
   * @note Closing at once lost that answer: a create stored and never acknowledged (attack 3 G2).
   * Node keeps the requests it parsed until the close, so they count against the budget until then.
   */
  #cutOff(conversation: Conversation): void {
    const socket = conversation.socket
    this.#cut.add(socket)
    ignoreRestOfRead(socket)
    stopReading(socket)
    const waiting = conversation.waiting.splice(0)
    conversation.headBytes = 0
    for (const turn of waiting) turn.abandon(turn.req, turn.res)
    const current = conversation.current
    const close = () => socket.destroy()
    const timer = setTimeout(close, this.#lastAnswerMs)
    socket.once('close', () => {
      clearTimeout(timer)
      this.#weigh(conversation, -conversation.weight)
      setImmediate(forget, socket, current)
    })
    if (isOut(current)) {
      close()
      return
    }
    // @note Said before the answer's head goes out, Node closes the connection itself once it is
    // written; an answer whose head is out already (a long list) is followed by the close.
    if (!current!.headersSent) current!.shouldKeepAlive = false
    current!.once('finish', close).once('close', close)
  }

  /** Hands the turn to the next waiting request once the current answer is out (or its connection gone). */
  #whenOut(conversation: Conversation): void {
    const current = conversation.current
    const socket = conversation.socket
    const next = () => {
      current?.off('finish', next).off('close', next)
      socket.off('close', next)
      this.#advance(conversation)
    }
    if (isOut(current)) {
      queueMicrotask(() => this.#advance(conversation))
      return
    }
    // @note The socket's own `close` too: an answer still queued behind another (never given the
    // socket) gets no `close` of its own when the connection goes.
    current?.once('finish', next).once('close', next)
    socket.once('close', next)
  }

  #advance(conversation: Conversation): void {
    const socket = conversation.socket
    // @note A connection gone: the requests still waiting are given up, not handled for nobody
    // (a create would be stored that no client was told of).
    if (socket.destroyed) {
      conversation.current = undefined
      for (const turn of this.#leave(conversation, conversation.waiting.length)) turn.abandon(turn.req, turn.res)
      resumeReading(socket)
      return
    }
    // @note The answer ahead said `Connection: close` (decided late: a request cut while it waited,
    // an answer closing its connection): the requests behind it are given up, as on a connection gone.
    if (closes(conversation.current)) {
      closing.add(socket)
      conversation.current = undefined
      for (const turn of this.#leave(conversation, conversation.waiting.length)) turn.abandon(turn.req, turn.res)
      return
    }
    const [turn] = this.#leave(conversation, 1)
    if (turn === undefined) return
    if (conversation.waiting.length < PIPELINE_DEPTH && conversation.headBytes < PIPELINE_DEPTH_BYTES) resumeReading(socket)
    conversation.current = turn.res
    if (conversation.waiting.length > 0) this.#whenOut(conversation)
    turn.handle(turn.req, turn.res)
  }

  /** Takes the first `count` requests off the waiting line, and their weight off the count. */
  #leave(conversation: Conversation, count: number): Turn[] {
    const turns = conversation.waiting.splice(0, count)
    let bytes = 0
    for (const turn of turns) bytes += turn.headBytes
    conversation.headBytes -= bytes
    if (!this.#cut.has(conversation.socket)) this.#weigh(conversation, -(bytes + turns.length * WAITING_REQUEST_BYTES))
    return turns
  }
}

/**
 * Has Node's parser drop the requests it still finds in the read under way on `socket` as it
 * parses them, instead of making each a request and an answer that it keeps.
 * @note Node lets go of what a closed connection held only in the event loop's close phase, after
 * it has read every readable connection: 80 connections of one 64 KiB read each held 400 MB
 * together then (a 256 MB heap died). The parser hands each request's head to `onIncoming`;
 * answering 0 lets it go on to the next one, the request no more than garbage. A Node without
 * this hook keeps them until `close`, as before.
 */
function ignoreRestOfRead(socket: Socket): void {
  const parser = (socket as Socket & { parser?: { onIncoming?: unknown } | null }).parser
  if (parser && typeof parser.onIncoming === 'function') parser.onIncoming = noRequest
}
const noRequest = () => 0

/**
 * Lets go of what Node keeps for a connection closed while `current` was being answered.
 * @note Node's listeners on the socket, and its `finish` listener on the answer under way, hold
 * the connection's parsing state, and with it every answer still queued (Node forgets the queued
 * requests at `close`, not their answers); the answer under way is held until its handler is
 * done (a `Prefer: delay` of 20 s). Once every `close` listener has run nothing else comes: the
 * socket is gone, and an answer whose socket is gone never finishes (it has closed).
 */
function forget(socket: Socket, current: ServerResponse | undefined): void {
  socket.removeAllListeners()
  current?.removeAllListeners('finish')
  if (current) (current as ServerResponse & { _onPendingData?: unknown })._onPendingData = ignore
}
const ignore = () => undefined

/** Connections read no further while their waiting line is full. */
const held = new WeakSet<Socket>()

/**
 * Stops reading `socket` until {@link resumeReading}.
 * @note Node resumes a socket itself (reading a request's body, dropping an unread one): a
 * connection held here is paused again whenever that happens, before any data flows.
 */
function stopReading(socket: Socket): void {
  if (held.has(socket)) return
  held.add(socket)
  socket.on('resume', pauseAgain)
  socket.pause()
}

function resumeReading(socket: Socket): void {
  if (!held.delete(socket)) return
  socket.off('resume', pauseAgain)
  socket.resume()
}

function pauseAgain(this: Socket): void {
  this.pause()
}
