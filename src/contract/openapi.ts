/**
 * The OpenAPI 3.1 document of the interface as the sandbox serves it, built from the contract's
 * schemas, the route table and the error table. `openapi.json` is this document, written by
 * `npm run generate` and checked against it by a test.
 */
import * as z from 'zod'
import { DEFAULT_CATEGORY_LIMITS, type CategoryLimits } from './limits.js'
import { API_ERROR_CODES, ERROR_TABLE } from './errors.js'
import { areaOf, declaredErrorStatuses, INTERFACE_AREAS, OPERATION_CONTRACTS, type OperationContract, type ResponseSchema } from './operations.js'
import { ApiError, categorySchemas, Order, Pet } from './schemas.js'

/** The interface description version of the published interface. */
export const INTERFACE_VERSION = '1.0.0'

type Json = Record<string, unknown>

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const jsonContent = (schema: Json) => ({ 'application/json': { schema } })
const errorResponse = (description: string) => ({ description, content: jsonContent(ref('Error')) })

/**
 * Which reading of the contract a document states.
 * - `interface`: what the real service promises, for partners and generated clients: the
 *   published fields and types, open to fields the service may add, with the limits the sandbox
 *   enforces on them stated as schema keywords (`minLength`, `maxLength`, `pattern`, `minimum`,
 *   `maximum`), so that a body the document calls valid is one the sandbox accepts; each limited
 *   field's description says the limit is the sandbox's (the interface shows none). Pets and
 *   orders, whose fields are not published, keep the sandbox's schema under `x-sandbox`.
 * - `strict`: exactly what the sandbox answers, extra fields refused: for the sandbox's own tests.
 */
export type OpenApiProfile = 'interface' | 'strict'

/** Options of {@link buildOpenApiDocument}. */
export interface OpenApiOptions {
  /** Listed first among the servers. @default 'http://127.0.0.1:4010/v1' */
  readonly serverUrl?: string
  /** @default 'interface' */
  readonly profile?: OpenApiProfile
  /** The sandbox refuses unknown fields of a NewCategory (`--strict`): the document says so. @default false */
  readonly strictBodies?: boolean
  /** The lengths and counts the schemas and texts state (a server passes its own). @default the defaults of `limits.ts` */
  readonly limits?: CategoryLimits
}

/** Keywords the published interface does not state: the sandbox's own rules, said so in the field's description. */
const SANDBOX_KEYWORDS = ['minimum', 'maximum', 'pattern', 'minLength', 'maxLength', 'minItems', 'maxItems'] as const
/** Records whose fields the interface does not show. */
const UNPUBLISHED = new Set(['Pet', 'Order'])

function componentSchemas(profile: OpenApiProfile, strictBodies: boolean, limits: CategoryLimits): Record<string, Json> {
  const registry = z.registry<{ id: string }>()
  const { NewCategory, Category } = categorySchemas(limits)
  for (const schema of [NewCategory, Category, ApiError, Pet, Order]) {
    registry.add(schema, { id: schema.meta()?.id as string })
  }
  const { schemas } = z.toJSONSchema(registry, { uri: (id) => `#/components/schemas/${id}` })
  const cleaned: Record<string, Json> = {}
  for (const [name, schema] of Object.entries(schemas)) {
    const { $schema: _schema, $id: _id, ...rest } = schema as Json
    cleaned[name] = profile === 'strict' ? rest : interfaceReading(name, rest)
  }
  // Unknown fields of a NewCategory are ignored, never an error of shape, unless `--strict` refuses them.
  if (strictBodies) cleaned['NewCategory']!['additionalProperties'] = false
  else delete cleaned['NewCategory']!['additionalProperties']
  return cleaned
}

/**
 * A component schema as the interface states it: open to fields the service may add, each
 * limit the sandbox enforces kept as a keyword and named in the field's description.
 * @note Limits stay keywords, not an extension: schema-driven tools (Portman, Dredd, fuzzers)
 * generate bodies from the keywords, and a body the document calls valid must get a 201.
 */
function interfaceReading(name: string, schema: Json): Json {
  if (UNPUBLISHED.has(name)) {
    return {
      type: 'object',
      description: `Fields of ${name.toLowerCase()} records are not published. The sandbox serves the scenario's records as written.`,
      'x-sandbox': schema,
    }
  }
  const { additionalProperties: _closed, properties, ...rest } = schema
  const open: Json = { ...rest }
  if (properties !== undefined) {
    open['properties'] = Object.fromEntries(
      Object.entries(properties as Record<string, Json>).map(([field, property]) => {
        const limits = SANDBOX_KEYWORDS.filter((keyword) => keyword in property).map((keyword) => limitText(keyword, property[keyword]))
        if (limits.length === 0) return [field, property]
        const said = typeof property['description'] === 'string' ? `${property['description']}. ` : ''
        return [field, { ...property, description: `${said}Sandbox limit (the interface shows none): ${limits.join(', ')}.` }]
      }),
    )
  }
  return open
}

/** One enforced limit in words, for a field's description. */
function limitText(keyword: (typeof SANDBOX_KEYWORDS)[number], value: unknown): string {
  switch (keyword) {
    case 'pattern':
      return value === '\\S' ? 'not blank' : `matches ${String(value)}`
    case 'minLength':
      return `at least ${String(value)} characters`
    case 'maxLength':
      return `at most ${String(value)} characters`
    case 'minItems':
      return `at least ${String(value)} items`
    case 'maxItems':
      return `at most ${String(value)} items`
    case 'minimum':
      return `at least ${String(value)}`
    case 'maximum':
      return `at most ${String(value)}`
  }
}

/** A response schema of the table as a JSON Schema reference (`Category[]` an array of them). */
function schemaOf(name: ResponseSchema): Json {
  return name.endsWith('[]') ? { type: 'array', items: ref(name.slice(0, -2)) } : ref(name)
}

/**
 * The headers of a deprecated operation's answers. `Deprecation` is on every one, so it is
 * `required` (contract tools such as Dredd then check it); the others only when the scenario sets them.
 */
const DEPRECATION_HEADERS: Json = {
  Deprecation: {
    description: 'When the operation was deprecated (RFC 9745): `@<seconds since the epoch>`',
    required: true,
    schema: { type: 'string', pattern: '^@-?\\d+$' },
  },
  Sunset: { description: 'The sunset date (RFC 8594), when the scenario sets one', schema: { type: 'string' } },
  Link: {
    description: 'Pages about the deprecation (`rel="deprecation"`) and the sunset (`rel="sunset"`), when the scenario names them',
    schema: { type: 'string' },
  },
}

/** What each declared error status means, as the document says it. */
function errorText(status: number, limits: CategoryLimits): string {
  const texts: Readonly<Record<number, string>> = {
    400: `The body lacks required fields or holds invalid values (a name over ${limits.nameMaxLength} or a description over ${limits.descriptionMaxLength} characters among them)`,
    401: 'Missing or invalid API key',
    404: 'No pet with this id in the scenario',
    409: `The tenant already holds the most categories allowed (${limits.maxCategories})`,
    410: 'The operation is past its sunset (after-sunset mode)',
    413: 'The body is larger than the limit',
  }
  return texts[status]!
}

/**
 * Builds the OpenAPI 3.1 document of the interface as the sandbox serves it.
 * @example buildOpenApiDocument({ serverUrl: 'https://sandbox.shop.test/v1' })
 */
export function buildOpenApiDocument(options: OpenApiOptions = {}): Json {
  const { serverUrl = 'http://127.0.0.1:4010/v1', profile = 'interface', strictBodies = false, limits = DEFAULT_CATEGORY_LIMITS } = options
  const paths: Record<string, Record<string, Json>> = {}
  for (const operation of OPERATION_CONTRACTS as readonly OperationContract[]) {
    const responses: Json = {
      [operation.success.status]: {
        description: operation.success.description,
        content: jsonContent(schemaOf(operation.success.schema)),
        ...(operation.deprecated && { headers: DEPRECATION_HEADERS }),
      },
    }
    for (const status of declaredErrorStatuses(operation)) {
      if (status === 500 || status === 503) continue // under `default`
      responses[String(status)] =
        status === 401
          ? { ...errorResponse(errorText(status, limits)), headers: { 'WWW-Authenticate': { required: true, schema: { type: 'string' } } } }
          : errorResponse(errorText(status, limits))
    }
    responses['default'] = errorResponse('Any other error: simulated faults (500, 503), `Prefer: code=…`, 503 `over_capacity` with `Retry-After`')
    const methods = (paths[operation.path] ??= {})
    methods[operation.method.toLowerCase()] = {
      operationId: operation.id,
      summary: operation.summary,
      tags: [areaOf(operation)],
      ...(operation.deprecated && { deprecated: true }),
      ...(operation.params && {
        parameters: operation.params.map(({ name, description, example }) => ({
          name,
          in: 'path',
          required: true,
          description,
          schema: { type: 'integer', format: 'int64' },
          example,
        })),
      }),
      ...(operation.body && {
        requestBody: {
          required: true,
          content: { 'application/json': { schema: ref(operation.body), ...(operation.bodyExample && { example: operation.bodyExample }) } },
        },
      }),
      responses,
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Petstore',
      version: INTERFACE_VERSION,
      description:
        profile === 'interface'
          ? 'The Petstore interface as served by petstore-sandbox. Categories are as published; pets and orders serve what the scenario supplies. `x-sandbox` marks what the sandbox holds to beyond the published interface.'
          : "The Petstore interface exactly as petstore-sandbox answers it (strict reading: the sandbox's own rules, no extra fields).",
    },
    servers: [{ url: serverUrl, description: 'petstore-sandbox' }],
    security: [{ bearerAuth: [] }],
    tags: Object.entries(INTERFACE_AREAS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } },
      schemas: componentSchemas(profile, strictBodies, limits),
    },
    'x-error-codes': Object.fromEntries(
      API_ERROR_CODES.map((code) => [code, { status: ERROR_TABLE[code].status, when: ERROR_TABLE[code].when }]),
    ),
  }
}
