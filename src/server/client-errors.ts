/**
 * The answers to requests Node's HTTP server refuses before any route (a malformed request,
 * headers over its size, a timeout, an `Expect` it cannot meet): the Error body of the error
 * table, as every other answer, with `X-Request-Id` and `X-Content-Type-Options: nosniff`.
 */
import { closeAfter } from './conversation.js'
import { newRequestId } from './request-id.js'
import { maxHeaderSize, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import { apiError, type ErrorCode, type ErrorParams } from '../contract/errors.js'
import { sendError } from '../node-bridge/http-errors.js'
import { refuseBody } from '../node-bridge/node-request.js'

/** Node's error codes of the requests it refuses, as the error table names them. */
const ANSWERS: Readonly<Record<string, { readonly code: ErrorCode; readonly params: ErrorParams }>> = {
  HPE_HEADER_OVERFLOW: { code: 'headers_too_large', params: { limit: maxHeaderSize } },
  HPE_CHUNK_EXTENSIONS_OVERFLOW: { code: 'chunk_extensions_too_large', params: {} },
  ERR_HTTP_REQUEST_TIMEOUT: { code: 'request_timeout', params: { reason: 'the request was not received in time' } },
}

const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Payload Too Large',
  431: 'Request Header Fields Too Large',
}

/** What the server does for the requests it refuses itself, as for those it routes: stamping and logging them. */
export interface RefusalHooks {
  /**
   * Stamps a refused request that has a response (an unmet `Expect`, one past the connection
   * cap) with its headers, and arranges its log line. @default {@link stampPlainly}
   */
  readonly stamp?: ((req: IncomingMessage, res: ServerResponse) => void) | undefined
  /** Logs a request refused before Node could read it (a malformed request, headers too large, a timeout). */
  readonly logUnread?: ((requestId: string, status: number) => void) | undefined
  /**
   * The CORS headers of a refusal of a request Node could not parse, by the `Origin` found in the
   * bytes it read (undefined when none was), so that a browser script can read the 400 or 431.
   * @default none
   */
  readonly corsOf?: ((origin: string | undefined) => readonly (readonly [name: string, value: string])[]) | undefined
}

/** The `Origin` header's value in the raw bytes of a request Node could not parse, if they hold one. */
function originIn(raw: unknown): string | undefined {
  if (!Buffer.isBuffer(raw)) return undefined
  return /\r\norigin:[ \t]*([^\r\n]*?)[ \t]*\r\n/i.exec(raw.toString('latin1'))?.[1]
}

/** The headers every answer carries (`X-Request-Id`, `X-Content-Type-Options`), for a server without a request log. */
export function stampPlainly(_req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('X-Request-Id', newRequestId())
  res.setHeader('X-Content-Type-Options', 'nosniff')
}

/** Installs the `clientError` and `checkExpectation` listeners on a server that serves the sandbox app. */
export function answerClientErrors(server: Server, hooks: RefusalHooks = {}): void {
  /**
   * Sockets whose refusal waits for the answers ahead of it.
   * @note Node reports every later chunk on such a socket as another error, each holding its
   * bytes: answered once and read no further, a client sending garbage while a slow answer is
   * made holds nothing (before, one waiting listener and its chunk per error: 400 MiB held).
   */
  const refusing = new WeakSet<Duplex>()
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: ServerResponse | null }) => {
    if (error.code === 'ECONNRESET') {
      socket.destroy()
      return
    }
    if (refusing.has(socket)) return
    refusing.add(socket)
    socket.pause()
    refuseAfterAnswers(socket, ANSWERS[error.code ?? ''] ?? { code: 'bad_request', params: { reason: describe(error) } }, error.code, originIn((error as { rawPacket?: unknown }).rawPacket))
  })
  // @note Node hands a CONNECT to `connect` listeners, not to the request listener, and with none
  // destroys the connection: the answers still owed on it were lost (a create pipelined before a
  // CONNECT was stored and never answered). It is refused after them, as a malformed request is.
  // A request asking to upgrade the connection (`Upgrade: websocket`) is a request like any other
  // while nobody listens to `upgrade`: answered in its turn, then the connection closes (Node reads
  // nothing after it: see http-server.ts).
  server.on('connect', (_req: IncomingMessage, socket: Duplex & { _httpMessage?: ServerResponse | null }) => {
    if (refusing.has(socket)) return
    refusing.add(socket)
    socket.pause()
    refuseAfterAnswers(socket, { code: 'bad_request', params: { reason: 'CONNECT is not supported: this server is not a proxy' } })
  })
  /**
   * Refuses what came on `socket` (with `answer`; `errorCode`: Node's, for a request it could not
   * parse) once the requests received in full before it have their answers.
   * @note Bytes that are not HTTP right after a whole request (a Content-Length one short of the
   * body): answered with the 400 at once, a create that was stored looked failed to its client,
   * which would send it again.
   */
  const refuseAfterAnswers = (
    socket: Duplex & { _httpMessage?: ServerResponse | null },
    answer: { readonly code: ErrorCode; readonly params: ErrorParams },
    errorCode?: string,
    origin?: string,
  ): void => {
    // @note Each answer ahead is waited for until it closes: Node hands the socket to the next
    // one when an answer finishes, and `writableFinished` is true as soon as it was flushed, even
    // before that (waiting on it, two pipelined answers ahead of a create dropped the create's).
    const inFlight = socket._httpMessage
    if (inFlight && inFlight.req.complete && !inFlight.destroyed && !inFlight.closed) {
      inFlight.once('close', () => refuseAfterAnswers(socket, answer, errorCode, origin))
      return
    }
    // @note As Node's default: a response already under way cannot be replaced by another one.
    if (!socket.writable || inFlight?.headersSent) {
      socket.destroy()
      return
    }
    const { code, params } = answer
    // @note A request whose body was still arriving (cut off at the request timeout, or chunks
    // that are not HTTP) is answered through its own response: its log line and journal entry
    // say the answer its client got, under the X-Request-Id it got, where before they said it
    // was dropped. The connection closes after it (writeJson: the rest of the body is unread).
    // A client that left mid-body (the socket's end) is still a dropped connection.
    if (inFlight && !inFlight.req.complete && errorCode !== 'HPE_INVALID_EOF_STATE') {
      refuseBody(inFlight.req, code, params)
      sendError(inFlight, code, params)
      return
    }
    const text = JSON.stringify(apiError(code, params))
    const requestId = newRequestId()
    // A request whose client left mid-body has a line of its own, as dropped.
    if (!inFlight) hooks.logUnread?.(requestId, apiError(code).status)
    socket.end(
      [
        `HTTP/1.1 ${apiError(code).status} ${REASONS[apiError(code).status] ?? 'Error'}`,
        'Content-Type: application/json',
        `Content-Length: ${Buffer.byteLength(text)}`,
        `X-Request-Id: ${requestId}`,
        'X-Content-Type-Options: nosniff',
        // @note Without them a browser script saw a network error, not the 431 or 400 (attack14 C1).
        ...(hooks.corsOf?.(origin) ?? []).map(([name, value]) => `${name}: ${value}`),
        'Connection: close',
        '',
        text,
      ].join('\r\n'),
    )
    letGo(socket)
  }
  // @note With a listener, Node leaves the answer to an unmet `Expect` to us instead of a bare 417.
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    ;(hooks.stamp ?? stampPlainly)(req, res)
    closeAfter(res)
    sendError(res, 'expectation_failed', { expect: JSON.stringify(req.headers.expect ?? '') })
  })
}

/** How long a refused connection is kept once answered when its client does not take the answer, in ms. */
const LINGER_MS = 2000

/**
 * Lets go of a connection answered and ended: closed once the answer is handed to the kernel
 * (which still delivers it, then the FIN), or past {@link LINGER_MS} when the client does not
 * take it. It is read no further (what its client sends on is not looked at).
 * @note Paused and half-open (`httpAllowHalfOpen`), an answered socket never saw its client's
 * FIN, so it was never closed: each refused request held its connection, and a slot of the hard
 * cap, until restart; 1,300 malformed requests refused every connection, health included (attack9 C1).
 */
function letGo(socket: Duplex): void {
  const timer = setTimeout(() => socket.destroy(), LINGER_MS).unref()
  socket.once('close', () => clearTimeout(timer))
  socket.once('finish', () => socket.destroy())
}

/** What Node's parser said, without its internals: `Parse Error: Invalid method encountered` → `invalid method`. */
function describe(error: NodeJS.ErrnoException): string {
  const reason = 'reason' in error && typeof error.reason === 'string' ? error.reason : 'the request is not valid HTTP/1.1'
  return reason.replace(/ encountered$/i, '').replace(/^./, (first) => first.toLowerCase())
}
