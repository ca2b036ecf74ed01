import { readFile } from 'node:fs/promises'
import { Validator } from '@seriousme/openapi-schema-validator'
import { describe, expect, it } from 'vitest'
import { isHttpCode, isProxyCode, type ErrorCode } from '../src/contract/errors.js'
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

  it('tags each operation with the area of the interface it is in, and declares each tag', () => {
    const document = openApiDocument as unknown as {
      tags: { name: string; description: string }[]
      paths: Record<string, Record<string, { tags: string[] }>>
    }
    const tags = Object.fromEntries(
      Object.entries(document.paths).flatMap(([path, methods]) => Object.entries(methods).map(([method, operation]) => [`${method} ${path}`, operation.tags])),
    )
    expect(tags).toEqual({
      'get /categories': ['categories'],
      'post /categories': ['categories'],
      'get /pets/{petId}': ['pets'],
      'get /store/orders': ['store'],
    })
    expect(document.tags.map((tag) => tag.name)).toEqual(['categories', 'pets', 'store'])
    for (const tag of document.tags) expect(tag.description, tag.name).not.toBe('')
  })

  it('marks the headers every such answer carries as required: WWW-Authenticate on a 401, Deprecation on the pet', () => {
    type Headers = Record<string, { required?: boolean }>
    const document = openApiDocument as unknown as { paths: Record<string, Record<string, { responses: Record<string, { headers?: Headers }> }>> }
    for (const [path, methods] of Object.entries(document.paths)) {
      for (const operation of Object.values(methods)) expect(operation.responses['401']?.headers?.['WWW-Authenticate']?.required, path).toBe(true)
    }
    const pet = document.paths['/pets/{petId}']!['get']!.responses['200']!.headers!
    expect(Object.entries(pet).map(([name, header]) => [name, header.required ?? false])).toEqual([
      ['Deprecation', true],
      ['Sunset', false],
      ['Link', false],
    ])
  })

  it('lists only error codes whose status an operation declares, or the router, HTTP itself or proxy mode answers, and none of the admin API', () => {
    const document = openApiDocument as unknown as {
      'x-error-codes': Record<string, { status: number }>
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
    }
    const declared = new Set(
      Object.values(document.paths).flatMap((methods) => Object.values(methods).flatMap((operation) => Object.keys(operation.responses))),
    )
    const codes = Object.entries(document['x-error-codes'])
    for (const [code, { status }] of codes) {
      const byRouter = code === 'not_found' || code === 'method_not_allowed'
      const answerable = declared.has(String(status)) || (declared.has('default') && (status === 500 || status === 503)) || byRouter || isHttpCode(code as ErrorCode) || isProxyCode(code as ErrorCode)
      expect(answerable, `${code} (${status}) is listed, but no operation declares ${status}`).toBe(true)
    }
    expect(codes.map(([code]) => code)).toEqual(expect.arrayContaining(['invalid_api_key', 'missing_api_key', 'missing_field', 'invalid_body']))
    expect(codes.map(([code]) => code)).not.toContain('forbidden')
    expect(codes.map(([code]) => code)).not.toContain('unknown_tenant')
  })
})
