import { readFile } from 'node:fs/promises'
import { Validator } from '@seriousme/openapi-schema-validator'
import { describe, expect, it } from 'vitest'
import { API_ERROR_CODES } from '../src/contract/errors.js'
import { buildOpenApiDocument } from '../src/contract/openapi.js'
import { generatedFiles } from '../scripts/generated-files.js'
import { openApiDocument } from './support/openapi-validator.js'

const files = Object.entries(await generatedFiles())

describe('generated files', () => {
  it.each(files)('%s is up to date (npm run generate)', async (file, expected) => {
    expect(await readFile(file, 'utf8')).toBe(expected)
  })
})

describe('the OpenAPI document', () => {
  it.each(['interface', 'strict'] as const)('is a valid OpenAPI 3.1 document in its %s reading', async (profile) => {
    const result = await new Validator().validate(structuredClone(buildOpenApiDocument({ profile })))
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
  })

  it('states the published interface: operations, Error fields, bearer auth, version', () => {
    const declared = expect.anything() as unknown
    expect(openApiDocument).toMatchObject({
      info: { version: '1.0.0' },
      paths: {
        '/categories': {
          get: { operationId: 'listCategories' },
          post: { operationId: 'createCategory', responses: { 201: declared, 400: declared, 401: declared } },
        },
        '/pets/{petId}': { get: { deprecated: true } },
      },
      components: {
        schemas: {
          Error: { required: ['code', 'message', 'status'] },
          Category: { required: ['id', 'name'] },
          NewCategory: { required: ['name'] },
        },
        securitySchemes: { bearerAuth: { type: 'http', scheme: 'bearer' } },
      },
    })
  })

  it('lists every code the operations can answer (the admin API\'s left out)', () => {
    const codes = (openApiDocument as unknown as { 'x-error-codes': Record<string, unknown> })['x-error-codes']
    expect(Object.keys(codes)).toEqual(API_ERROR_CODES)
  })
})
