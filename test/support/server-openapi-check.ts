/**
 * Checks bodies the real server sent against `openapi.json`, the published document: API bodies
 * against their operation's response schema, admin Error bodies against the `Error` schema.
 */
import { readFileSync } from 'node:fs'
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import { expect } from 'vitest'

type Json = Record<string, unknown>

const document = JSON.parse(readFileSync(new URL('../../openapi.json', import.meta.url), 'utf8')) as Json
const ajv = new Ajv2020({ strict: false, allErrors: true })
ajv.addFormat('int64', true)
const compiled = new Map<string, ValidateFunction>()

function validatorFor(key: string, schema: Json): ValidateFunction {
  let validate = compiled.get(key)
  if (!validate) {
    // The schema's `#/components/…` references resolve inside this wrapper.
    validate = ajv.compile({ ...schema, components: document['components'] })
    compiled.set(key, validate)
  }
  return validate
}

function expectValid(validate: ValidateFunction, body: unknown, what: string): void {
  const valid = validate(body)
  expect(valid, `${what}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`).toBe(true)
}

/** Asserts `body` is what the document promises for `method` on `path` (`/pets/{petId}`) with `status`. */
export function expectOperationResponse(method: string, path: string, status: number, body: unknown): void {
  const operation = ((document['paths'] as Json)[path] as Json | undefined)?.[method.toLowerCase()] as Json | undefined
  expect(operation, `${method} ${path} is not in openapi.json`).toBeDefined()
  const responses = operation!['responses'] as Record<string, Json>
  const response = responses[String(status)] ?? responses['default']
  expect(response, `${method} ${path} documents no ${status} response`).toBeDefined()
  const schema = ((response!['content'] as Json)['application/json'] as Json)['schema'] as Json
  expectValid(validatorFor(`${method} ${path} ${status}`, schema), body, `${method} ${path} ${status}`)
  if (status >= 400) expect((body as { status: number }).status).toBe(status)
}

/** Asserts `body` is an Error of the document whose `status` and `code` are the ones given. */
export function expectErrorBody(body: unknown, status: number, code?: string): void {
  expectValid(validatorFor('Error', { $ref: '#/components/schemas/Error' }), body, 'Error')
  expect((body as { status: number }).status).toBe(status)
  if (code !== undefined) expect((body as { code: string }).code).toBe(code)
}
