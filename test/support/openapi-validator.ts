/**
 * Validates responses against the strict reading of the OpenAPI document (exactly what the
 * sandbox answers, extra fields refused; `openapi.json` is the looser interface reading that
 * partners get) with a real JSON Schema validator (ajv, draft 2020-12, the dialect of OpenAPI
 * 3.1). Every response a test receives goes through here.
 */
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import { expect } from 'vitest'
import { buildOpenApiDocument } from '../../src/contract/openapi.js'
import type { CategoryLimits } from '../../src/contract/limits.js'

const document = buildOpenApiDocument({ profile: 'strict' }) as unknown as OpenApiDocument

interface OpenApiDocument {
  paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, unknown> }> }>>
  servers: { url: string }[]
}

const ajv = new Ajv2020({ strict: false, allErrors: true })
ajv.addFormat('int64', { type: 'number', validate: (value: number) => Number.isSafeInteger(value) })
ajv.addSchema(document, 'openapi.json')

/**
 * The id under which the strict document of a sandbox with these limits is registered: lengths
 * are the sandbox's own rule, so a sandbox started with other limits is judged by its own.
 */
const documentIds = new Map<string, string>()
function documentId(limits: CategoryLimits | undefined): string {
  if (limits === undefined) return 'openapi.json'
  const key = JSON.stringify([limits.nameMaxLength, limits.descriptionMaxLength, limits.maxCategories])
  let id = documentIds.get(key)
  if (id === undefined) {
    id = `openapi-${documentIds.size + 1}.json`
    ajv.addSchema(buildOpenApiDocument({ profile: 'strict', limits }), id)
    documentIds.set(key, id)
  }
  return id
}

/**
 * @note `ajv.validate({ $ref })` compiles a fresh schema object on every call (milliseconds each);
 * one compiled validator per reference keeps the fuzzer's thousands of checks cheap.
 */
const validators = new Map<string, ValidateFunction>()
function validatorFor(schemaRef: string): ValidateFunction {
  let validate = validators.get(schemaRef)
  if (!validate) {
    validate = ajv.compile({ $ref: schemaRef })
    validators.set(schemaRef, validate)
  }
  return validate
}

const pointer = (...parts: string[]) => parts.map((part) => part.replaceAll('~', '~0').replaceAll('/', '~1')).join('/')

/** The path template of the document that a concrete path (relative to the base) matches. */
function templateFor(path: string): string | undefined {
  return Object.keys(document.paths).find((template) =>
    new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]+')}$`).test(path),
  )
}

/**
 * Asserts that `body` is what the document allows for this method, path (relative to the base
 * URL, e.g. `/categories`) and status: the declared response, else `default`. Paths the document
 * does not have (404s) and methods it does not list (405s) must carry an Error body.
 */
export function expectConformant(
  method: string,
  path: string,
  status: number,
  contentType: string | null,
  body: unknown,
  limits?: CategoryLimits,
): void {
  if (method === 'HEAD') return expectHeadAnswer(path, status, contentType, body)
  const id = documentId(limits)
  const template = templateFor(path)
  const operation = template ? document.paths[template]?.[method.toLowerCase()] : undefined
  let schemaRef: string
  if (!template || !operation) {
    schemaRef = `${id}#/components/schemas/Error`
  } else {
    const key = String(status) in operation.responses ? String(status) : 'default'
    expect(operation.responses[key], `${method} ${path} ${status} is not declared`).toBeDefined()
    schemaRef = `${id}#/${pointer('paths', template, method.toLowerCase(), 'responses', key, 'content', 'application/json', 'schema')}`
  }
  expect(contentType, `${method} ${path} ${status}: content type`).toMatch(/^application\/json/)
  const validate = validatorFor(schemaRef)
  const valid = validate(body)
  expect(valid, `${method} ${path} ${status} body ${JSON.stringify(body)?.slice(0, 300)}: ${ajv.errorsText(validate.errors)}`).toBe(true)
  if (status >= 400) expect((body as { status: number }).status).toBe(status)
}

/** A HEAD answer: the headers of a declared GET answer (or an Error's), and no body (RFC 9110 §9.3.2). */
function expectHeadAnswer(path: string, status: number, contentType: string | null, body: unknown): void {
  const template = templateFor(path)
  const get = template ? document.paths[template]?.['get'] : undefined
  if (get) expect(get.responses[String(status)] ?? get.responses['default'], `HEAD ${path} ${status} is not declared for GET`).toBeDefined()
  expect(contentType, `HEAD ${path} ${status}: content type`).toMatch(/^application\/json/)
  expect(body, `HEAD ${path} ${status}: a HEAD answer has no body`).toBeUndefined()
}

/** The parsed OpenAPI document, for tests that inspect it. */
export const openApiDocument: Readonly<OpenApiDocument> = document

/** Asserts `body` is what the document promises for `method` on `path` with `status`, content type aside. */
export function expectOperationResponse(method: string, path: string, status: number, body: unknown): void {
  expect(templateFor(path), `${path} is not in openapi.json`).toBeDefined()
  expectConformant(method, path, status, 'application/json', body)
}

/** Asserts `body` is an Error of the document with this `status` and, when given, `code`. */
export function expectErrorBody(body: unknown, status: number, code?: string): void {
  const validate = validatorFor('openapi.json#/components/schemas/Error')
  const valid = validate(body)
  expect(valid, `Error body ${JSON.stringify(body)?.slice(0, 300)}: ${ajv.errorsText(validate.errors)}`).toBe(true)
  expect((body as { status: number }).status).toBe(status)
  if (code !== undefined) expect((body as { code: string }).code).toBe(code)
}

/**
 * Asserts that an answer of the API (its path relative to the base URL) conforms to the document.
 * Answers without a body (CORS preflights, dropped connections) have nothing to check.
 */
export async function expectConformantResponse(method: string, path: string, response: Response, limits?: CategoryLimits): Promise<void> {
  const text = await response.text()
  if (method === 'HEAD') return expectHeadAnswer(path, response.status, response.headers.get('content-type'), text === '' ? undefined : text)
  if (text === '') {
    expect(response.status, `${method} ${path}: an empty body is only for 204`).toBe(204)
    return
  }
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    throw new Error(`${method} ${path} ${response.status}: expected a JSON body, got ${JSON.stringify(text.slice(0, 200))}`)
  }
  expectConformant(method, path, response.status, response.headers.get('content-type'), body, limits)
}
