/**
 * A replica as its master sees one, driven by a test: a TCP connection that may be opened long
 * before it asks for a sync (as a proxy's pooled connection is), then asks for a full sync under
 * a listening port of its choosing, reads it, and acknowledges the offset it holds every second
 * (and at once when the master asks, as `WAIT` makes it) until told to stop: its link is then
 * half-open, listed by the master until `repl-timeout`. Enough of the protocol for the master to
 * list it online and count its acknowledgements; it applies nothing.
 */
import { connect, type Socket } from 'node:net'

const command = (...args: readonly (string | number)[]) => `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(String(arg))}\r\n${arg}\r\n`).join('')}`

export class FakeReplica {
  readonly #socket: Socket
  #stage: 'open' | 'handshake' | 'header' | 'snapshot' | 'stream' = 'open'
  #pending = Buffer.alloc(0)
  #snapshotLeft = 0
  #offset = 0
  #okays = 0
  #acknowledging = false
  #timer: NodeJS.Timeout | undefined
  /** Settles once the full sync has been read. */
  readonly synced: Promise<void>
  #onSynced!: () => void

  private constructor(socket: Socket) {
    this.#socket = socket
    this.synced = new Promise((resolve) => (this.#onSynced = resolve))
    socket.on('data', (chunk: Buffer) => this.#read(chunk))
    socket.on('error', () => undefined)
  }

  /** Opens a connection to the master on `port` (loopback), asking for nothing yet. */
  static open(port: number): Promise<FakeReplica> {
    return new Promise((resolve, reject) => {
      const socket = connect(port, '127.0.0.1')
      socket.once('connect', () => resolve(new FakeReplica(socket))).once('error', reject)
    })
  }

  /** Asks for a full sync as a replica listening on `listeningPort`. */
  sync(listeningPort: number): void {
    this.#stage = 'handshake'
    this.#socket.write(command('REPLCONF', 'listening-port', listeningPort) + command('REPLCONF', 'capa', 'psync2'))
  }

  /** Stops acknowledging, the connection left open: the link half-open, as a replica gone with its host. */
  stopAcknowledging(): void {
    this.#acknowledging = false
    clearInterval(this.#timer)
  }

  close(): void {
    this.stopAcknowledging()
    this.#socket.destroy()
  }

  #acknowledge(): void {
    if (this.#acknowledging) this.#socket.write(command('REPLCONF', 'ACK', this.#offset))
  }

  #read(chunk: Buffer): void {
    if (this.#stage === 'stream') {
      this.#offset += chunk.length
      if (chunk.includes('GETACK')) this.#acknowledge()
      return
    }
    this.#pending = Buffer.concat([this.#pending, chunk])
    for (;;) {
      if (this.#stage === 'handshake') {
        // +OK to each REPLCONF, then PSYNC (refused while replies are pending), answered +FULLRESYNC <replid> <offset>.
        const end = this.#pending.indexOf('\r\n')
        if (end < 0) return
        const line = this.#pending.subarray(0, end).toString()
        this.#pending = this.#pending.subarray(end + 2)
        if (line === '+OK' && ++this.#okays === 2) this.#socket.write(command('PSYNC', '?', -1))
        if (line.startsWith('+FULLRESYNC')) {
          this.#offset = Number(line.split(' ')[2])
          this.#stage = 'header'
        }
      } else if (this.#stage === 'header') {
        // Newlines while the master prepares the snapshot, then $<length>.
        while (this.#pending[0] === 0x0a) this.#pending = this.#pending.subarray(1)
        const end = this.#pending.indexOf('\r\n')
        if (end < 0) return
        this.#snapshotLeft = Number(this.#pending.subarray(1, end).toString())
        this.#pending = this.#pending.subarray(end + 2)
        this.#stage = 'snapshot'
      } else if (this.#stage === 'snapshot') {
        const taken = Math.min(this.#snapshotLeft, this.#pending.length)
        this.#snapshotLeft -= taken
        this.#pending = this.#pending.subarray(taken)
        if (this.#snapshotLeft > 0) return
        this.#stage = 'stream'
        this.#offset += this.#pending.length
        this.#pending = Buffer.alloc(0)
        this.#acknowledging = true
        this.#acknowledge()
        this.#timer = setInterval(() => this.#acknowledge(), 1000)
        this.#onSynced()
        return
      } else {
        return
      }
    }
  }
}
