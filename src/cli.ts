#!/usr/bin/env node
/**
 * The `petstore-sandbox` command: `serve` binds the sandbox app and owns ports, console output,
 * signals and exit codes; `scenarios list|validate` check scenario files. Every option of
 * `serve` also reads `PETSTORE_SANDBOX_<OPTION>` (`PETSTORE_SANDBOX_PORT=4011`).
 */
import { existsSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import yargs, { type Argv } from 'yargs'
import { hideBin } from 'yargs/helpers'
import { isWorker, reportReady, runWorkers } from './cli-workers.js'
import { PetstoreError } from './errors.js'
import { Latency } from './scenario/scenario-format.js'
import { listScenarioNames, loadScenario, loadScenarioFile } from './scenario/scenario-loader.js'
import { ADMIN_BASE_PATH, API_BASE_PATH, createSandboxApp, DEFAULT_TENANT_TTL_DAYS } from './server/create-sandbox-app.js'
import { parseRedisUrl } from './server/redis-connection.js'
import { DATABASE_FILE, openSqliteStorage } from './server/sqlite-storage.js'
import { PACKAGE } from './server/package-info.js'
import { batchedLines } from './server/log-writer.js'
import type { RequestLogEntry } from './server/request-context.js'
import { DEFAULT_MAX_TENANTS, DEV_API_KEY, displayId } from './server/tenant-registry.js'
import { DEFAULT_DESCRIPTION_MAX_LENGTH, DEFAULT_JOURNAL_BYTES, DEFAULT_MAX_CATEGORIES, DEFAULT_NAME_MAX_LENGTH } from './core/limits.js'
import { DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT_MS } from './server/http-server.js'

/** How long in-flight requests may take to finish after SIGINT/SIGTERM before connections are cut. */
const SHUTDOWN_GRACE_MS = 5_000

/** A mistake of the caller's: reported as one line, without a stack trace. */
class UsageError extends Error {
  override readonly name = 'UsageError'
}

const useColor = process.stderr.isTTY && !process.env['NO_COLOR']
const red = (text: string) => (useColor ? `\x1b[31m${text}\x1b[39m` : text)

function fail(error: unknown, verbose: boolean): never {
  const message = error instanceof Error ? error.message : String(error)
  // @note One line, whatever the message holds: yargs puts what it refused on the next lines
  // ("Invalid values:\n  Argument: log, Given: …, Choices: …").
  const line = message.split('\n').map((part) => part.trim()).filter((part) => part !== '').join(' ')
  process.stderr.write(`${red(`petstore-sandbox: ${line}`)}\n`)
  if (verbose && error instanceof Error && error.stack) process.stderr.write(`${error.stack}\n`)
  process.exit(1)
}

/** Repeated flags and comma-separated environment values alike: `--api-key a --api-key b`, `…_API_KEY=a,b`. */
function list(values: unknown): string[] {
  const items = (Array.isArray(values) ? values : [values]).flatMap((value) => String(value).split(','))
  return items.map((item) => item.trim()).filter((item) => item !== '')
}

function integer(name: string, min: number, max: number) {
  return (value: unknown): number => {
    const text = String(value)
    const number = /^\d+$/.test(text) ? Number(text) : Number.NaN
    if (!(number >= min && number <= max)) {
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}, got "${text}"`)
    }
    return number
  }
}

const UNITS: Readonly<Record<string, number>> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }

/** A size in bytes: `1048576`, `512KiB`, `64MiB`, `2GiB`. */
function bytes(name: string) {
  return (value: unknown): number => {
    const text = String(value)
    const match = /^(\d+)\s*(b|kib|mib|gib)?$/i.exec(text.trim())
    const number = match ? Number(match[1]) * UNITS[(match[2] ?? '').toLowerCase()]! : Number.NaN
    if (!Number.isSafeInteger(number)) {
      throw new UsageError(`--${name} must be a size in bytes (1048576) or with a unit (512KiB, 64MiB, 2GiB), got "${text}"`)
    }
    return number
  }
}

/** `1048576` → `1 MiB`, for the start banner. */
function showBytes(size: number): string {
  for (const [unit, factor] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (size >= factor) return `${Math.round((size / factor) * 10) / 10} ${unit}`
  }
  return `${size} bytes`
}

/** `--workers`: a count, or `auto` for one per core. */
function workers(value: unknown): number {
  return String(value).trim().toLowerCase() === 'auto' ? availableParallelism() : integer('workers', 1, 1024)(value)
}

/** `250` (fixed) or `50-400` (a range drawn from per request), in milliseconds. */
function latency(value: unknown): Latency {
  const text = String(value)
  const match = /^(\d+)(?:-(\d+))?$/.exec(text)
  const parsed = match && Latency.safeParse(match[2] === undefined ? Number(match[1]) : { min: Number(match[1]), max: Number(match[2]) })
  if (!parsed?.success) {
    throw new UsageError(`--latency must be milliseconds (250) or a range (50-400) within 0-60000, got "${text}"`)
  }
  return parsed.data
}

function serveOptions(cli: Argv) {
  return cli
    .option('port', { type: 'string', default: '4010', coerce: integer('port', 0, 65535), describe: 'Port to listen on (0 picks a free one)' })
    .option('host', { type: 'string', default: '127.0.0.1', describe: 'Interface to bind; 0.0.0.0 exposes the sandbox to the network' })
    .option('scenario', { type: 'string', default: 'default', describe: 'Scenario new tenants start from: a name or a path to a .json file' })
    .option('scenarios-dir', { type: 'string', describe: 'Directory of <name>.json scenarios, searched before the built-ins' })
    .option('api-key', { type: 'array', string: true, coerce: list, describe: `Accepted API key (repeat, or comma-separate in the env); default: the scenario's, else ${DEV_API_KEY}` })
    .option('any-key', { type: 'boolean', default: false, describe: 'Accept every non-empty key, each with its own store' })
    .option('max-tenants', { type: 'string', default: String(DEFAULT_MAX_TENANTS), coerce: integer('max-tenants', 1, 1_000_000), describe: 'Tenants kept in memory; beyond, one that loses nothing by leaving is evicted' })
    .option('evict-idle-minutes', { type: 'string', default: '60', coerce: integer('evict-idle-minutes', 0, 525_600), describe: 'In memory, at --max-tenants: evict a tenant unused this long, writes and all (0: never; new keys wait)' })
    .option('admin-token', { type: 'string', describe: 'Token for the admin API over every tenant (?tenant=<id>)' })
    .option('strict', { type: 'boolean', default: false, describe: 'Refuse unknown fields in a new category with 400' })
    .option('latency', { type: 'string', coerce: latency, describe: 'Delay before every answer: ms (250) or a range (50-400)' })
    .option('cors-origin', { type: 'array', string: true, coerce: list, describe: 'Origin allowed by CORS (repeat); default: any' })
    .option('data-dir', { type: 'string', describe: "Keep each tenant's state in a SQLite database in this directory across restarts (needs better-sqlite3)" })
    .option('durability', { choices: ['power-loss', 'process-crash'] as const, default: 'power-loss' as const, describe: 'With --data-dir: answer a write once fsynced (power-loss) or once committed to the OS (process-crash)' })
    .option('redis-url', { type: 'string', describe: 'Keep every tenant in Redis, shared by any number of replicas: redis://[:password@]host:port, rediss:// (TLS), redis-cluster://host:port,host:port (needs redis)' })
    .option('workers', { type: 'string', default: '1', coerce: workers, describe: 'Processes serving the port, one per core with auto (node:cluster); more than 1 needs --redis-url, where every tenant lives' })
    .option('tenant-ttl-days', { type: 'string', default: String(DEFAULT_TENANT_TTL_DAYS), coerce: integer('tenant-ttl-days', 0, 36_500), describe: 'Forget a tenant not used (read or written) for this many days (0: never)' })
    .option('name-max-length', { type: 'string', default: String(DEFAULT_NAME_MAX_LENGTH), coerce: integer('name-max-length', 1, 1_000_000), describe: 'Longest category name accepted, in characters (400 beyond)' })
    .option('description-max-length', { type: 'string', default: String(DEFAULT_DESCRIPTION_MAX_LENGTH), coerce: integer('description-max-length', 0, 1_000_000), describe: 'Longest category description accepted, in characters' })
    .option('max-categories', { type: 'string', default: String(DEFAULT_MAX_CATEGORIES), coerce: integer('max-categories', 0, 10_000_000), describe: 'Categories one tenant may hold (409 category_limit beyond)' })
    .option('journal-bytes', { type: 'string', default: String(DEFAULT_JOURNAL_BYTES), coerce: bytes('journal-bytes'), describe: "Heap each tenant's request journal may hold (1048576, 4MiB)" })
    .option('memory-budget', { type: 'string', coerce: bytes('memory-budget'), describe: 'Heap all tenants may hold together (2GiB); beyond, 503 over_capacity. Default: half the V8 heap limit' })
    .option('scenario-allow', { type: 'array', string: true, coerce: list, describe: 'Scenario tenants may switch to (repeat); default: any the sandbox knows' })
    .option('max-connections', { type: 'string', default: String(DEFAULT_MAX_CONNECTIONS), coerce: integer('max-connections', 1, 1_000_000), describe: 'Open connections served; beyond, 503 except health checks' })
    .option('headers-timeout', { type: 'string', default: String(DEFAULT_HEADERS_TIMEOUT_MS), coerce: integer('headers-timeout', 1, 3_600_000), describe: 'Milliseconds a client has to send its headers (408 after)' })
    .option('request-timeout', { type: 'string', default: String(DEFAULT_REQUEST_TIMEOUT_MS), coerce: integer('request-timeout', 1, 3_600_000), describe: 'Milliseconds a client has to send its whole request; also the longest Prefer: delay' })
    .option('log', { choices: ['pretty', 'json'] as const, default: 'pretty' as const, describe: 'Request log format' })
    .option('quiet', { type: 'boolean', default: false, describe: 'No request log' })
    .check((argv) => {
      if (argv['any-key'] && argv['api-key'] !== undefined) throw new UsageError('--api-key and --any-key cannot be used together')
      if (argv['admin-token'] !== undefined && argv['admin-token'].trim() === '') throw new UsageError('--admin-token must not be empty')
      if (argv['headers-timeout'] > argv['request-timeout']) throw new UsageError('--headers-timeout must not be greater than --request-timeout')
      if (argv['redis-url'] !== undefined && argv['data-dir'] !== undefined) throw new UsageError('--redis-url and --data-dir cannot be used together: choose one store')
      if (argv.workers > 1 && argv['redis-url'] === undefined) {
        throw new UsageError(`--workers ${argv.workers} needs --redis-url: each process would otherwise hold tenants of its own (in memory), or contend for one SQLite directory (--data-dir), and a partner's data would depend on which process answered. Run redis-server and add --redis-url redis://127.0.0.1:6379`)
      }
      return true
    })
}

type ServeArgs = Awaited<ReturnType<typeof serveOptions>['argv']>

function formatLog(format: 'pretty' | 'json') {
  const writeLine = batchedLines(process.stdout)
  return (entry: RequestLogEntry) => {
    const line =
      format === 'json'
        ? JSON.stringify(entry)
        : `${entry.time} ${entry.method} ${entry.path} ${entry.status || 'dropped'} ${entry.ms}ms tenant=${entry.tenant === null ? '-' : displayId(entry.tenant)} id=${entry.requestId}`
    writeLine(line)
  }
}

/** A URL a person can open: a wildcard bind is reached through localhost. */
function displayOrigin(host: string, port: number): string {
  const shown = host === '0.0.0.0' || host === '::' ? 'localhost' : host.includes(':') ? `[${host}]` : host
  return `http://${shown}:${port}`
}

/** Where tenants live, for the start banner (a Redis URL without its password). */
function dataLine(argv: ServeArgs): string {
  if (argv['redis-url'] !== undefined) return `Redis ${parseRedisUrl(argv['redis-url']).display} (shared by every replica on it)`
  if (argv['data-dir'] !== undefined) return `${argv['data-dir']} (SQLite, kept across restarts)`
  return 'in memory (lost on exit; keep it with --data-dir, share it between replicas with --redis-url)'
}

async function serve(argv: ServeArgs): Promise<void> {
  if (argv.workers > 1 && !isWorker()) {
    return runWorkers(argv.workers, (text) => process.stdout.write(text), (line) => process.stderr.write(`${red(line)}\n`))
  }
  const sandbox = await createSandboxApp({
    scenario: argv.scenario,
    scenariosDir: argv['scenarios-dir'],
    apiKeys: argv['api-key'],
    anyKey: argv['any-key'],
    maxTenants: argv['max-tenants'],
    evictIdleMinutes: argv['evict-idle-minutes'],
    adminToken: argv['admin-token'],
    strict: argv.strict,
    latency: argv.latency,
    corsOrigins: argv['cors-origin'] ?? '*',
    log: argv.quiet ? undefined : formatLog(argv.log),
    dataDir: argv['data-dir'],
    redisUrl: argv['redis-url'],
    tenantTtlDays: argv['tenant-ttl-days'],
    durability: argv.durability,
    warn: (message) => process.stderr.write(`petstore-sandbox: warning: ${message}\n`),
    nameMaxLength: argv['name-max-length'],
    descriptionMaxLength: argv['description-max-length'],
    maxCategories: argv['max-categories'],
    journalBytes: argv['journal-bytes'],
    memoryBudgetBytes: argv['memory-budget'],
    scenarioAllow: argv['scenario-allow'],
    maxConnections: argv['max-connections'],
    headersTimeoutMs: argv['headers-timeout'],
    requestTimeoutMs: argv['request-timeout'],
  })
  const server = sandbox.createServer()
  await listen(server, argv.port, argv.host)

  const { port } = server.address() as AddressInfo
  const origin = displayOrigin(argv.host, port)
  const { scenario, limits } = sandbox
  const keys =
    sandbox.apiKeys === 'any'
      ? `any non-empty key, one store per key (at most ${argv['max-tenants']})`
      : sandbox.apiKeys.join(', ') + (sandbox.apiKeys.length === 1 && sandbox.apiKeys[0] === DEV_API_KEY ? ' (development key; choose your own with --api-key)' : '')
  const exposed = argv.host === '0.0.0.0' || argv.host === '::' ? ` (bound to ${argv.host}: reachable from the network)` : ''
  const banner = (
    [
      `petstore-sandbox ${PACKAGE.version} is running`,
      `  API        ${origin}${API_BASE_PATH}${exposed}`,
      `  scenario   ${scenario.name} ${scenario.version}: ${scenario.description}`,
      `  API keys   ${keys}`,
      `  admin API  ${origin}${ADMIN_BASE_PATH}/ (your API key, or the admin token: ${argv['admin-token'] === undefined ? 'not set' : 'set'})`,
      `  OpenAPI    ${origin}${ADMIN_BASE_PATH}/openapi.json`,
      `  limits     names ${limits.nameMaxLength} and descriptions ${limits.descriptionMaxLength} characters, ${limits.maxCategories} categories and a ${showBytes(limits.journalBytes)} journal per tenant, ${showBytes(limits.memoryBudgetBytes)} for all tenants`,
      `             ${limits.maxConnections} connections, headers within ${limits.headersTimeoutMs} ms, requests within ${limits.requestTimeoutMs} ms, scenario switches to ${limits.scenarioAllow === 'any' ? 'any scenario' : limits.scenarioAllow.join(', ') || 'none'}`,
      `  data       ${dataLine(argv)}`,
      ...(argv.workers > 1 ? [`  workers    ${argv.workers} processes on this port (node:cluster), every tenant in Redis; the connection and memory limits hold per process`] : []),
      '  Ctrl+C stops it.',
      '',
    ].join('\n')
  )
  // A worker of `--workers` leaves the banner to the primary, which prints it once all listen.
  if (isWorker()) reportReady(banner)
  else process.stdout.write(banner)

  let closing = false
  const shutdown = (signal: NodeJS.Signals) => {
    if (closing) return
    closing = true
    if (!isWorker()) process.stdout.write(`${signal}: finishing in-flight requests, then exiting\n`)
    server.close(() => process.exit(0))
    // @note close() only drops connections idle at that moment: a keep-alive connection whose
    // request finishes later would hold the exit for its idle timeout, so idle ones are swept.
    server.closeIdleConnections()
    setInterval(() => server.closeIdleConnections(), 50).unref()
    setTimeout(() => {
      process.stdout.write(`in-flight requests still running after ${SHUTDOWN_GRACE_MS} ms: closing their connections\n`)
      server.closeAllConnections()
      process.exit(0)
    }, SHUTDOWN_GRACE_MS).unref()
  }
  process.once('SIGINT', shutdown)
  process.once('SIGTERM', shutdown)
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const why = error.code === 'EADDRINUSE' ? 'the port is in use; choose another with --port' : error.code === 'EACCES' ? 'permission denied; choose a port above 1023' : error.message
      reject(new UsageError(`Cannot listen on ${host}:${port}: ${why}`))
    })
    server.listen(port, host, resolve)
  })
}

async function listScenarios(scenariosDir: string | undefined): Promise<void> {
  for (const name of await listScenarioNames({ scenariosDir })) {
    try {
      const scenario = await loadScenario(name, { scenariosDir })
      process.stdout.write(`${name.padEnd(16)} ${scenario.version.padEnd(8)} ${scenario.description}\n`)
    } catch (error) {
      process.stdout.write(`${name.padEnd(16)} broken   ${(error as Error).message}\n`)
    }
  }
}

async function validateScenarios(files: readonly string[]): Promise<void> {
  let failed = 0
  for (const file of files) {
    try {
      const scenario = await loadScenarioFile(file)
      process.stdout.write(`ok   ${file}: ${scenario.name} ${scenario.version}\n`)
    } catch (error) {
      if (!(error instanceof PetstoreError)) throw error
      failed++
      process.stderr.write(`${red(`fail ${error.message}`)}\n`)
    }
  }
  if (failed > 0) process.exit(1)
}

/** `tenants list|delete --data-dir DIR`: what a stopped server keeps on disk. */
async function tenantsCommand(dir: string, remove: string | undefined): Promise<void> {
  // @note Opening a database creates it: a mistyped directory would read as "no tenants".
  if (!existsSync(join(dir, DATABASE_FILE))) throw new UsageError(`${dir} holds no sandbox data (no ${DATABASE_FILE}): check --data-dir`)
  const storage = await openSqliteStorage({ dir, seed: { scenario: '', categories: [], nextCategoryId: 1 } })
  try {
    const stored = await storage.list()
    if (remove === undefined) {
      for (const tenant of stored) {
        process.stdout.write(`${tenant.id}  ${tenant.scenario.padEnd(16)} ${String(tenant.categories).padStart(7)} categories  last used ${new Date(tenant.updatedAt).toISOString()}\n`)
      }
      return
    }
    if (remove.length < 12) throw new UsageError(`Cannot delete tenant "${remove}": give the full id or at least 12 of its digits (see \`tenants list\`)`)
    const matches = stored.filter((tenant) => tenant.id.startsWith(remove))
    if (matches.length !== 1) {
      throw new UsageError(`Cannot delete tenant "${remove}": ${matches.length === 0 ? 'no stored tenant has this id (see `tenants list`)' : 'several tenants start with it; give more digits'}`)
    }
    await storage.delete(matches[0]!.id)
    process.stdout.write(`deleted tenant ${matches[0]!.id}\n`)
  } finally {
    await storage.close()
  }
}

/** The boolean options, which an environment variable may set too. */
const BOOLEAN_OPTIONS = ['ANY_KEY', 'STRICT', 'QUIET', 'VERBOSE'] as const

/**
 * Reads `PETSTORE_SANDBOX_<BOOLEAN>` as containers write it (`1`, `yes`, `on`, `true`; `0`, `no`,
 * `off`, `false`) and refuses anything else, where yargs alone would quietly read `1` as false.
 */
function readBooleanEnvironment(env: NodeJS.ProcessEnv): void {
  for (const name of BOOLEAN_OPTIONS) {
    const variable = `PETSTORE_SANDBOX_${name}`
    const value = env[variable]
    if (value === undefined) continue
    if (/^(1|true|yes|on)$/i.test(value.trim())) env[variable] = 'true'
    else if (/^(0|false|no|off|)$/i.test(value.trim())) env[variable] = 'false'
    else throw new UsageError(`${variable} must be true or false (1/0, yes/no, on/off), got "${value}"`)
  }
}

/** Runs the command line; resolves when a command has finished (or the server is up). */
async function main(args: readonly string[]): Promise<void> {
  try {
    readBooleanEnvironment(process.env)
  } catch (error) {
    fail(error, false)
  }
  const verbose = args.includes('--verbose') || process.env['PETSTORE_SANDBOX_VERBOSE'] === 'true'
  const cli = yargs(args)
    .scriptName('petstore-sandbox')
    .usage('$0 <command> [options]')
    .env('PETSTORE_SANDBOX')
    .option('verbose', { type: 'boolean', default: false, describe: 'Print stack traces of errors' })
    .command('serve', 'Start the sandbox server', serveOptions, (argv) => serve(argv as ServeArgs))
    .command('scenarios', 'List or validate scenarios', (scenarios) =>
      scenarios
        .command(
          'list',
          'List the scenarios serve --scenario accepts',
          (cmd) => cmd.option('scenarios-dir', { type: 'string', describe: 'Directory of <name>.json scenarios' }),
          (argv) => listScenarios(argv['scenarios-dir']),
        )
        .command(
          'validate <file...>',
          'Check scenario files (and the fixtures they name); exit 1 if any is broken',
          (cmd) => cmd.positional('file', { type: 'string', array: true, demandOption: true }),
          (argv) => validateScenarios(argv.file),
        )
        .demandCommand(1, 'Name a scenarios command: list or validate'),
    )
    .command('tenants', "List or delete the tenants a data directory keeps (the server must be stopped; while it runs, use DELETE /__sandbox/tenants/<id>)", (cmd) =>
      cmd
        .option('data-dir', { type: 'string', demandOption: true, describe: 'The data directory the server uses' })
        .command('list', 'List stored tenants: id, scenario, categories, last use', {}, (argv) => tenantsCommand(String(argv['data-dir']), undefined))
        .command('delete <id>', "Delete a tenant's data (its full id, or a unique prefix of 12+ digits)", (sub) => sub.positional('id', { type: 'string', demandOption: true }), (argv) => tenantsCommand(String(argv['data-dir']), argv.id))
        .demandCommand(1, 'Name a tenants command: list or delete'),
    )
    .demandCommand(1, 'Name a command: serve, scenarios or tenants')
    .strict()
    .version(PACKAGE.version)
    .help()
    // @note yargs renders the help text on every run of a command (to cache it); wrapping it to the
    // terminal is a sixth of a start's CPU, so only a run that prints it wraps it.
    .wrap(args.some((arg) => arg === '--help' || arg.startsWith('--help=')) ? Math.min(110, process.stdout.columns ?? 110) : null)
    .fail((message, error) => {
      throw error ?? new UsageError(message)
    })
  try {
    await cli.parseAsync()
  } catch (error) {
    fail(error, verbose)
  }
}

await main(hideBin(process.argv))
