// A user's own scenario file, as the README's Scenarios section writes one: its `$schema` points
// into the installed package, and it is imported as a JSON module without a cast.
import { existsSync, readFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { createPetstore, ScenarioFileSchema } from 'petstore-sandbox'
import shop from './shop.scenario.json' with { type: 'json' }

const petstore = createPetstore({ scenario: shop }) // no cast: its "outcomes" are judged when it loads

const here = dirname(fileURLToPath(import.meta.url))

it('imports a scenario JSON with faults and passes it as it is', async () => {
  await petstore.ready
  expect((await petstore.categories.list()).map((category) => category.name)).toEqual(['Ferrets', 'Owls'])
})

it("finds the README example's $schema from the example's place (scenarios/), and this file's own from the project's root", () => {
  const readme = readFileSync(resolve(here, 'node_modules/petstore-sandbox/README.md'), 'utf8')
  const example = /## Scenarios[\s\S]*?```json\n([\s\S]*?)```/.exec(readme)?.[1]
  const scenario = JSON.parse(example ?? 'null') as { $schema: string }
  for (const [from, file] of [[resolve(here, 'scenarios'), scenario.$schema], [here, shop.$schema]] as const) {
    expect(existsSync(resolve(from, file)), file).toBe(true)
    expect(JSON.parse(readFileSync(resolve(from, file), 'utf8'))).toMatchObject({ title: 'petstore-sandbox scenario' })
  }
  expect(ScenarioFileSchema.safeParse(scenario).success).toBe(true)
})
