/**
 * The recipes of the README and of the guides under docs/ are excerpts of projects that CI installs
 * the packed package into and runs (scripts/check-package.sh): a block marked `<!-- tested: path -->`
 * must appear verbatim in that file, so no document can drift from what is tested.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { ScenarioFileSchema } from '../src/index.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const README = readFileSync(`${ROOT}README.md`, 'utf8')
const DOCUMENTS = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`)]
const BLOCKS = DOCUMENTS.flatMap((document) =>
  [...readFileSync(join(ROOT, document), 'utf8').matchAll(/<!-- tested: (\S+) -->\n```\w*\n([\s\S]*?)```/g)].map(([, file, code]) => ({ document, file: file!, code: code! })),
)

it('marks the Vitest snippet and the scenario file in the README; seeding, the per-file baseline (its shared petstore module and setup file), the journal assertions and the planned answers recipe in the library guide; a recipe for each stack; the browser worker; a scenario JSON import, as tested', () => {
  const marked: Record<string, string[]> = {}
  for (const block of BLOCKS) (marked[block.document] ??= []).push(block.file)
  expect(marked).toEqual({
    'README.md': ['test/package-consumer/readme.test.ts', 'test/consumers/node-test/scenarios/shop.json'],
    'docs/browser.md': ['test/consumers/browser/src/mocks.ts'],
    'docs/library.md': [
      'test/package-consumer/readme.test.ts',
      'test/shared-setup/petstore.ts',
      'test/shared-setup/setup.ts',
      'test/shared-setup/1-empty-shop.test.ts',
      'test/package-consumer/assertions.test.ts',
      'test/consumers/jest/matchers.test.ts',
      'test/package-consumer/planned-answers.test.ts',
    ],
    'docs/recipes.md': [
      'test/consumers/react/src/categories.test.tsx',
      'test/consumers/jest/jest.config.js',
      'test/consumers/browser/tests/fixtures.ts',
      'test/consumers/storybook/src/categories.stories.tsx',
      'test/consumers/node-test/categories.test.js',
      'test/consumers/vitest-browser/src/test-extend.ts',
      'test/consumers/vue/src/categories.test.ts',
      'test/consumers/next/app/petstore-mocks.tsx',
      'test/consumers/next/app/petstore-worker.tsx',
      'test/consumers/angular/src/app/categories.spec.ts',
      'test/consumers/bun/categories.test.ts',
      'test/consumers/pact/src/categories.pact.test.ts',
    ],
    'docs/scenarios.md': ['test/package-consumer/scenario-file.test.ts'],
  })
})

it.each(BLOCKS)('$document shows $file word for word', ({ file, code }) => {
  expect(readFileSync(`${ROOT}${file}`, 'utf8')).toContain(code)
})

it('imports what the Vitest snippet uses from vitest, so it runs in a default Vitest project', () => {
  const snippet = BLOCKS[0]!.code
  expect(snippet).toContain("import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'")
})

it("points the scenario example's $schema (a file in the project's scenarios/) into the installed package, at a file the package ships", () => {
  const example = /## Scenarios[\s\S]*?```json\n([\s\S]*?)```/.exec(README)?.[1]
  const scenario = ScenarioFileSchema.parse(JSON.parse(example ?? 'null'))
  const inPackage = scenario.$schema?.replace(/^\.\.\/node_modules\/petstore-sandbox\//, '') ?? ''
  expect(scenario.$schema).toBe(`../node_modules/petstore-sandbox/${inPackage}`)
  expect(existsSync(join(ROOT, inPackage))).toBe(true)
  const shipped = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] }).files
  expect(shipped).toContain(inPackage.split('/')[0])
})

it("keeps the repository's own scenarios pointing at the schema beside them", () => {
  for (const file of readdirSync(join(ROOT, 'scenarios'))) {
    const { $schema } = JSON.parse(readFileSync(join(ROOT, 'scenarios', file), 'utf8')) as { $schema: string }
    expect(existsSync(join(ROOT, 'scenarios', $schema)), file).toBe(true)
    expect(join(dirname(join(ROOT, 'scenarios', file)), $schema)).toBe(join(ROOT, 'schema/scenario.schema.json'))
  }
})
