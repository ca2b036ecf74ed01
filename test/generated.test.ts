import { readFile } from 'node:fs/promises'
import { Validator } from '@seriousme/openapi-schema-validator'
import { describe, expect, it } from 'vitest'
import { API_ERROR_CODES } from '../src/contract/errors.js'
import { generatedFiles } from '../scripts/generated-files.js'
import { openApiDocument } from './support/openapi-validator.js'

const files = Object.entries(await generatedFiles())

describe('generated files', () => {
  it.each(files)('%s is up to date (npm run generate)', async (file, expected) => {
    expect(await readFile(file, 'utf8')).toBe(expected)
  })
})

describe('the OpenAPI document', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const result = await new Validator().validate(structuredClone(openApiDocument) as unknown as Parameters<Validator['validate']>[0])
    expect(result.errors ?? []).toEqual([])
    expect(result.valid).toBe(true)
  })

  it('states the published interface: operations, Error fields, bearer auth, version', () => {
    const doc = openApiDocument as unknown as Record<string, any>
    expect(doc['info'].version).toBe('1.0.0')
    expect(doc['paths']['/categories'].get.operationId).toBe('listCategories')
    expect(doc['paths']['/categories'].post.operationId).toBe('createCategory')
    expect(Object.keys(doc['paths']['/categories'].post.responses)).toEqual(expect.arrayContaining(['201', '400', '401']))
    expect(doc['paths']['/pets/{petId}'].get.deprecated).toBe(true)
    expect(doc['components'].schemas.Error.required).toEqual(['code', 'message', 'status'])
    expect(doc['components'].schemas.Category.required).toEqual(['id', 'name'])
    expect(doc['components'].schemas.NewCategory.required).toEqual(['name'])
    expect(doc['components'].securitySchemes.bearerAuth).toEqual({ type: 'http', scheme: 'bearer' })
  })

  it('lists every code the operations can answer (the admin API\'s left out)', () => {
    const codes = (openApiDocument as unknown as { 'x-error-codes': Record<string, unknown> })['x-error-codes']
    expect(Object.keys(codes)).toEqual(API_ERROR_CODES)
  })
})
