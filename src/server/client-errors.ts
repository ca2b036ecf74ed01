/**
 * Node's own answers to requests it cannot parse or that time out (400, 408, 431, 413): the same
 * statuses Node sends, plus `X-Content-Type-Options: nosniff`, which every answer carries.
 */
import type { Server } from 'node:http'
import type { Duplex } from 'node:stream'

const STATUS_BY_CODE: Readonly<Record<string, number>> = {
  HPE_HEADER_OVERFLOW: 431,
  HPE_CHUNK_EXTENSIONS_OVERFLOW: 413,
  ERR_HTTP_REQUEST_TIMEOUT: 408,
}

const REASONS: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Payload Too Large',
  431: 'Request Header Fields Too Large',
}

/** Installs the `clientError` listener on a server that serves the sandbox app. */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex & { _httpMessage?: { headersSent?: boolean } | null }) => {
    // @note As Node's default: a response already under way cannot be replaced by another one.
    if (error.code === 'ECONNRESET' || !socket.writable || socket._httpMessage?.headersSent) {
      socket.destroy()
      return
    }
    const status = STATUS_BY_CODE[error.code ?? ''] ?? 400
    socket.end(
      `HTTP/1.1 ${status} ${REASONS[status]}\r\nX-Content-Type-Options: nosniff\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`,
    )
  })
}
