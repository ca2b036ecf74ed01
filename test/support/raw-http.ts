/**
 * Raw HTTP over `node:net`, for bytes no HTTP client would send. Loopback only, and every wait is
 * bounded: a call never takes longer than its `waitMs`.
 */
import { connect, type Socket } from 'node:net'

export interface RawAnswer {
  /** Everything the server sent, as latin1 text. */
  readonly text: string
  /** The status of the first response, or undefined when none came. */
  readonly status: number | undefined
  /** Whether the server closed the connection before `waitMs` passed. */
  readonly closed: boolean
}

const statusOf = (text: string) => {
  const match = /^HTTP\/1\.[01] (\d{3})/.exec(text)
  return match ? Number(match[1]) : undefined
}

/** Connects to `origin` (`http://127.0.0.1:<port>`) on loopback and returns the socket once connected. */
export function openSocket(origin: string): Promise<Socket> {
  const { hostname, port } = new URL(origin)
  if (hostname !== '127.0.0.1') throw new Error(`raw-http talks to 127.0.0.1 only, not ${hostname}`)
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), '127.0.0.1', () => resolve(socket))
    socket.once('error', reject)
  })
}

/** Collects what `socket` receives until the server closes it or `waitMs` passes. */
export function collect(socket: Socket, waitMs: number): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = []
    const done = (closed: boolean) => {
      clearTimeout(timer)
      socket.destroy()
      const text = Buffer.concat(chunks).toString('latin1')
      resolve({ text, status: statusOf(text), closed })
    }
    const timer = setTimeout(() => done(false), waitMs)
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', () => undefined)
    socket.once('close', () => done(true))
    if (socket.destroyed) done(true)
  })
}

/**
 * Sends `chunks` and ends the writing side (unless `end` is false), then collects the answer.
 * @default waitMs 5000
 */
export async function exchange(
  origin: string,
  chunks: readonly (string | Uint8Array)[],
  { end = true, waitMs = 5000 }: { end?: boolean; waitMs?: number } = {},
): Promise<RawAnswer> {
  const socket = await openSocket(origin)
  const answer = collect(socket, waitMs)
  socket.on('error', () => undefined)
  for (const chunk of chunks) if (!socket.destroyed) socket.write(chunk)
  if (end && !socket.destroyed) socket.end()
  return answer
}

/** A small deterministic byte generator (mulberry32), so "random" inputs are the same every run. */
export function seededBytes(seed: number, length: number): Uint8Array {
  let state = seed >>> 0
  const bytes = new Uint8Array(length)
  for (let i = 0; i < length; i++) {
    state = (state + 0x6d2b79f5) >>> 0
    let t = state
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    bytes[i] = ((t ^ (t >>> 14)) >>> 0) & 0xff
  }
  return bytes
}

/** One response of a raw conversation: its status and body (UTF-8). */
export interface Parsed {
  readonly status: number
  readonly body: string
}

/** The responses in `text` (latin1, as collected), each read by its Content-Length. */
export function responsesOf(text: string): Parsed[] {
  const parsed: Parsed[] = []
  let at = 0
  while (at < text.length) {
    const end = text.indexOf('\r\n\r\n', at)
    if (end === -1) break
    const head = text.slice(at, end)
    const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1])
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0)
    parsed.push({ status, body: Buffer.from(text.slice(end + 4, end + 4 + length), 'latin1').toString('utf8') })
    at = end + 4 + length
  }
  return parsed
}
