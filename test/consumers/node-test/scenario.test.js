// The README's scenario file as an installed user writes it: `$schema` and fixtures reached from
// the project, not from a clone of the package.
import assert from 'node:assert/strict'
import { existsSync, readFileSync } from 'node:fs'
import { test } from 'node:test'
import { createPetstore, loadScenario } from 'petstore-sandbox'

const file = new URL('./scenarios/shop.json', import.meta.url)

test('the scenario’s $schema points at the installed package’s schema', () => {
  const schema = new URL(JSON.parse(readFileSync(file, 'utf8')).$schema, file)
  assert.ok(existsSync(schema), `no file at ${schema.pathname}`)
  assert.equal(JSON.parse(readFileSync(schema, 'utf8')).$schema, 'https://json-schema.org/draft/2020-12/schema')
})

test('the scenario loads, its fixture read from the project', async () => {
  const scenario = await loadScenario('scenarios/shop.json')
  assert.equal(scenario.name, 'shop')
  assert.deepEqual(scenario.apiKeys, ['partner-a-key', 'partner-b-key'])
  const petstore = createPetstore({ scenario: 'scenarios/shop.json' })
  await petstore.ready
  assert.deepEqual((await petstore.categories.list()).map((category) => category.name), ['Dogs', 'Cats', 'Ferrets'])
  assert.equal((await petstore.pets.get(1))?.name, 'Rex')
})
