/**
 * Admin request bodies judged by the core's own rules (size, UTF-8, JSON, object), so an admin
 * route answers the same Error bodies as the API and never express's own errors.
 */
import type { IncomingMessage } from 'node:http'
import { Readable } from 'node:stream'
import { parseJsonObject, readText, type JsonObjectBody } from '../core/request-body.js'

/** Reads `req` as a JSON object of at most `limit` bytes. */
export async function readJsonObject(req: IncomingMessage, limit: number): Promise<JsonObjectBody> {
  const headers = new Headers()
  for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!)
  const request = new Request('http://sandbox.internal/', {
    method: 'POST',
    headers,
    body: Readable.toWeb(req) as ReadableStream<Uint8Array>,
    duplex: 'half',
  } as RequestInit)
  const raw = await readText(request, limit)
  if (!raw.ok) return { ok: false, code: raw.code, params: raw.params }
  return parseJsonObject(raw.text, headers.get('content-type'))
}
