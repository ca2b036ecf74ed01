/**
 * Judging a JSON request body the way the interface wants it: bounded in size, strict about
 * UTF-8 and JSON, and telling apart "no body", "not JSON" and "not an object". Each runtime reads
 * the bytes its own way (`msw/fetch-request.ts`, `node-bridge/node-request.ts`); the rules are here.
 */
import type { ErrorCode, ErrorParams } from '../contract/errors.js'
import { isJsonMediaType } from '../contract/media-type.js'

/** @default 1 MiB */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

export type RawBody =
  | { readonly ok: true; readonly text: string }
  | {
      readonly ok: false
      readonly code: ErrorCode
      readonly params: ErrorParams
      /** The client's connection ended before the body did: nobody is left to answer. */
      readonly gone?: true
    }

/**
 * The room a body of `contentLength` (the header's value, if any) takes while it is read, judged
 * and answered: twice its bytes (its text, up to two bytes a character, and its chunks), the
 * declared length capped at `limit`, else `limit` itself.
 */
export function bodyReservation(contentLength: string | null | undefined, limit: number): number {
  const declared = contentLength === null || contentLength === undefined ? Number.NaN : Number(contentLength)
  return 2 * (Number.isSafeInteger(declared) && declared >= 0 ? Math.min(declared, limit) : limit)
}

/** The answer to a body over `limit` bytes. */
export function payloadTooLarge(limit: number): RawBody {
  return { ok: false, code: 'payload_too_large', params: { limit } }
}

/**
 * A stream's chunks, read one by one and held only while they come to at most `limit` bytes in
 * all: undefined once they pass it, the reader then handed to `stop` (which cancels it) and
 * nothing more read. The one bounded read of a Fetch body (a request msw hands the handlers, a
 * live service's answer to `verify` and `scenarios record`).
 * @example const read = await readCapped(request.body, limit, (reader) => reader.cancel())
 */
export async function readCapped(
  stream: ReadableStream<Uint8Array>,
  limit: number,
  stop: (reader: ReadableStreamDefaultReader<Uint8Array>) => Promise<void> | void,
): Promise<{ readonly chunks: Uint8Array[]; readonly size: number } | undefined> {
  const reader = stream.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) return { chunks, size }
    size += value.byteLength
    if (size > limit) {
      await stop(reader)
      return undefined
    }
    chunks.push(value)
  }
}

/** A body's chunks (`size` bytes in all) as one array of bytes (the chunk itself when there is one). */
export function joinChunks(chunks: readonly Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!
  const bytes = new Uint8Array(size)
  let offset = 0
  for (const chunk of chunks) {
    bytes.set(chunk, offset)
    offset += chunk.byteLength
  }
  return bytes
}

/** The text of a body's chunks (`size` bytes in all), refusing bytes that are not UTF-8. */
export function decodeUtf8(chunks: readonly Uint8Array[], size: number): RawBody {
  const bytes = joinChunks(chunks, size)
  try {
    return { ok: true, text: utf8.decode(bytes) }
  } catch {
    return { ok: false, code: 'invalid_json', params: { reason: 'the body is not valid UTF-8' } }
  }
}

/** @note `fatal`: bytes that are not UTF-8 are refused rather than silently replaced. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

export type JsonObjectBody =
  | { readonly ok: true; readonly value: Record<string, unknown> }
  | { readonly ok: false; readonly code: ErrorCode; readonly params: ErrorParams }

/** Judges a text body that must be a JSON object, in the order a client would fix things. */
export function parseJsonObject(text: string, contentType: string | null): JsonObjectBody {
  if (text.trim() === '') {
    return { ok: false, code: 'invalid_body', params: { reason: 'A JSON object body is required, but the body is empty' } }
  }
  if (!isJsonMediaType(contentType)) {
    return { ok: false, code: 'unsupported_media_type', params: { contentType: contentType ?? 'no Content-Type' } }
  }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (error) {
    return { ok: false, code: 'invalid_json', params: { reason: (error as Error).message } }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return {
      ok: false,
      code: 'invalid_body',
      params: { reason: `The body must be a JSON object, got ${describeJsonType(value)}` },
    }
  }
  return { ok: true, value: value as Record<string, unknown> }
}

function describeJsonType(value: unknown): string {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return `a ${typeof value}`
}
