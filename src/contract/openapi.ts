/**
 * The OpenAPI 3.1 document of the interface as the sandbox serves it, built from the contract's
 * schemas, the route table and the error table. `openapi.json` is this document, written by
 * `npm run generate` and checked against it by a test.
 */
import * as z from 'zod'
import { declaredErrorStatuses } from '../handlers/operation.js'
import { OPERATIONS } from '../handlers/routes.js'
import { API_ERROR_CODES, ERROR_TABLE } from './errors.js'
import { ApiError, Category, NewCategory, Order, Pet } from './schemas.js'

/** The interface description version of the published interface. */
export const INTERFACE_VERSION = '1.0.0'

type Json = Record<string, unknown>

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const jsonContent = (schema: Json) => ({ 'application/json': { schema } })
const errorResponse = (description: string) => ({ description, content: jsonContent(ref('Error')) })

function componentSchemas(): Record<string, Json> {
  const registry = z.registry<{ id: string }>()
  for (const schema of [NewCategory, Category, ApiError, Pet, Order]) {
    registry.add(schema, { id: schema.meta()?.id as string })
  }
  const { schemas } = z.toJSONSchema(registry, { uri: (id) => `#/components/schemas/${id}` })
  const cleaned: Record<string, Json> = {}
  for (const [name, schema] of Object.entries(schemas)) {
    const { $schema: _schema, $id: _id, ...rest } = schema as Json
    cleaned[name] = rest
  }
  // Unknown fields of a NewCategory are ignored (or refused with `strict`), never an error of shape.
  delete cleaned['NewCategory']!['additionalProperties']
  return cleaned
}

const DESCRIPTIONS: Record<string, { summary: string; success: string; schema: Json }> = {
  listCategories: { summary: 'List all categories', success: 'All categories, in creation order', schema: { type: 'array', items: ref('Category') } },
  createCategory: { summary: 'Create a category', success: 'The created category, with its assigned id', schema: ref('Category') },
  getPetById: {
    summary: 'Read a pet by id (deprecated)',
    success: 'The pet; its fields come from the scenario',
    schema: ref('Pet'),
  },
  listOrders: { summary: 'List store orders', success: 'The orders of the scenario', schema: { type: 'array', items: ref('Order') } },
}

/** What each declared error status means, as the document says it. */
const ERROR_TEXT: Readonly<Record<number, string>> = {
  400: 'The body lacks required fields or holds invalid values',
  401: 'Missing or invalid API key',
  404: 'No pet with this id in the scenario',
  410: 'The operation is past its sunset (after-sunset mode)',
  413: 'The body is larger than the limit',
}

/** Builds the document. `serverUrl` is listed first among the servers. */
export function buildOpenApiDocument(serverUrl = 'http://127.0.0.1:4010/v1'): Json {
  const paths: Record<string, Record<string, Json>> = {}
  for (const operation of OPERATIONS) {
    const path = operation.path.replace(/:(\w+)/g, '{$1}')
    const text = DESCRIPTIONS[operation.id]!
    const responses: Json = {
      [operation.successStatus]: {
        description: text.success,
        content: jsonContent(text.schema),
        ...(operation.id === 'getPetById' && {
          headers: {
            Deprecation: { description: 'Always `true`: the operation is deprecated', schema: { type: 'string' } },
            Sunset: { description: 'The sunset date (RFC 8594), when the scenario sets one', schema: { type: 'string' } },
          },
        }),
      },
    }
    for (const status of declaredErrorStatuses(operation)) {
      if (status === 500 || status === 503) continue // under `default`
      responses[String(status)] =
        status === 401
          ? { ...errorResponse(ERROR_TEXT[status]!), headers: { 'WWW-Authenticate': { schema: { type: 'string' } } } }
          : errorResponse(ERROR_TEXT[status]!)
    }
    responses['default'] = errorResponse('Any other error: simulated faults (500, 503), `Prefer: code=…`')
    paths[path] ??= {}
    paths[path][operation.method.toLowerCase()] = {
      operationId: operation.id,
      summary: text.summary,
      ...(operation.id === 'getPetById' && {
        deprecated: true,
        parameters: [{ name: 'petId', in: 'path', required: true, schema: { type: 'integer', format: 'int64' } }],
      }),
      ...(operation.hasBody && {
        requestBody: { required: true, content: jsonContent(ref('NewCategory')) },
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
        'The Petstore interface as served by petstore-sandbox. Categories are as published; pets and orders serve what the scenario supplies.',
    },
    servers: [{ url: serverUrl, description: 'petstore-sandbox' }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } },
      schemas: componentSchemas(),
    },
    'x-error-codes': Object.fromEntries(
      API_ERROR_CODES.map((code) => [code, { status: ERROR_TABLE[code].status, when: ERROR_TABLE[code].when }]),
    ),
  }
}
