/**
 * One connection is one ordered conversation: the requests a client pipelines on one connection
 * are handled one after the other, each once the answer ahead of it has gone out, so that a GET
 * sent after a POST sees the POST's category and a create sent after a scenario switch lands in
 * the new scenario. Node parses pipelined requests as they arrive and hands each to the listener
 * at once; this module makes them wait their turn, and closes a connection on which more wait
 * than {@link PIPELINE_LIMIT}.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

/**
 * Requests that may wait behind the one being answered on one connection; with this many
 * waiting, the connection is read no further (the requests of one read, up to 64 KiB, still
 * wait, up to {@link PIPELINE_LIMIT}) until the client takes its answers.
 * @default 16
 */
export const PIPELINE_DEPTH = 16

/**
 * Requests that may wait on one connection at all (Node hands over every request of a read at
 * once, up to 64 KiB of them); with one more, the connection is closed at once and none of the
 * requests waiting on it is handled.
 * @default 64 (4 × {@link PIPELINE_DEPTH})
 */
export const PIPELINE_LIMIT = 4 * PIPELINE_DEPTH

/** A request waiting for its turn: handled, or given up when its connection is gone first. */
interface Turn {
  readonly req: IncomingMessage
  readonly res: ServerResponse
  readonly handle: Handler
  readonly abandon: Handler
}

/** What runs a request (or gives it up), given its request and response. */
export type Handler = (req: IncomingMessage, res: ServerResponse) => void
const nothing: Handler = () => undefined

/** One connection's conversation. */
interface Conversation {
  /** The answer of the request handled last, until it is out. */
  current: ServerResponse | undefined
  readonly waiting: Turn[]
}

const conversations = new WeakMap<Socket, Conversation>()
/** Connections closed for pipelining past {@link PIPELINE_LIMIT}: what Node still parses of their last read is ignored. */
const cut = new WeakSet<Socket>()
/** Connections read no further while their waiting line is full. */
const held = new WeakSet<Socket>()

/** Whether an answer is out: handed to the operating system in full, or its connection gone. */
const isOut = (res: ServerResponse | undefined) => res === undefined || res.writableFinished || res.destroyed

/**
 * Runs `handle` for the request `req` once every request ahead of it on its connection has its
 * answer written out (or its connection closed), and calls `abandon` instead when the connection
 * is gone before its turn: a request its client can no longer get the answer of is not handled.
 * @note Waiting for the answer to be out (handed to the operating system), not only made, also
 * keeps a client that does not read from making the server build the answers of every request
 * it pipelines: one is held at a time, not one per request.
 * @note A request that finds the answer ahead of it out (every request of a client that waits
 * for its answers) is handled at once: no listener, no allocation beyond the first per connection.
 * @note The handlers take the request and response rather than closing over them: no closure per request.
 * @example inOrder(req, res, listener, logDropped)
 */
export function inOrder(req: IncomingMessage, res: ServerResponse, handle: Handler, abandon: Handler = nothing): void {
  const socket = req.socket
  if (cut.has(socket)) return
  let conversation = conversations.get(socket)
  if (conversation === undefined) {
    conversation = { current: undefined, waiting: [] }
    conversations.set(socket, conversation)
  }
  if (conversation.waiting.length === 0 && isOut(conversation.current)) {
    conversation.current = res
    handle(req, res)
    return
  }
  // @note Node parses every request of a read before it looks at a pause: one 64 KiB read of
  // tiny requests is 2,500 of them, each about 2 KB of heap that Node itself keeps until its
  // answer is out (950 such connections: 3.5 GB). Only closing the connection lets it go, so a
  // line past the limit is cut at once: the requests waiting are given up (none has run), as is
  // this one, and the rest of the read is ignored, not logged one by one.
  if (conversation.waiting.length >= PIPELINE_LIMIT) {
    cut.add(socket)
    ignoreRestOfRead(socket)
    const current = conversation.current
    socket.once('close', () => setImmediate(forget, socket, current))
    socket.destroy()
    abandon(req, res)
    return
  }
  conversation.waiting.push({ req, res, handle, abandon })
  if (conversation.waiting.length === 1) whenOut(socket, conversation)
  if (conversation.waiting.length >= PIPELINE_DEPTH) stopReading(socket)
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

/**
 * Whether `req` came on a connection closed for pipelining past {@link PIPELINE_LIMIT}: Node
 * still parses the rest of that connection's last read, and such requests are ignored (not
 * handled, not logged).
 * @example if (closedForPipelining(req)) return
 */
export function closedForPipelining(req: IncomingMessage): boolean {
  return cut.has(req.socket)
}

/** Hands the turn to the next waiting request once the current answer is out (or its connection gone). */
function whenOut(socket: Socket, conversation: Conversation): void {
  const current = conversation.current
  const next = () => {
    current?.off('finish', next).off('close', next)
    socket.off('close', next)
    advance(socket, conversation)
  }
  if (isOut(current)) {
    queueMicrotask(() => advance(socket, conversation))
    return
  }
  // @note The socket's own `close` too: an answer still queued behind another (never given the
  // socket) gets no `close` of its own when the connection goes.
  current?.once('finish', next).once('close', next)
  socket.once('close', next)
}

function advance(socket: Socket, conversation: Conversation): void {
  // @note A connection gone: the requests still waiting are given up, not handled for nobody
  // (a create would be stored that no client was told of).
  if (socket.destroyed) {
    conversation.current = undefined
    for (const turn of conversation.waiting.splice(0)) turn.abandon(turn.req, turn.res)
    resumeReading(socket)
    return
  }
  const turn = conversation.waiting.shift()
  if (turn === undefined) return
  if (conversation.waiting.length < PIPELINE_DEPTH) resumeReading(socket)
  conversation.current = turn.res
  if (conversation.waiting.length > 0) whenOut(socket, conversation)
  turn.handle(turn.req, turn.res)
}

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
