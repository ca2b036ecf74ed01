/**
 * The invalid bodies `verify` sends to `createCategory`, one per class of 400: a class is one
 * Error the sandbox itself answers (code and message), found by judging candidate bodies with the
 * sandbox's own rules (`pipeline/request-body.ts`, `validateNewCategory`, the NewCategory
 * schema). The candidates are only inputs; what is invalid, and why, is the sandbox's to say.
 */
import * as z from 'zod'
import { apiError } from '../contract/errors.js'
import { categorySchemas } from '../contract/schemas.js'
import { DEFAULT_CATEGORY_LIMITS, type CategoryLimits } from '../contract/limits.js'
import { validateNewCategory } from '../pipeline/categories.js'
import { decodeUtf8, parseJsonObject } from '../pipeline/request-body.js'

/** A request body and its content type, as sent. */
export interface ProbeBody {
  /** What the body is, for the report: `name: a number`, `malformed JSON`. */
  readonly what: string
  /** `null`: no Content-Type header. */
  readonly contentType: string | null
  readonly bytes: Uint8Array<ArrayBuffer>
}

/** An invalid body and the Error the sandbox answers it with. */
export interface InvalidBody extends ProbeBody {
  /** The sandbox's answer: its status is the one to expect; its code and message are the sandbox's own. */
  readonly expected: { readonly status: number; readonly code: string; readonly message: string }
}

const JSON_TYPE = 'application/json'
const encoder = new TextEncoder()
const text = (what: string, body: string, contentType: string | null = JSON_TYPE): ProbeBody => ({ what, contentType, bytes: encoder.encode(body) })

/**
 * The Error the sandbox answers a body with, judged in the order its pipeline judges it, or
 * undefined when the body is a valid NewCategory.
 */
export function judgeBody(body: ProbeBody, limits: LengthLimits): InvalidBody['expected'] | undefined {
  const raw = decodeUtf8([body.bytes], body.bytes.byteLength)
  if (!raw.ok) return apiError(raw.code, raw.params)
  const parsed = parseJsonObject(raw.text, body.contentType)
  if (!parsed.ok) return apiError(parsed.code, parsed.params)
  const judged = validateNewCategory(parsed.value, false, { ...DEFAULT_CATEGORY_LIMITS, ...limits })
  return 'kind' in judged ? apiError(judged.code, judged.params) : undefined
}

type LengthLimits = Pick<CategoryLimits, 'nameMaxLength' | 'descriptionMaxLength'>

/** A field value of each kind a client gets wrong; the schema decides which are invalid for which field. */
function valueCandidates(property: { readonly maxLength?: number }): { what: string; value: unknown }[] {
  return [
    { what: 'a number', value: 42 },
    { what: 'null', value: null },
    { what: 'an object', value: { text: 'x' } },
    { what: 'empty', value: '' },
    { what: 'white space only', value: ' \t ' },
    ...(property.maxLength === undefined ? [] : [{ what: `${property.maxLength + 1} characters`, value: 'x'.repeat(property.maxLength + 1) }]),
    { what: 'an unpaired surrogate', value: 'a\ud800b' },
  ]
}

/**
 * One body per class of 400 the sandbox answers to `POST /categories`, each with the sandbox's
 * Error. `valid` is a valid NewCategory the field cases start from.
 */
export function invalidBodies(valid: Readonly<Record<string, string>>, limits: LengthLimits): InvalidBody[] {
  const validText = JSON.stringify(valid)
  const candidates: ProbeBody[] = [
    text('empty body', ''),
    text('malformed JSON', validText.slice(0, -1)),
    { what: 'not UTF-8', contentType: JSON_TYPE, bytes: Uint8Array.from([...encoder.encode('{"name":"'), 0xff, ...encoder.encode('"}')]) },
    text('JSON array', `[${validText}]`),
    text('JSON null', 'null'),
    text('JSON string', JSON.stringify(validText)),
    text('JSON number', '42'),
    text('Content-Type text/plain', validText, 'text/plain'),
    { what: 'no Content-Type', contentType: null, bytes: encoder.encode(validText) },
  ]
  const schema = z.toJSONSchema(categorySchemas(limits).NewCategory) as { $defs?: Record<string, { properties?: Record<string, { maxLength?: number }>; required?: string[] }> }
  const { properties = {}, required = [] } = schema.$defs?.['NewCategory'] ?? {}
  for (const field of required) {
    const { [field]: _left, ...rest } = valid
    candidates.push(text(`${field}: missing`, JSON.stringify(rest)))
  }
  for (const [field, property] of Object.entries(properties)) {
    for (const { what, value } of valueCandidates(property)) {
      candidates.push(text(`${field}: ${what}`, JSON.stringify({ ...valid, [field]: value })))
    }
  }
  const classes = new Map<string, InvalidBody>()
  for (const candidate of candidates) {
    const expected = judgeBody(candidate, limits)
    if (expected === undefined) continue
    const key = `${expected.code} ${expected.message}`
    if (!classes.has(key)) classes.set(key, { ...candidate, expected })
  }
  return [...classes.values()]
}
