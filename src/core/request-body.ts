/**
 * Reading a JSON request body the way the interface wants it judged: bounded in size, strict
 * about UTF-8 and JSON, and telling apart "no body", "not JSON" and "not an object".
 */
import type { ErrorCode, ErrorParams } from '../contract/errors.js'

/** @default 1 MiB */
export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024

export type RawBody =
  | { readonly ok: true; readonly text: string }
  | { readonly ok: false; readonly code: ErrorCode; readonly params: ErrorParams }

/** The answer to a body over `limit` bytes. */
export function payloadTooLarge(limit: number): RawBody {
  return { ok: false, code: 'payload_too_large', params: { limit } }
}

/** Reads the body as UTF-8 text, refusing more than `limit` bytes without buffering them. */
export async function readText(request: Request, limit: number): Promise<RawBody> {
  const declared = Number(request.headers.get('content-length') ?? Number.NaN)
  if (declared > limit) {
    discard(request.body)
    return payloadTooLarge(limit)
  }
  if (!request.body) return { ok: true, text: '' }
  const reader = request.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      discard(reader)
      return payloadTooLarge(limit)
    }
    chunks.push(value)
  }
  return decodeUtf8(chunks, size)
}

/** The text of a body's chunks (`size` bytes in all), refusing bytes that are not UTF-8. */
export function decodeUtf8(chunks: readonly Uint8Array[], size: number): RawBody {
  let bytes: Uint8Array
  if (chunks.length === 1) {
    bytes = chunks[0]!
  } else {
    bytes = new Uint8Array(size)
    let offset = 0
    for (const chunk of chunks) {
      bytes.set(chunk, offset)
      offset += chunk.byteLength
    }
  }
  try {
    return { ok: true, text: utf8.decode(bytes) }
  } catch {
    return { ok: false, code: 'invalid_json', params: { reason: 'the body is not valid UTF-8' } }
  }
}

/** @note `fatal`: bytes that are not UTF-8 are refused rather than silently replaced. */
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false })

/**
 * @note Not awaited: msw hands handlers one branch of a tee'd stream, and cancelling a branch
 * only settles once the other branch is cancelled too, which never happens.
 */
function discard(stream: { cancel(): Promise<void> } | null): void {
  stream?.cancel().catch(() => undefined)
}

/** `application/json`, with or without parameters, and any `application/*+json`. */
export function isJsonMediaType(contentType: string | null): boolean {
  if (contentType === null) return false
  const essence = contentType.split(';', 1)[0]!.trim().toLowerCase()
  return essence === 'application/json' || /^application\/[\w.!#$&^+-]+\+json$/.test(essence)
}

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
