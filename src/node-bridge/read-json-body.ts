/**
 * Admin request bodies judged by the core's own rules (size, UTF-8, JSON, object), so an admin
 * route answers the same Error bodies as the API and never express's own errors.
 */
import type { IncomingMessage } from 'node:http'
import { parseJsonObject, type JsonObjectBody } from '../pipeline/request-body.js'
import { readNodeBody } from './node-request.js'

/** Reads `req` as a JSON object of at most `limit` bytes (`owner`: see readNodeBody). */
export async function readJsonObject(req: IncomingMessage, limit: number, owner?: object): Promise<JsonObjectBody> {
  const raw = await readNodeBody(req, limit, owner)
  if (!raw.ok) return { ok: false, code: raw.code, params: raw.params }
  return parseJsonObject(raw.text, req.headers['content-type'] ?? null)
}
