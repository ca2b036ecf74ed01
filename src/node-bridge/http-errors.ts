/** Error answers of the server's own routes, always the Error body of the error table. */
import type { ServerResponse } from 'node:http'
import type { Socket } from 'node:net'
import { apiError, type ErrorCode, type ErrorParams } from '../contract/errors.js'
import { wwwAuthenticate } from '../core/auth.js'
import type { Tenant } from '../storage/tenant.js'
import type { AnswerPieces } from '../pipeline/api-request.js'
import { stringWeight } from '../core/heap-weight.js'
import { afterDrained, mustCloseAfter, turnTickets } from './node-request.js'
import { answerTurns, TURN_BYTES } from './event-loop-turns.js'

/** Sends the Error body for `code`, with `WWW-Authenticate` on 401 as the API does. */
export function sendError(res: ServerResponse, code: ErrorCode, params: ErrorParams = {}, headers: Record<string, string> = {}, note?: string): void {
  // An answer under way cannot be replaced: its connection is cut. One already sent (a 408 the
  // server wrote while the body still arrived) stands.
  if (res.headersSent) {
    if (!res.writableEnded) res.destroy()
    return
  }
  const body = apiError(code, params, note)
  const all: Record<string, string> = { ...headers, 'content-type': 'application/json; charset=utf-8' }
  if (body.status === 401) all['www-authenticate'] = wwwAuthenticate(code)
  writeJson(res, body.status, all, JSON.stringify(body))
}

/** How far a long answer's sending got, and how to cut it (see {@link AnswerSending.count}). */
export interface AnswerProgress {
  /** Bytes of the answer its connection has taken so far. */
  taken(): number
  /** Resets the answer's connection: its client sees it reset before the answer's Content-Length. */
  cut(): void
}

/** How a long answer is sent (see {@link writeJson}). */
export interface AnswerSending {
  /**
   * Counts the heap bytes of an answer made for its request (against the server's memory budget,
   * for the tenant it answers, if any) until the function it returns is called.
   * @default not counted (a text the store keeps ready)
   */
  readonly count?: ((bytes: number, tenant: Tenant | undefined, progress: AnswerProgress) => () => void) | undefined
  /**
   * A client that takes nothing of a long answer for this long, in ms, is disconnected, so that
   * a client that never reads cannot hold an answer (and the budget it counts in) for good.
   * @default no limit
   */
  readonly stallMs?: number | undefined
}

/**
 * Answers longer than this many characters are sent in pieces of this size, each once the
 * connection has taken the one before: a client that does not read holds about one piece and
 * its socket's buffers, not a copy of the whole answer.
 * @default 65536
 */
export const ANSWER_CHUNK_CHARS = 64 * 1024

/**
 * Writes a JSON answer: the one place the server's answers (API and admin alike) are written.
 * A HEAD request gets the headers and the Content-Length of its GET, and no body. A long body
 * goes out in pieces ({@link ANSWER_CHUNK_CHARS}), counted (for `tenant`) and timed as `sending`
 * says until it is out.
 */
export function writeJson(
  res: ServerResponse,
  status: number,
  headers: Readonly<Record<string, string>>,
  body: string | Uint8Array,
  sending?: AnswerSending,
  tenant?: Tenant,
): void {
  // A connection that closes after this answer waits for the rest of the body to be dropped.
  if (!res.shouldKeepAlive && afterDrained(res.req, () => res.destroyed || writeJson(res, status, headers, body, sending, tenant))) return
  // @note Answered before the body was read in full (a 413) and not dropping the rest: the
  // unread rest would stall a keep-alive connection, so it is closed after this answer.
  if (mustCloseAfter(res.req)) {
    // Said to Node too: nothing pipelined behind this answer runs (the conversation reads it; review39 R11).
    res.setHeader('Connection', 'close')
    res.shouldKeepAlive = false
  }
  // @note Headers set one by one and the body given to `end()`, so that Node sends a
  // Content-Length (after `writeHead` the body would go chunked).
  res.statusCode = status
  for (const name in headers) res.setHeader(name, headers[name]!)
  // @note Node sends no body to a HEAD request, nor the Content-Length its GET would carry.
  if (res.req.method === 'HEAD') {
    res.setHeader('Content-Length', Buffer.byteLength(body))
    res.end()
    return
  }
  if (body.length <= ANSWER_CHUNK_CHARS) {
    res.end(body)
    return
  }
  res.setHeader('Content-Length', Buffer.byteLength(body))
  // @note Counted as the heap holds it, not as the bytes sent: a text holding one character above
  // Latin-1 takes two bytes a character, twice its UTF-8 length when the rest is ASCII (attack2 F5).
  const progress = answerProgress(res)
  sendInPieces(res, body, sending?.count?.(typeof body === 'string' ? stringWeight(body) : body.length, tenant, progress.of), sending?.stallMs, progress.wrote, tenant)
}

/**
 * Writes a JSON answer whose body comes in `pieces` (`ApiAnswer.pieces`): status and headers
 * first, then the body in chunked transfer encoding (its length is not known ahead), each piece
 * asked for once the connection has taken the one before ('drain'), so that the answer holds
 * about one piece whatever its length and however slowly its client reads. A connection that
 * takes nothing for `stallMs` is closed; a piece that cannot be made (a storage failure) breaks
 * the answer off (its client sees it end before the chunked body's end). The pieces are closed
 * once the answer is out or its connection is gone. Past a turn's bytes it takes turns of the event
 * loop as `owner` (its tenant; see {@link writeInTurns}).
 */
export function writePieces(res: ServerResponse, status: number, headers: Readonly<Record<string, string>>, pieces: AnswerPieces, stallMs: number | undefined, owner?: object): void {
  if (!res.shouldKeepAlive && afterDrained(res.req, () => (res.destroyed ? pieces.close() : writePieces(res, status, headers, pieces, stallMs, owner)))) return
  if (mustCloseAfter(res.req)) {
    // Said to Node too: nothing pipelined behind this answer runs (the conversation reads it; review39 R11).
    res.setHeader('Connection', 'close')
    res.shouldKeepAlive = false
  }
  res.statusCode = status
  for (const name in headers) res.setHeader(name, headers[name]!)
  // A HEAD answer: the headers its GET sends, no body (none of the pieces made).
  if (res.req.method === 'HEAD') {
    pieces.close()
    res.end()
    return
  }
  writeInTurns(res, () => pieces.next(), stallMs, owner, () => pieces.close())
}

/** A socket as Node (20 to 24) keeps it: the bytes given to its handle, and what its handle has not yet given the kernel. */
interface SocketInternals {
  readonly _bytesDispatched?: unknown
  readonly _handle?: { readonly writeQueueSize?: unknown } | null
}

/**
 * How much of an answer the connection of `res` has taken: the bytes the kernel accepted
 * (given to the socket's handle, less what the handle still queues), or where Node's internals
 * are not as expected, the pieces written so far (`wrote` counts them). Once the socket is
 * gone, what it had taken.
 * @note `_bytesDispatched` and `_handle.writeQueueSize` are Node's internals, checked on Node 20,
 * 22 and 24: the first grows as writes are given to libuv, the second is what libuv still queues.
 */
function answerProgress(res: ServerResponse): { of: AnswerProgress; wrote: (bytes: number) => void } {
  let written = 0
  const socket = res.socket as SocketInternals | null
  const internals = typeof socket?._bytesDispatched === 'number' && typeof socket._handle?.writeQueueSize === 'number'
  let last = 0
  const taken = () => {
    if (!internals) return written
    const dispatched = socket._bytesDispatched
    const queued = socket._handle?.writeQueueSize
    if (typeof dispatched === 'number' && typeof queued === 'number') last = dispatched - queued
    return last
  }
  // @note Reset, not closed: a closed socket's kernel goes on sending what it holds (megabytes on
  // loopback) to a client that does not read, which learns of the cut only once it has read it all.
  const cut = () => void (res.socket === null ? res.destroy() : resetConnection(res.socket))
  return { of: { taken, cut }, wrote: (bytes) => void (written += bytes) }
}

/**
 * Ends a connection with a reset (TCP RST), or plainly where it cannot be reset (a Unix socket,
 * a pipe): Node's `resetAndDestroy` throws on any handle but TCP.
 * @note A server listening on a Unix socket exited at the first connection the cap ended
 * (attack16 U1: `ERR_INVALID_HANDLE_TYPE`, uncaught).
 */
export function resetConnection(socket: Socket): void {
  try {
    socket.resetAndDestroy()
  } catch {
    socket.destroy()
  }
}

/**
 * Writes `body` a piece at a time, the next once the connection has taken the last ('drain'),
 * and calls `release` once it is all out or the connection is gone; a connection that takes
 * nothing for `stallMs` is closed. Past a turn's bytes it takes turns as `owner` ({@link writeInTurns}).
 * @note `res.end(body)` with a 44 MB list made Node copy all of it for a client that did not
 * read: 30 such clients took 2.7 GB (issue 20 F01).
 */
function sendInPieces(
  res: ServerResponse,
  body: string | Uint8Array,
  release: (() => void) | undefined,
  stallMs: number | undefined,
  wrote: (pieceLength: number) => void,
  owner: object | undefined,
): void {
  let at = 0
  const next = (): string | Uint8Array | undefined => {
    if (at === body.length) return undefined
    let end = Math.min(at + ANSWER_CHUNK_CHARS, body.length)
    // @note Never between the two halves of a surrogate pair: each half alone would go out as U+FFFD.
    const last = typeof body === 'string' ? body.charCodeAt(end - 1) : 0
    if (end < body.length && last >= 0xd800 && last <= 0xdbff) end--
    const piece = typeof body === 'string' ? body.slice(at, end) : body.subarray(at, end)
    at = end
    wrote(piece.length)
    return piece
  }
  writeInTurns(res, next, stallMs, owner, () => release?.())
}

/**
 * How many bytes of an answer written count as one of a request body in a turn of the event loop
 * ({@link answerTurns}): writing a 64 KiB piece (encoding it, the kernel's copy) takes about 3 ns a
 * byte, parsing a body of many properties about 80 (attack70 F1's profile, attack23 T2), so a turn
 * takes 8 pieces of an answer, {@link ANSWER_TURN_BYTES}.
 * @default 8
 */
export const ANSWER_BYTES_PER_TURN_BYTE = 8

/** How many bytes of an answer one turn of the event loop writes (as its connection takes them, until the next turn is given): 512 KiB. */
export const ANSWER_TURN_BYTES = TURN_BYTES * ANSWER_BYTES_PER_TURN_BYTE

/**
 * Writes the pieces `next` gives one after another, each once the connection has taken the one
 * before ('drain'), then ends the answer, and calls `done` once it is all out or the connection is
 * gone (`next` throwing cuts the connection: its client sees the answer end short). A connection
 * that takes nothing for `stallMs` (waiting for a turn aside) is closed.
 * @note Past a turn's bytes ({@link answerTurns}), the rest of a long answer waits for turns of the
 * event loop of its own, in rotation by client and tenant, each worth {@link ANSWER_TURN_BYTES} as
 * long as the connection takes them before the next turn is given: written whenever the kernel took them, 400 connections of
 * one key each pipelining four 1 MB lists and reading nothing were written one connection after
 * another (~3.5 MB of kernel buffer each), and other keys' new connections waited 5-15 s to be
 * answered (attack70 F1).
 * @note A turn worth one 64 KiB piece made a 4 MB list wait 62 turns behind any crowd (attack77 F1).
 * @note A timer of its own, restarted whenever the connection takes a piece, not the socket's
 * idle timeout: that one would stay on the socket after this answer (Node sets it again only
 * when no pipelined answer follows) and cut a later, slow answer.
 */
function writeInTurns(
  res: ServerResponse,
  next: () => string | Uint8Array | undefined,
  stallMs: number | undefined,
  owner: object | undefined,
  done: () => void,
): void {
  // Waiting for a turn of the event loop: not woken by 'drain', and not stalled by its client.
  let waiting = false
  // What is left of the turn given (bytes), and which turn it was (`answerTurns.given`): written on until the next is given.
  let share = 0
  let turnGiven = -1
  const stall = stallMs === undefined ? undefined : setTimeout(() => (waiting ? stall?.refresh() : res.destroy()), stallMs).unref()
  const drained = () => write()
  const finish = () => {
    clearTimeout(stall)
    res.off('drain', drained).off('finish', finish).off('close', finish)
    done()
  }
  function write(): void {
    if (waiting) return
    stall?.refresh()
    while (!res.destroyed) {
      let piece: string | Uint8Array | undefined
      try {
        piece = next()
      } catch {
        res.destroy()
        return
      }
      if (piece === undefined) {
        res.end()
        return
      }
      const taken = res.write(piece)
      share -= piece.length
      // Within its turn: on at once, or once the connection took this piece ('drain', at once when the kernel did).
      if (share > 0 && turnGiven === answerTurns.given) {
        if (taken) continue
        return
      }
      share = 0
      // @note Asked whether taken or not: a 64 KiB piece is over the socket's high-water mark, so `write` says false for
      // nearly every one the kernel takes at once ('drain' comes at once): asked only after a piece was taken, the crowd's
      // lists took no turns at all (review56 R2's suggestion, tried: 200 of 240 begun ahead of the partner).
      const turn = answerTurns.admit(piece.length / ANSWER_BYTES_PER_TURN_BYTE, owner, Number.POSITIVE_INFINITY, turnTickets.get(res.req)?.client)
      if (turn !== undefined) {
        waiting = true
        void turn.then(() => {
          waiting = false
          share = ANSWER_TURN_BYTES
          turnGiven = answerTurns.given
          // Given while the connection still holds what it had: its share once it took that ('drain').
          if (!res.writableNeedDrain) write()
        })
        return
      }
      if (!taken) return
    }
  }
  res.on('drain', drained).once('finish', finish).once('close', finish)
  write()
}
