/**
 * Import cost: the wall time of a fresh Node.js process that imports the built package and
 * creates a petstore (seeded, behind `setupServer`), against one that imports msw alone
 * (`msw` and `msw/node`), run alternately, median of the rounds. Both include Node's own start.
 */
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { buildJavaScript } from '../scripts/build.mjs'
import { median, type Figure } from './lib/figures.js'

const ROOT = fileURLToPath(new URL('..', import.meta.url))

/** What each process runs; the package is imported by name, as a user would (self-reference). */
const PROGRAMS = {
  msw: "await import('msw'); const { setupServer } = await import('msw/node'); setupServer()",
  package:
    "const { setupServer } = await import('msw/node'); const { createPetstore } = await import('petstore-sandbox'); const petstore = createPetstore(); setupServer(...petstore.handlers); await petstore.ready",
} as const

function wallMs(program: string): number {
  const started = performance.now()
  const run = spawnSync(process.execPath, ['--input-type=module', '-e', program], { cwd: ROOT, encoding: 'utf8' })
  const elapsed = performance.now() - started
  if (run.status !== 0) throw new Error(`import-cost: the program failed: ${run.stderr}`)
  return elapsed
}

export async function measureImportCost(rounds = 7): Promise<Figure[]> {
  await buildJavaScript()
  const times: Record<keyof typeof PROGRAMS, number[]> = { msw: [], package: [] }
  wallMs(PROGRAMS.msw) // warms the file system cache for both
  wallMs(PROGRAMS.package)
  for (let round = 0; round < rounds; round++) {
    for (const name of ['msw', 'package'] as const) times[name].push(wallMs(PROGRAMS[name]))
  }
  const msw = median(times.msw)
  const ours = median(times.package)
  return [
    {
      section: 'import',
      name: 'Import the package and create a petstore, vs import msw alone (wall, new process)',
      value: ours / msw,
      unit: 'x',
      target: { kind: 'max', value: 1.25 },
      detail: `median of ${rounds} alternating rounds: package ${ours.toFixed(0)} ms, msw alone ${msw.toFixed(0)} ms (Node's start included in both)`,
      command: 'npm run bench -- import',
    },
  ]
}
