/**
 * `npm run bench [-- server|in-process|scale|import|browser-size|replicas|peers|start|workers ...]`: measures, prints a table with a verdict for
 * every figure that has a target, writes bench/results.json, and rewrites the figures of
 * docs/performance.md with the figures of this run. No section named: all of them.
 *
 * Environment: BENCH_ROUNDS and BENCH_SECONDS (rounds, seconds per measurement), BENCH_WARMUP_SECONDS
 * (peers: load per system and method before the rounds), BENCH_RUNS (start: starts per system).
 */
import { cpus } from 'node:os'
import { readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { replaceSection } from '../scripts/generated-files.js'
import { measureThroughput } from './http-throughput.js'
import { measureBrowserSize } from './browser-size.js'
import { measureImportCost } from './import-cost.js'
import { measureInProcess } from './in-process.js'
import { formatTarget, formatValue, verdictOf, type Figure } from './lib/figures.js'
import { measureReplicas } from './replicas.js'
import { measureScale } from './scale.js'
import { measurePeers } from './peers.js'
import { measureStart } from './start.js'
import { measureWorkers } from './workers.js'

const SECTIONS = {
  server: () =>
    measureThroughput({
      rounds: positive('BENCH_ROUNDS', 5),
      seconds: positive('BENCH_SECONDS', 3),
    }),
  'in-process': () => measureInProcess(),
  scale: () => measureScale(),
  import: () => measureImportCost(),
  'browser-size': () => measureBrowserSize(),
  // Needs redis-server and nginx: several replicas on Redis against the in-memory process.
  replicas: () => measureReplicas({ rounds: positive('BENCH_ROUNDS', 3), seconds: positive('BENCH_SECONDS', 3) }),
  // Needs the peers of bench/peers/setup.sh (each one missing is skipped, and said so); about 5 minutes.
  peers: () =>
    measurePeers({
      rounds: positive('BENCH_ROUNDS', 6),
      seconds: positive('BENCH_SECONDS', 3),
      warmupSeconds: positive('BENCH_WARMUP_SECONDS', 10),
    }),
  // Exec to the first answer, the CLI, npm start and the installed peers; about 2 minutes.
  start: () => measureStart({ runs: positive('BENCH_RUNS', 7) }),
  // Needs redis-server: serve --workers 1 and 2 on Redis, and the in-memory process; about 2 minutes.
  workers: () => measureWorkers({ rounds: positive('BENCH_ROUNDS', 5), seconds: positive('BENCH_SECONDS', 3) }),
} satisfies Record<string, () => Promise<Figure[]>>
type Section = keyof typeof SECTIONS

function positive(name: string, fallback: number): number {
  const value = process.env[name]
  if (value === undefined) return fallback
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new Error(`${name} must be a positive integer, got "${value}"`)
  return Number(value)
}

const asked = process.argv.slice(2)
const unknown = asked.filter((name) => !(name in SECTIONS))
if (unknown.length > 0) {
  process.stderr.write(`bench: unknown section ${unknown.join(', ')}; known: ${Object.keys(SECTIONS).join(', ')}\n`)
  process.exit(1)
}
const sections = (asked.length > 0 ? asked : Object.keys(SECTIONS)) as Section[]

const figures: Figure[] = []
for (const section of sections) {
  process.stderr.write(`bench: ${section}…\n`)
  figures.push(...(await SECTIONS[section]()))
}

const machine = {
  date: new Date().toISOString().slice(0, 10),
  node: process.version,
  cores: cpus().length,
  cpu: cpus()[0]?.model.trim() ?? 'unknown',
}
const rows = figures.map((figure) => ({
  figure: figure.name,
  value: formatValue(figure),
  target: formatTarget(figure.target, figure.unit),
  verdict: verdictOf(figure),
  detail: figure.detail ?? '',
  command: figure.command,
}))

// The table for the terminal.
const columns = ['figure', 'value', 'target', 'verdict'] as const
const widths = columns.map((column) => Math.max(column.length, ...rows.map((row) => row[column].length)))
const line = (cells: readonly string[]) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ')
console.log(`\n${machine.date}, Node ${machine.node}, ${machine.cores} cores (${machine.cpu})\n`)
console.log(line(columns))
console.log(line(widths.map((width) => '-'.repeat(width))))
for (const row of rows) console.log(line(columns.map((column) => row[column])))
console.log('\nHow each was measured, and the command that measures it again:')
for (const row of rows) console.log(`- ${row.figure}: ${row.detail}\n  ${row.command}`)

// results.json keeps the figures of earlier sections when only some were run.
const resultsFile = fileURLToPath(new URL('results.json', import.meta.url))
const previous = await readFile(resultsFile, 'utf8')
  .then((text) => JSON.parse(text) as { figures?: Array<Figure & { verdict: string; measured?: typeof machine }> })
  .catch(() => ({ figures: [] }))
const kept = (previous.figures ?? []).filter((figure) => !sections.includes(figure.section as Section))
const fresh = figures.map((figure) => ({ ...figure, verdict: verdictOf(figure), measured: machine }))
const all = [...kept, ...fresh].sort(
  (a, b) => Object.keys(SECTIONS).indexOf(a.section) - Object.keys(SECTIONS).indexOf(b.section),
)
await writeFile(resultsFile, `${JSON.stringify({ figures: all }, null, 2)}\n`)

const performanceFile = fileURLToPath(new URL('../docs/performance.md', import.meta.url))
const performance = await readFile(performanceFile, 'utf8')
await writeFile(performanceFile, replaceSection(performance, 'performance', performanceSection(all)))
console.log(`\nwrote ${resultsFile} and docs/performance.md`)

const failed = fresh.filter((figure) => figure.verdict === 'FALLS SHORT')
if (failed.length > 0) console.log(`\n${failed.length} figure(s) FALL SHORT of their target.`)

function performanceSection(list: typeof all): string {
  const cell = (text: string) => text.replaceAll('|', '\\|')
  return [
    'Written by `npm run bench` (a script, not a test) from `bench/results.json`. The machines are',
    'shared and noisy, so every comparison is a ratio of two servers or handlers measured side by',
    'side in the same run, and every figure a median of several rounds. Each row says how to',
    'measure it again; `npm run bench` measures them all (about fifteen minutes). The `peers` and',
    '`start` rows compare with WireMock, json-server, Prism and Mockoon CLI, installed outside the',
    "project's dependencies by `bash bench/peers/setup.sh` (a peer not installed is skipped, and",
    'the run says so); `replicas` and `workers` need redis-server (and nginx for `replicas`).',
    '',
    '| Figure | Value | Target | Verdict | How, and when | Reproduce |',
    '|---|---|---|---|---|---|',
    ...list.map(
      (figure) =>
        `| ${cell(figure.name)} | ${formatValue(figure)} | ${formatTarget(figure.target, figure.unit)} | ${figure.verdict} | ${cell(figure.detail ?? '')}; ${figure.measured?.date ?? ''}, Node ${figure.measured?.node ?? ''}, ${figure.measured?.cores ?? ''} cores | \`${figure.command}\` |`,
    ),
    '',
    'Why the API is not served through express and `@mswjs/http-middleware`, and where the time goes:',
    '[docs/decisions/0001-lean-server-bridge.md](decisions/0001-lean-server-bridge.md). Where a request\'s',
    'time goes now, and the work removed from it (journal, list, key hashing, log line):',
    '[docs/decisions/0006-fast-request-path.md](decisions/0006-fast-request-path.md). Why POST falls',
    'short of half a bare server or barely reaches it (0.42x-0.55x across runs), where a create\'s CPU goes (the',
    'socket write about a quarter, young-generation collections 10-14%, @msw/data\'s create about 8%, and',
    'about 420 bytes of heap per stored category), and what would give it a margin:',
    '[docs/decisions/0008-post-and-the-memory-store.md](decisions/0008-post-and-the-memory-store.md).',
  ].join('\n')
}
