/**
 * One connection is one ordered conversation: the requests a client pipelines on one connection
 * are handled one after the other, each once the answer ahead of it has gone out, so that a GET
 * sent after a POST sees the POST's category and a create sent after a scenario switch lands in
 * the new scenario. Node parses pipelined requests as they arrive and hands each to the listener
 * at once; this module makes them wait their turn.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Socket } from 'node:net'

/**
 * Requests that may wait behind the one being answered on one connection; with this many
 * waiting, the connection is read no further (the requests of one read, up to 64 KiB, still
 * wait) until the client takes its answers.
 * @default 16
 */
export const PIPELINE_DEPTH = 16

/** A request waiting for its turn: handled, or given up when its connection is gone first. */
interface Turn {
  readonly handle: () => void
  readonly abandon: () => void
}

/** One connection's conversation. */
interface Conversation {
  /** Whether a request of this connection is being handled (its answer not out yet). */
  busy: boolean
  readonly waiting: Turn[]
}

const conversations = new WeakMap<Socket, Conversation>()
/** Connections read no further while their waiting line is full. */
const held = new WeakSet<Socket>()

/**
 * Runs `handle` for the request `req` once every request ahead of it on its connection has its
 * answer written out (or its connection closed), and calls `abandon` instead when the connection
 * is gone before its turn: a request its client can no longer get the answer of is not handled.
 * @note Waiting for `finish` (the answer handed to the operating system) rather than for the
 * handler also keeps a client that does not read from making the server build the answers of
 * every request it pipelines: one is held at a time, not one per request.
 * @example inOrder(req, res, () => listener(req, res), () => logDropped(req, res))
 */
export function inOrder(req: IncomingMessage, res: ServerResponse, handle: () => void, abandon: () => void = () => undefined): void {
  const socket = req.socket
  let conversation = conversations.get(socket)
  if (conversation === undefined) {
    conversation = { busy: false, waiting: [] }
    conversations.set(socket, conversation)
  }
  const turn: Turn = { handle: () => take(socket, conversation, res, handle), abandon }
  if (!conversation.busy) {
    turn.handle()
    return
  }
  conversation.waiting.push(turn)
  if (conversation.waiting.length >= PIPELINE_DEPTH) stopReading(socket)
}

/** Handles one request, and the next waiting one once its answer is out. */
function take(socket: Socket, conversation: Conversation, res: ServerResponse, handle: () => void): void {
  conversation.busy = true
  const done = () => {
    res.off('finish', done).off('close', done)
    conversation.busy = false
    // @note A connection gone: the requests still waiting are given up, not handled for nobody
    // (a create would be stored that no client was told of).
    if (socket.destroyed) {
      for (const turn of conversation.waiting.splice(0)) turn.abandon()
      resumeReading(socket)
      return
    }
    const next = conversation.waiting.shift()
    if (conversation.waiting.length < PIPELINE_DEPTH) resumeReading(socket)
    next?.handle()
  }
  res.once('finish', done).once('close', done)
  handle()
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
