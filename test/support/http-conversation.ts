/**
 * HTTP/1.1 conversations on one raw socket, for what `fetch` cannot do: several requests written
 * at once (pipelined), a client that half-closes after its request, one that stops reading for a
 * while, one that leaves before its answer. Answers are parsed in the order they come. Loopback
 * only (see raw-http.ts), and every wait is bounded.
 */
import type { Socket } from 'node:net'
import { openSocket } from './raw-http.js'

export interface HttpRequest {
  readonly method: string
  /** Path and query (`/v1/categories`). */
  readonly path: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string
}

export interface HttpAnswer {
  readonly status: number
  /** Header names in lower case; a repeated header keeps its last value. */
  readonly headers: Readonly<Record<string, string>>
  /** The body, decoded as UTF-8. */
  readonly body: string
}

export interface Conversation {
  /** The answers, in the order they came (at most one per request). */
  readonly answers: readonly HttpAnswer[]
  /** Whether the server closed the connection before every request had its answer. */
  readonly closedEarly: boolean
  /** Whether `waitMs` passed before every request had its answer. */
  readonly timedOut: boolean
  /** Whether the connection was refused: nothing was sent. */
  readonly refused?: boolean
}

export interface ConversationOptions {
  /** End the writing side once every request is written (a half-close). @default false */
  readonly halfClose?: boolean
  /** Do not read for this long once the requests are written (a slow reader). @default 0 */
  readonly pauseMs?: number
  /** Called once every request is written (and the pause, if any, has begun). */
  readonly onSent?: () => void
  /** Give up after this long. @default 15000 */
  readonly waitMs?: number
}

/** The bytes of one request: HTTP/1.1, `Host`, `Content-Length` when there is a body. */
export function encodeRequest(request: HttpRequest, host: string): Buffer {
  const body = request.body === undefined ? undefined : Buffer.from(request.body, 'utf8')
  const lines = [`${request.method} ${request.path} HTTP/1.1`, `host: ${host}`]
  for (const [name, value] of Object.entries(request.headers ?? {})) lines.push(`${name}: ${value}`)
  if (body !== undefined) lines.push(`content-length: ${body.length}`)
  const head = Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1')
  return body === undefined ? head : Buffer.concat([head, body])
}

/** Parses HTTP/1.1 responses from a byte stream, `Content-Length` or chunked. */
export class ResponseParser {
  #buffer = Buffer.alloc(0)

  /** Adds bytes and returns the responses they complete. */
  feed(chunk: Buffer): HttpAnswer[] {
    this.#buffer = Buffer.concat([this.#buffer, chunk])
    const answers: HttpAnswer[] = []
    for (let answer = this.#next(); answer; answer = this.#next()) answers.push(answer)
    return answers
  }

  #next(): HttpAnswer | undefined {
    const end = this.#buffer.indexOf('\r\n\r\n')
    if (end < 0) return undefined
    const [statusLine = '', ...lines] = this.#buffer.subarray(0, end).toString('latin1').split('\r\n')
    const match = /^HTTP\/1\.[01] (\d{3})/.exec(statusLine)
    if (!match) throw new Error(`not an HTTP response: ${JSON.stringify(statusLine.slice(0, 80))}`)
    const headers: Record<string, string> = {}
    for (const line of lines) {
      const colon = line.indexOf(':')
      headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim()
    }
    const start = end + 4
    let body: Buffer
    let rest: number
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const parts: Buffer[] = []
      let at = start
      for (;;) {
        const lineEnd = this.#buffer.indexOf('\r\n', at)
        if (lineEnd < 0) return undefined
        const size = Number.parseInt(this.#buffer.subarray(at, lineEnd).toString('latin1'), 16)
        if (this.#buffer.length < lineEnd + 2 + size + 2) return undefined
        if (size === 0) {
          // No trailers from this server: the last chunk ends with one empty line.
          rest = lineEnd + 4
          break
        }
        parts.push(this.#buffer.subarray(lineEnd + 2, lineEnd + 2 + size))
        at = lineEnd + 2 + size + 2
      }
      body = Buffer.concat(parts)
    } else {
      const length = Number(headers['content-length'] ?? 0)
      if (this.#buffer.length < start + length) return undefined
      body = this.#buffer.subarray(start, start + length)
      rest = start + length
    }
    this.#buffer = this.#buffer.subarray(rest)
    return { status: Number(match[1]), headers, body: body.toString('utf8') }
  }
}

/**
 * Writes every request on one new connection in one write (pipelined), then reads the answers
 * until each request has one, the server closes, or `waitMs` passes.
 */
export async function converse(origin: string, requests: readonly HttpRequest[], options: ConversationOptions = {}): Promise<Conversation> {
  let socket: Socket
  try {
    socket = await openSocket(origin)
  } catch {
    // Refused (the server is down): no request was sent.
    return { answers: [], closedEarly: true, timedOut: false, refused: true }
  }
  return talk(socket, new URL(origin).host, requests, options)
}

function talk(socket: Socket, host: string, requests: readonly HttpRequest[], options: ConversationOptions): Promise<Conversation> {
  const { halfClose = false, pauseMs = 0, waitMs = 15_000 } = options
  return new Promise((resolve, reject) => {
    const parser = new ResponseParser()
    const answers: HttpAnswer[] = []
    let settled = false
    const done = (closedEarly: boolean, timedOut: boolean) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      clearTimeout(resume)
      socket.destroy()
      resolve({ answers, closedEarly, timedOut })
    }
    const timer = setTimeout(() => done(false, true), waitMs)
    let resume: NodeJS.Timeout | undefined
    socket.on('data', (chunk: Buffer) => {
      try {
        answers.push(...parser.feed(chunk))
      } catch (error) {
        settled = true
        clearTimeout(timer)
        socket.destroy()
        reject(error instanceof Error ? error : new Error(String(error)))
        return
      }
      if (answers.length >= requests.length) done(false, false)
    })
    socket.on('error', () => undefined)
    socket.once('close', () => done(answers.length < requests.length, false))
    if (pauseMs > 0) {
      socket.pause()
      resume = setTimeout(() => socket.resume(), pauseMs)
    }
    socket.write(Buffer.concat(requests.map((request) => encodeRequest(request, host))))
    if (halfClose) socket.end()
    options.onSent?.()
    if (requests.length === 0) done(false, false)
  })
}

/** Writes one complete request and closes the connection at once, without waiting for its answer. */
export async function sendAndLeave(origin: string, request: HttpRequest): Promise<void> {
  const socket = await openSocket(origin)
  socket.on('error', () => undefined)
  await new Promise<void>((resolve) => socket.write(encodeRequest(request, new URL(origin).host), () => resolve()))
  socket.destroy()
}
