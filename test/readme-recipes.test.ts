/**
 * The README's recipes are excerpts of projects that CI installs the packed package into and
 * runs (scripts/check-package.sh): a block marked `<!-- tested: path -->` must appear verbatim
 * in that file, so the README cannot drift from what is tested.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const README = readFileSync(`${ROOT}README.md`, 'utf8')
const BLOCKS = [...README.matchAll(/<!-- tested: (\S+) -->\n```\w*\n([\s\S]*?)```/g)].map(([, file, code]) => ({ file: file!, code: code! }))

it('marks the Vitest snippet, a recipe for each stack, the browser worker and the scenario file as tested', () => {
  expect(BLOCKS.map((block) => block.file)).toEqual([
    'test/package-consumer/readme.test.ts',
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
    'test/consumers/browser/src/mocks.ts',
    'test/consumers/node-test/scenarios/shop.json',
  ])
})

it.each(BLOCKS)('shows $file word for word', ({ file, code }) => {
  expect(readFileSync(`${ROOT}${file}`, 'utf8')).toContain(code)
})

it('imports what the Vitest snippet uses from vitest, so it runs in a default Vitest project', () => {
  const snippet = BLOCKS[0]!.code
  expect(snippet).toContain("import { afterAll, afterEach, beforeAll, expect, it } from 'vitest'")
})
