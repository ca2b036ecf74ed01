/**
 * The README and the guides under docs/ link to each other by file and by heading: every relative
 * link names a file that exists, and every `#anchor` a heading of that file, as GitHub renders it.
 */
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { expect, it } from 'vitest'
import { brokenLinks, headingSlugs } from './support/doc-links.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))
const DOCUMENTS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md')).map((name) => `docs/${name}`),
  ...readdirSync(join(ROOT, 'docs/decisions')).filter((name) => name.endsWith('.md')).map((name) => `docs/decisions/${name}`),
]

it('resolves every relative link and anchor of the README, the guides and the design records', () => {
  expect(DOCUMENTS.length).toBeGreaterThan(20)
  expect(brokenLinks(DOCUMENTS, ROOT)).toEqual([])
})

it("links the in-process recipe, the serve flags and the scenario format from the README's first screen", () => {
  const firstScreen = readFileSync(join(ROOT, 'README.md'), 'utf8').split('\n').slice(0, 24).join('\n')
  for (const target of ['#use-it-in-tests-in-process', 'docs/server.md#options', 'docs/scenarios.md']) expect(firstScreen).toContain(`](${target})`)
  expect(brokenLinks(['README.md'], ROOT)).toEqual([])
})

it("ships docs/ with the README, so that the README's links into the guides resolve in the installed package too", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8')
  expect(readme).toMatch(/\]\(docs\/[\w-]+\.md[#)]/)
  const { files } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] }
  expect(files).toEqual(expect.arrayContaining(['README.md', 'docs']))
})

it('names a missing file, a missing anchor and a heading GitHub slugs otherwise', () => {
  const dir = mkdtempSync(join(tmpdir(), 'doc-links-'))
  writeFileSync(join(dir, 'guide.md'), '# Guide\n\n## The admin API (`/__sandbox/`)\n\n### Every core: `--workers`\n\n## Again\n\n## Again\n')
  writeFileSync(
    join(dir, 'README.md'),
    [
      '[ok](guide.md#the-admin-api-__sandbox) [ok](guide.md#every-core---workers) [ok](guide.md#again-1) [ok](#top) [web](https://example.com/x#y)',
      '`[code](nowhere.md)` and',
      '```sh',
      '[fenced](nowhere.md)',
      '```',
      '[gone](nowhere.md) [wrong](guide.md#the-admin-api) [here](#nope)',
      '# Top',
    ].join('\n'),
  )
  expect(headingSlugs('## The admin API (`/__sandbox/`)\n## `createPetstore(options)`')).toEqual(['the-admin-api-__sandbox', 'createpetstoreoptions'])
  expect(brokenLinks(['README.md'], dir)).toEqual([
    'README.md:6: nowhere.md (no nowhere.md)',
    'README.md:6: guide.md#the-admin-api (no heading of guide.md has the anchor #the-admin-api)',
    'README.md:6: #nope (no heading of README.md has the anchor #nope)',
  ])
})
