// Run after categories.pact.test.ts: the Pact file it wrote holds what the petstore answered, and
// every interaction is an operation of the OpenAPI document the package ships (what a
// bi-directional contract check compares the Pact with).
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { expect, it } from 'vitest'

interface Interaction {
  description: string
  request: { method: string; path: string; headers?: Record<string, string>; body?: unknown }
  response: { status: number; body?: unknown }
}
interface PactFile {
  consumer: { name: string }
  provider: { name: string }
  interactions: Interaction[]
  metadata: { pactSpecification: { version: string } }
}
interface OpenApi {
  servers?: { url: string }[]
  paths: Record<string, Record<string, { responses: Record<string, unknown> }>>
}

const pact = JSON.parse(readFileSync('pacts/shop-web-petstore-api.json', 'utf8')) as PactFile
const openapi = createRequire(import.meta.url)('petstore-sandbox/openapi.json') as OpenApi

it('names the consumer and the provider', () => {
  expect(pact.consumer.name).toBe('shop-web')
  expect(pact.provider.name).toBe('petstore-api')
  expect(pact.metadata.pactSpecification.version).toMatch(/^2\./)
})

it('holds each request the tests sent, with the petstore’s answers', () => {
  const seen = pact.interactions.map(({ request, response }) => `${request.method} ${request.path} ${response.status}`)
  expect(seen).toEqual(['GET /v1/categories 200', 'POST /v1/categories 201', 'POST /v1/categories 400'])
  const listed = pact.interactions[0]?.response.body as { id: number; name: string }[]
  expect(listed.map(({ id, name }) => `${id} ${name}`)).toEqual(['1 Dogs', '2 Cats', '3 Rabbits', '4 Birds', '5 Fish'])
  expect(pact.interactions[1]?.request.body).toEqual({ name: 'Ferrets' })
  expect(pact.interactions[1]?.response.body).toEqual({ id: 6, name: 'Ferrets' })
  expect(pact.interactions[2]?.response.body).toMatchObject({ code: expect.any(String), message: expect.stringMatching(/name/) })
})

it('records only operations and statuses the OpenAPI document declares', () => {
  for (const { request, response } of pact.interactions) {
    const path = request.path.replace(/^\/v1/, '')
    const operation = openapi.paths[path]?.[request.method.toLowerCase()]
    expect(operation, `${request.method} ${path}`).toBeDefined()
    expect(Object.keys(operation!.responses), `${request.method} ${path}`).toContain(String(response.status))
  }
})
