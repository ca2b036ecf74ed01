/**
 * `petstore-sandbox scenarios record --from <base-url> --api-key K --out file.json`: a live
 * service's categories, orders and pets as a scenario file (`scenario-recorder.ts` reads them).
 * The file appears whole or not at all: everything is written to temporary files beside the
 * targets, then renamed over them.
 */
import { randomUUID } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, rename, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, extname, join, relative, resolve, sep } from 'node:path'
import type { Argv } from 'yargs'
import { PetstoreError } from '../core/petstore-error.js'
import { PACKAGE_ROOT } from '../server/package-info.js'
import { DEFAULT_RECORD_DEADLINE_MS, DEFAULT_RECORD_TIMEOUT_MS, recordScenario, type RecordedScenarioFile } from '../scenario/scenario-recorder.js'
import { DEFAULT_MAX_ANSWER_BYTES } from '../verify/answer-body.js'
import { UsageError, type CliIo } from './cli-io.js'
import { integer, integerOption, list, sizeOption } from './option-values.js'

/** The exit code when the service, not the command line, stopped the recording (401, unreachable, an answer the contract refuses). */
export const RECORD_UPSTREAM_EXIT_CODE = 2

/** A progress line on stderr every this many pet reads, or once this long has passed without one: a long recording is never silent. */
const PROGRESS_EVERY = { pets: 100, ms: 10_000 } as const

export function recordOptions(cli: Argv) {
  return cli
    .option('from', { type: 'string', demandOption: true, describe: 'Base URL of the service, ending in /v1' })
    .option('api-key', { type: 'string', demandOption: true, describe: 'Bearer key the service accepts (never written to the file nor printed)' })
    .option('out', { type: 'string', demandOption: true, describe: 'Scenario file to write (refused if it exists, unless --force)' })
    .option('name', { type: 'string', describe: 'Scenario name; default: the file name without .json' })
    .option('scenario-version', { type: 'string', default: '1.0.0', describe: 'Scenario version, MAJOR.MINOR.PATCH' })
    .option('description', { type: 'string', describe: 'Scenario description; default: "Recorded from <base URL> on <date>"' })
    .option('pet-ids', { type: 'array', string: true, coerce: petIds, describe: 'Pet ids to read with GET /pets/{petId} (repeat or comma-separate)' })
    .option('probe-pets', { ...integerOption('probe-pets', 0, 1000), describe: 'Read pet ids 1, 2, 3… until this many in a row are not found (0: none); default 10 without --pet-ids, else 0' })
    .option('fixtures-dir', { type: 'string', describe: 'Write categories, pets and orders to <dir>/<collection>/<name>.json fixtures the scenario names, instead of inline' })
    .option('timeout', { ...integerOption('timeout', 1, 600_000), default: DEFAULT_RECORD_TIMEOUT_MS, describe: 'Milliseconds each request to the service may take, its whole answer included' })
    .option('deadline', { ...integerOption('deadline', 1, 86_400_000), default: DEFAULT_RECORD_DEADLINE_MS, describe: 'Milliseconds the whole recording may take; past them it stops and writes nothing' })
    .option('max-answer-bytes', { ...sizeOption('max-answer-bytes', DEFAULT_MAX_ANSWER_BYTES), describe: 'The most bytes of one answer read, a size (65536, 64MiB); a larger one stops the recording' })
    .option('force', { type: 'boolean', default: false, describe: 'Replace --out (and the fixtures) if they exist' })
}

type RecordArgs = Awaited<ReturnType<typeof recordOptions>['argv']>

function petIds(values: unknown): number[] {
  return list(values).map((value) => integer('pet-ids', 1, Number.MAX_SAFE_INTEGER)(value))
}

/**
 * A refusal of `recordScenario()`'s naming the flag that set what it refused (and, where a variable
 * set it, run-cli.ts names the variable): `Cannot record from "x"` → `Cannot record --from "x"`.
 */
function inFlagWords(message: string): string {
  return message.replace(/^Cannot record from /, 'Cannot record --from ').replace(/^Cannot record a scenario with version /, 'Cannot record --scenario-version ')
}

/** Records the service into `--out`; resolves with the exit code (2 when the service stopped it). */
export async function recordCommand(argv: RecordArgs, io: CliIo, red: (text: string) => string): Promise<number> {
  const apiKey: unknown = argv['api-key']
  if (typeof apiKey !== 'string' || apiKey === '') throw new UsageError('--api-key must be given once, with the key the service accepts')
  const out = argv.out
  const name = argv.name ?? basename(out, extname(out))
  const targets = files(out, name, argv['fixtures-dir'])
  const existing = targets.filter((file) => existsSync(file))
  if (existing.length > 0 && !argv.force) throw new UsageError(`${existing.join(', ')} already exist${existing.length === 1 ? 's' : ''}: pass --force to replace, or choose another --out`)

  let recorded
  let lastLine = Date.now()
  try {
    recorded = await recordScenario({
      from: argv.from,
      apiKey,
      name,
      version: argv['scenario-version'],
      description: argv.description,
      petIds: argv['pet-ids'],
      probePets: argv['probe-pets'],
      timeoutMs: argv.timeout,
      deadlineMs: argv.deadline,
      maxAnswerBytes: argv['max-answer-bytes'],
      onPetRead: ({ petsRead, petsFound, petId }) => {
        if (petsRead % PROGRESS_EVERY.pets !== 0 && Date.now() - lastLine < PROGRESS_EVERY.ms) return
        lastLine = Date.now()
        io.stderr(`reading pets: ${petsRead} read, ${petsFound} found, last id ${petId}\n`)
      },
    })
  } catch (error) {
    if (!(error instanceof PetstoreError)) throw error
    if (error.code === 'invalid_option') throw new UsageError(inFlagWords(error.message), { cause: error })
    io.stderr(`${red(`petstore-sandbox: ${error.message} Nothing was written.`)}\n`)
    return RECORD_UPSTREAM_EXIT_CODE
  }
  const { scenario, notes } = recorded
  await writeAll(scenarioFiles(scenario, out, argv['fixtures-dir'] === undefined ? undefined : targets.slice(1)))
  for (const note of notes) io.stderr(`note: ${note}\n`)
  const { seed, deprecation } = scenario
  const sunset = deprecation === undefined ? '' : `; GET /pets/{petId} deprecated${deprecation.sunset ? `, sunset ${deprecation.sunset}` : ''}${deprecation.afterSunset ? ', past its sunset (410)' : ''}`
  const count = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`
  const counts = [count(seed.categories.length, 'category', 'categories'), count(seed.pets.length, 'pet', 'pets'), count(seed.orders.length, 'order', 'orders')]
  io.stdout(`recorded ${scenario.name} ${scenario.version}: ${counts.join(', ')}${sunset}\n`)
  io.stdout(`wrote ${targets.join(', ')}\n`)
  return 0
}

/** The scenario file first, then (with `--fixtures-dir`) the categories, pets and orders fixtures. */
function files(out: string, name: string, fixturesDir: string | undefined): string[] {
  const collections = ['categories', 'pets', 'orders'] as const
  return [out, ...(fixturesDir === undefined ? [] : collections.map((collection) => join(fixturesDir, collection, `${name}.json`)))]
}

/** Each file's path and text: the scenario (with `$schema`) and its fixtures, paths relative to it. */
function scenarioFiles(scenario: RecordedScenarioFile, out: string, fixtures: readonly string[] | undefined): { file: string; text: string }[] {
  const from = dirname(resolve(out))
  const link = (target: string) => relative(from, resolve(target)).split(sep).join('/')
  const text = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`
  const [categories, pets, orders] = fixtures ?? []
  const seed =
    categories && pets && orders
      ? { categories: { fixture: link(categories) }, pets: { fixture: link(pets) }, orders: { fixture: link(orders) } }
      : scenario.seed
  const file = { $schema: link(join(PACKAGE_ROOT, 'schema', 'scenario.schema.json')), ...scenario, seed }
  return [
    { file: out, text: text(file) },
    ...(categories && pets && orders
      ? [
          { file: categories, text: text(scenario.seed.categories) },
          { file: pets, text: text(scenario.seed.pets) },
          { file: orders, text: text(scenario.seed.orders) },
        ]
      : []),
  ]
}

/**
 * Writes every file to a temporary file beside it, then renames them into place, the scenario
 * last: an interrupted run leaves the old files (or none), never half of one.
 */
async function writeAll(outputs: readonly { file: string; text: string }[]): Promise<void> {
  const staged = outputs.map(({ file, text }) => ({ file, text, temp: join(dirname(file), `.${basename(file)}.${randomUUID().slice(0, 8)}.tmp`) }))
  const renamed: string[] = []
  try {
    for (const { file, text, temp } of staged) {
      await mkdir(dirname(file), { recursive: true })
      await writeFile(temp, text, { flag: 'wx' })
    }
    for (const { file, temp } of [...staged.slice(1), ...staged.slice(0, 1)]) {
      await rename(temp, file)
      renamed.push(file)
    }
  } catch (error) {
    await Promise.all(staged.map(({ temp }) => rm(temp, { force: true })))
    const { code, path } = error as NodeJS.ErrnoException
    const done = renamed.length === 0 ? 'Nothing was written' : `Only ${renamed.join(', ')} ${renamed.length === 1 ? 'was' : 'were'} written`
    throw new UsageError(`Cannot write ${path ?? 'the scenario'}: ${code ?? String(error)}. ${done}.`)
  }
}
