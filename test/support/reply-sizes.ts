/**
 * A TCP proxy on loopback in front of a real redis-server that passes everything through and
 * weighs each reply Redis sends (RESP2, and RESP3's types but attributes): how large the largest one
 * was, in bytes on the wire. Stopped when the test that started it ends.
 */
import { connect, createServer, type Socket } from 'node:net'
import { onTestFinished } from 'vitest'

export interface ReplySizes {
  /** `redis://127.0.0.1:<proxy port>` */
  readonly url: string
  /** The largest reply passed so far, in bytes. */
  readonly largest: number
  /** How many replies were passed so far. */
  readonly replies: number
}

/** Starts the proxy in front of Redis on `upstreamPort`. */
export async function startReplySizes(upstreamPort: number): Promise<ReplySizes> {
  const sizes = { largest: 0, replies: 0 }
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = connect(upstreamPort, '127.0.0.1')
    const reader = new RespReader((bytes) => {
      sizes.largest = Math.max(sizes.largest, bytes)
      sizes.replies++
    })
    for (const socket of [client, upstream]) {
      sockets.add(socket)
      socket.once('close', () => sockets.delete(socket))
      socket.on('error', () => undefined)
    }
    client.on('close', () => upstream.destroy())
    upstream.on('close', () => client.destroy())
    client.pipe(upstream)
    upstream.on('data', (chunk: Buffer) => {
      reader.feed(chunk)
      if (!client.write(chunk)) {
        upstream.pause()
        client.once('drain', () => upstream.resume())
      }
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address !== null ? address.port : 0
  onTestFinished(async () => {
    for (const socket of sockets) socket.destroy()
    await new Promise((resolve) => server.close(resolve))
  })
  return {
    url: `redis://127.0.0.1:${port}`,
    get largest() {
      return sizes.largest
    },
    get replies() {
      return sizes.replies
    },
  }
}

/** Reads a stream of RESP values as it comes, telling `onValue` the bytes of each top-level one. */
class RespReader {
  readonly #onValue: (bytes: number) => void
  /** Elements still to come in each aggregate being read, outermost first. */
  readonly #open: number[] = []
  /** Bytes of a bulk string (and its CRLF) still to come. */
  #bulk = 0
  #line = ''
  #bytes = 0

  constructor(onValue: (bytes: number) => void) {
    this.#onValue = onValue
  }

  feed(chunk: Buffer): void {
    let at = 0
    while (at < chunk.length) {
      if (this.#bulk > 0) {
        const taken = Math.min(this.#bulk, chunk.length - at)
        this.#bulk -= taken
        this.#bytes += taken
        at += taken
        if (this.#bulk === 0) this.#ended()
        continue
      }
      const newline = chunk.indexOf(10, at)
      const end = newline < 0 ? chunk.length : newline + 1
      this.#line += chunk.toString('latin1', at, end)
      this.#bytes += end - at
      at = end
      if (newline >= 0) this.#header(this.#line)
    }
  }

  #header(line: string): void {
    this.#line = ''
    const count = Number.parseInt(line.slice(1), 10)
    const type = line[0] ?? ''
    if ('$=!'.includes(type)) {
      if (count >= 0) this.#bulk = count + 2
      else this.#ended()
    } else if ('*~>%'.includes(type) && count > 0) {
      this.#open.push(type === '%' ? 2 * count : count)
    } else {
      this.#ended()
    }
  }

  /** A value ended: the aggregate holding it has one element less to come, and may end too. */
  #ended(): void {
    for (;;) {
      const last = this.#open.length - 1
      if (last < 0) {
        this.#onValue(this.#bytes)
        this.#bytes = 0
        return
      }
      this.#open[last]!--
      if (this.#open[last]! > 0) return
      this.#open.pop()
    }
  }
}
