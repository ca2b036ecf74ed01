/**
 * The scenarios a partner may switch to, as `GET /__sandbox/scenarios` lists them: each file of `--scenarios-dir` read
 * once per version of its files, its summary kept while they are as they were. (Concurrent: each waits 2 s for its
 * files to settle.)
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { it } from 'vitest'
import { ScenarioCatalog } from '../src/server/scenario-catalog.js'

setFlagsFromString('--expose-gc')
const collect = runInNewContext('gc') as () => void

it.concurrent('lists a directory’s scenarios without reading their files again while they are unchanged, even once no tenant holds them (attack47 F3)', async ({ expect, onTestFinished }) => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-catalog-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const pets = Array.from({ length: 2000 }, (_, i) => ({ id: i + 1, name: `pet ${i + 1}`, status: 'available' }))
  writeFileSync(join(dir, 'pets.json'), JSON.stringify(pets))
  writeFileSync(join(dir, 'shop.json'), JSON.stringify({ name: 'shop', version: '1.0.0', description: 'A shop', seed: { categories: [{ name: 'Dogs' }], pets: { fixture: 'pets.json' } } }))
  // Files changed within the last 2 s are read again at each load: these are older.
  await new Promise((resolve) => setTimeout(resolve, 2100))
  const catalog = new ScenarioCatalog(dir)
  let loads = 0
  catalog.onLoad = () => loads++
  const first = await catalog.summaries()
  expect(first.find((summary) => summary.name === 'shop')).toEqual({ name: 'shop', version: '1.0.0', description: 'A shop' })
  expect(loads).toBe(1)
  collect()
  await new Promise((resolve) => setTimeout(resolve, 10))
  collect()
  // Before: the scenario, held weakly and collected, was parsed again with its fixtures at every listing.
  expect(await catalog.summaries()).toEqual(first)
  expect(loads).toBe(1)
  // An edit is read.
  writeFileSync(join(dir, 'shop.json'), JSON.stringify({ name: 'shop', version: '2.0.0', description: 'A shop', seed: { categories: [{ name: 'Dogs' }] } }))
  expect((await catalog.summaries()).find((summary) => summary.name === 'shop')?.version).toBe('2.0.0')
})

it.concurrent('reads a scenario file again once it was swapped for another (a symlink to an older file) while it was being loaded (attack47 F2)', async ({ expect, onTestFinished }) => {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-catalog-'))
  onTestFinished(() => rmSync(dir, { recursive: true, force: true }))
  const scenarios = join(dir, 'scenarios')
  mkdirSync(scenarios)
  const shop = (version: string) => JSON.stringify({ name: 'shop', version, description: 'A shop', seed: { categories: [{ name: `v${version}` }] } })
  writeFileSync(join(scenarios, 'shop.json'), shop('1.0.0'))
  writeFileSync(join(dir, 'shop-v2.json'), shop('2.0.0'))
  // Both older than the 2 s within which a changed file is read again at each load.
  await new Promise((resolve) => setTimeout(resolve, 2100))
  const catalog = new ScenarioCatalog(scenarios)
  let swapped = false
  // The deploy's swap lands while the first load is under way (after its read, before it is done).
  catalog.onLoad = () => {
    if (swapped) return
    swapped = true
    symlinkSync(join(dir, 'shop-v2.json'), join(scenarios, '.next'))
    renameSync(join(scenarios, '.next'), join(scenarios, 'shop.json'))
  }
  expect((await catalog.load('shop'))?.version).toBe('1.0.0')
  // Before: kept as first read, under the stamps of the file swapped in: 1.0.0 for good.
  expect((await catalog.load('shop'))?.version).toBe('2.0.0')
})
