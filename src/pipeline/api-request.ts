/**
 * What the pipeline reads and what it answers, in the smallest shape every runtime can give
 * cheaply: msw hands the handlers a Fetch `Request` and wants a `Response`; the standalone server
 * has Node's `IncomingMessage` and `ServerResponse`, and building Fetch objects for them cost
 * more than the rest of the request (see docs/decisions/0001-lean-server-bridge.md).
 */
import type { JournalHeaders } from '../core/journal.js'
import type { Tenant } from '../storage/tenant.js'
import type { RawBody } from './request-body.js'

/** Request headers, read by lower-case name and listed as `[name, value]` pairs (a Fetch `Headers` is one). */
export interface HeaderReader extends JournalHeaders {
  get(name: string): string | null
}

/** A request as the pipeline sees it. */
export interface ApiRequest {
  /** The id the answer carries as `X-Request-Id`, when the runtime gives one (the standalone server). */
  readonly id?: string | undefined
  readonly method: string
  /** The absolute URL, as the client asked for it. */
  readonly url: string
  /** The URL's path (no query), as a URL parser normalises it. */
  readonly path: string
  readonly headers: HeaderReader
  /**
   * Reads the body as UTF-8 text, refusing more than `limit` bytes without buffering them; `owner`
   * (its tenant) takes turns with other owners where large bodies wait for the event loop.
   */
  readBody(limit: number, owner?: object): Promise<RawBody>
  /**
   * Told when the request starts waiting out a delay (`Prefer: delay`, a scenario's latency, a
   * planned answer's `delayMs`), with `cut`: the runtime may call it to end the wait, and the request is
   * then answered 503 `over_capacity` (`reason`) without running. Returns what to call once the
   * wait is over. The server uses it to make room for another tenant at its connection cap.
   * @default none: a delay is always waited out
   * @example request.waiting?.((reason) => console.log(`cut: ${reason}`))
   */
  readonly waiting?: ((cut: (reason: string) => void) => () => void) | undefined
}

/**
 * A body given a piece at a time, each made when the one before is out (a list read from the
 * store as its client takes it): what the answer holds is about one piece, never the whole text.
 */
export interface AnswerPieces {
  /**
   * The next piece of the body's text, or undefined once all of it was given. Throws when the
   * rest cannot be given (a storage failure): the answer is then broken off.
   */
  next(): string | undefined
  /** Ends it before its end (its connection is gone): lets go of what it keeps; calling it again, or after its end, does nothing. */
  close(): void
}

/**
 * What the pipeline answers: a JSON text with its status and headers, or a dropped connection;
 * with the tenant it answered for, when the key named one (the server's log line names it).
 */
export type ApiAnswer =
  | {
      readonly kind: 'http'
      readonly status: number
      readonly headers: Readonly<Record<string, string>>
      readonly body: string
      /** The body as bytes to send in place of `body` (a proxied answer, passed on as the service sent it). @default `body` */
      readonly bytes?: Uint8Array | undefined
      /**
       * The body as pieces to send in place of `body` (then empty), for a runtime that sends an
       * answer as it is made (`PipelineOptions.streams`): it must {@link AnswerPieces.close} them
       * when it does not send them to their end. @default `body`
       */
      readonly pieces?: AnswerPieces | undefined
      /**
       * True when `body` is the text the store keeps ready between writes (counted with the
       * tenant's data), not a copy made for this answer: sending it holds nothing more.
       */
      readonly shared?: boolean | undefined
      /** Lets go of what the read behind `body` reserved: the runtime calls it once the answer is counted as it is sent, or dropped. */
      readonly release?: (() => void) | undefined
      readonly tenant?: Tenant | undefined
    }
  | { readonly kind: 'network'; readonly tenant?: Tenant | undefined }
