/** `petstore-sandbox serve`: its options, the start banner, the request log, and a graceful stop. */
import { readdir } from 'node:fs/promises'
import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Argv } from 'yargs'
import { DEFAULT_DESCRIPTION_MAX_LENGTH, DEFAULT_JOURNAL_BYTES, DEFAULT_MAX_CATEGORIES, DEFAULT_NAME_MAX_LENGTH } from '../contract/limits.js'
import { PetstoreError } from '../core/petstore-error.js'
import { ADMIN_BASE_PATH, API_BASE_PATH, createSandboxApp } from '../server/create-sandbox-app.js'
import { brokenOptionRule, DEFAULT_STORE_BUDGET_BYTES, DEFAULT_TENANT_TTL_DAYS, type SandboxAppOptions } from '../server/sandbox-options.js'
import { DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUEST_TIMEOUT_MS } from '../server/http-server.js'
import { batchedLines } from '../server/log-writer.js'
import { PACKAGE } from '../server/package-info.js'
import { parseRedisUrl } from '../storage/redis-connection.js'
import type { RequestLogEntry } from '../server/request-context.js'
import { DEFAULT_MAX_TENANTS, DEV_API_KEY, displayId } from '../server/tenant-registry.js'
import { looksLikePath } from '../scenario/scenario-loader.js'
import { UsageError, type CliIo } from './cli-io.js'
import { isWorker, reportReady, workerEpochOptions } from './serve-workers.js'
import { integerOption, latency, list, oneOf, showBytes, sizeOption, workersOption } from './option-values.js'

/** How long in-flight requests may take to finish after a stop (SIGINT/SIGTERM) before connections are cut. */
export const SHUTDOWN_GRACE_MS = 5_000

/** The last line of the start banner: once printed, the sandbox answers. */
export const READY_LINE = 'Ctrl+C stops it.'

const DURABILITIES = ['power-loss', 'process-crash'] as const

export function serveOptions(cli: Argv) {
  return cli
    .option('port', { ...integerOption('port', 0, 65535), default: 4010, describe: 'Port to listen on (0 picks a free one)' })
    .option('host', { type: 'string', default: '127.0.0.1', describe: 'Interface to bind; 0.0.0.0 exposes the sandbox to the network' })
    .option('scenario', { type: 'string', default: 'default', describe: 'Scenario new tenants start from: a name or a path to a .json file' })
    .option('scenarios-dir', { type: 'string', describe: 'Directory of <name>.json scenarios, searched before the built-ins' })
    .option('watch', { type: 'boolean', default: false, describe: 'Reload the scenario file, its fixtures and --scenarios-dir when edited (a broken edit keeps the last good version)' })
    .option('api-key', { type: 'array', string: true, coerce: list, describe: `Accepted API key (repeat, or comma-separate in the env); default: the scenario's, else ${DEV_API_KEY}` })
    .option('any-key', { type: 'boolean', default: false, describe: 'Accept every non-empty key, each with its own store' })
    .option('max-tenants', { ...integerOption('max-tenants', 1, 1_000_000), default: DEFAULT_MAX_TENANTS, describe: 'Tenants kept in memory; beyond, one that loses nothing by leaving is evicted' })
    .option('evict-idle-minutes', { ...integerOption('evict-idle-minutes', 0, 525_600), default: 60, describe: 'In memory, at --max-tenants: evict a tenant unused this long, writes and all (0: never; new keys wait)' })
    .option('admin-token', { type: 'string', describe: 'Token for the admin API over every tenant (?tenant=<id>)' })
    .option('strict', { type: 'boolean', default: false, describe: 'Refuse unknown fields in a new category with 400' })
    .option('latency', { type: 'string', coerce: latency, describe: 'Delay before every answer: ms (250) or a range (50-400)' })
    .option('cors-origin', { type: 'array', string: true, coerce: list, describe: 'Origin allowed by CORS (repeat); default: any' })
    .option('data-dir', { type: 'string', describe: "Keep each tenant's state in a SQLite database in this directory across restarts (needs better-sqlite3)" })
    .option('durability', { choices: DURABILITIES, coerce: oneOf('durability', DURABILITIES), default: 'power-loss' as const, describe: 'With --data-dir: answer a write once fsynced (power-loss) or once committed to the OS (process-crash)' })
    .option('redis-url', { type: 'string', describe: 'Keep every tenant in Redis, shared by any number of replicas: redis://[:password@]host:port, rediss:// (TLS), redis-cluster://host:port,host:port (needs redis)' })
    .option('redis-allow-eviction', { type: 'boolean', default: false, describe: "With --redis-url: accept a Redis whose maxmemory-policy may evict keys (tenants' data silently lost when it is full); refused without it" })
    .option('redis-allow-failover-loss', { type: 'boolean', default: false, describe: "With --redis-url: answer a write once its master has it, not waiting for its replicas (a failover to a replica behind loses writes answered 201). Without it, every replica online confirms each write first; a replica stopped or behind makes writes wait up to the request's time, then answer 503 write_outcome_unknown, and fewer replicas online than expected (--redis-replicas) makes them 503 at once" })
    .option('redis-replicas', { ...integerOption('redis-replicas', 0, 1000), describe: 'With --redis-url: replicas each Redis master has; a write is answered 201 once that many (and every replica online) have it, 503 write_outcome_unknown at once with fewer online. Default: the most seen online at once (on a Cluster, those CLUSTER NODES lists); set it after removing a replica for good' })
    .option('workers', { ...workersOption(), default: 1, describe: 'Processes serving the port: a number, or auto for one per core (node:cluster); more than 1 needs --redis-url, where every tenant lives' })
    .option('tenant-ttl-days', { ...integerOption('tenant-ttl-days', 0, 36_500), default: DEFAULT_TENANT_TTL_DAYS, describe: 'Forget a tenant not used (read or written) for this many days (0: never)' })
    .option('name-max-length', { ...integerOption('name-max-length', 1, 1_000_000), default: DEFAULT_NAME_MAX_LENGTH, describe: 'Longest category name accepted, in characters (400 beyond)' })
    .option('description-max-length', { ...integerOption('description-max-length', 0, 1_000_000), default: DEFAULT_DESCRIPTION_MAX_LENGTH, describe: 'Longest category description accepted, in characters' })
    .option('max-categories', { ...integerOption('max-categories', 0, 10_000_000), default: DEFAULT_MAX_CATEGORIES, describe: 'Categories one tenant may hold (409 category_limit beyond)' })
    .option('journal-bytes', { ...sizeOption('journal-bytes', DEFAULT_JOURNAL_BYTES), describe: "Heap each tenant's request journal may hold, a size (1048576, 4MiB)" })
    .option('memory-budget', { ...sizeOption('memory-budget'), describe: 'Heap all tenants may hold together, a size (2GiB); beyond, 503 over_capacity. Default: half the V8 heap limit' })
    .option('store-budget', { ...sizeOption('store-budget', DEFAULT_STORE_BUDGET_BYTES), describe: 'With --data-dir or --redis-url: data all tenants may store together, a size (1GiB; 0: no limit); beyond, 503 over_capacity' })
    .option('scenario-allow', { type: 'array', string: true, coerce: list, describe: 'Scenario tenants may switch to (repeat); default: any the sandbox knows' })
    .option('max-connections', { ...integerOption('max-connections', 1, 1_000_000), default: DEFAULT_MAX_CONNECTIONS, describe: 'Open connections served; beyond, 503 except health checks' })
    .option('headers-timeout', { ...integerOption('headers-timeout', 1, 3_600_000), describe: `Milliseconds a client has to send its headers (408 after) [default: ${DEFAULT_HEADERS_TIMEOUT_MS}, or --request-timeout when shorter]` })
    .option('request-timeout', { ...integerOption('request-timeout', 1, 3_600_000), default: DEFAULT_REQUEST_TIMEOUT_MS, describe: 'Milliseconds a client has to send its whole request; also the longest Prefer: delay' })
    .option('public-url', { type: 'string', describe: 'URL clients reach the sandbox at, listed first in /__sandbox/openapi.json (default: the address the client connected to)' })
    .option('proxy', {
      type: 'string',
      describe: "Validating proxy: pass every API request on to the real service at this base URL (https://staging.shop.test/v1) and check its answers against the contract",
    })
    .option('trust-proxy', { type: 'boolean', default: false, describe: 'Believe X-Forwarded-Host and X-Forwarded-Proto (only behind a proxy that sets them)' })
    .option('redact-header', { type: 'array', string: true, coerce: list, describe: 'Request header the journal shows as [redacted], beyond the defaults (repeat; see docs/library.md, Journal redaction)' })
    .option('redact-query-param', { type: 'array', string: true, coerce: list, describe: 'Query parameter journaled URLs show as [redacted], beyond the defaults (repeat)' })
    .option('log', { type: 'string', default: 'pretty', coerce: logFormat, describe: 'Request log format: pretty or json' })
    .option('quiet', { type: 'boolean', default: false, describe: 'No request log' })
    .check((argv) => {
      if (argv['admin-token'] !== undefined && argv['admin-token'].trim() === '') throw new UsageError('--admin-token must not be empty')
      if (argv['api-key'] !== undefined && argv['api-key'].length === 0) throw new UsageError('--api-key must not be empty: give a key without spaces (--api-key k1)')
      const broken = brokenOptionRule(sandboxOptions(argv), flagName)
      if (broken !== undefined) throw new UsageError(broken)
      if (argv.watch && argv['scenarios-dir'] === undefined && !looksLikePath(argv.scenario)) {
        throw new UsageError(`--watch has nothing to watch: scenario "${argv.scenario}" is built in. Give a scenario file (--scenario ./shop.json) or --scenarios-dir`)
      }
      // @note `--memory-budget 1` (a unit forgotten) started, and refused every create (trial5 P9).
      if (argv['memory-budget'] !== undefined && argv['memory-budget'] < 1024 * 1024) {
        throw new UsageError(`--memory-budget ${argv['memory-budget']} is ${argv['memory-budget']} bytes, too little to hold a tenant: give a size with its unit, at least 1MiB (512MiB, 2GiB)`)
      }
      if (argv.workers > 1 && argv['redis-url'] === undefined) {
        throw new UsageError(`--workers ${argv.workers} needs --redis-url: each process would otherwise hold tenants of its own (in memory), or contend for one SQLite directory (--data-dir), and a partner's data would depend on which process answered. Run redis-server and add --redis-url redis://127.0.0.1:6379`)
      }
      return true
    })
}

export type ServeArgs = Awaited<ReturnType<typeof serveOptions>['argv']>

/** A sandbox that `serve` started: it answers until stopped. */
export interface RunningSandbox {
  /** `http://127.0.0.1:4010`: where it listens (the API is under `/v1`). */
  readonly origin: string
  /**
   * Stops taking connections, lets in-flight requests finish (cutting them after
   * {@link SHUTDOWN_GRACE_MS}), then closes the store. Called again, returns the same promise.
   * @param reason Printed first: `SIGTERM: finishing in-flight requests, then exiting`.
   */
  stop(reason: string): Promise<void>
}

function formatLog(format: 'pretty' | 'json', io: CliIo) {
  const writeLine = batchedLines({ write: io.stdout })
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

/** The store budget as the banner says it (0: none, as 0 means "never" for the other limits). */
function storeBudgetText(bytes: number): string {
  return bytes === 0 ? 'no limit on tenant data' : `at most ${showBytes(bytes)} of tenant data`
}

/** Where tenants live, for the start banner (a Redis URL without its password); `storeBudget`: the one the store holds to. */
function dataLine(argv: ServeArgs, storeBudget: number): string {
  if (argv['redis-url'] !== undefined) {
    const target = parseRedisUrl(argv['redis-url'])
    // @note A Cluster's scripts see one slot: the budget is not enforced there, as the warning above the banner says (attack17 D1).
    return `Redis ${target.display} (shared by every replica on it, ${target.mode === 'cluster' ? 'no limit on tenant data enforced on a Cluster' : storeBudgetText(storeBudget)})`
  }
  if (argv['data-dir'] !== undefined) return `${argv['data-dir']} (SQLite, kept across restarts, ${storeBudgetText(storeBudget)})`
  return 'in memory (lost on exit; keep it with --data-dir, share it between replicas with --redis-url)'
}

/**
 * The `createSandboxApp()` options `serve` passes on as its flags hold them, by option, with the
 * flag that holds each: read for the call, and to say a refused option as the flag that set it.
 */
const SANDBOX_OPTION_FLAGS = {
  scenario: 'scenario',
  scenariosDir: 'scenarios-dir',
  apiKeys: 'api-key',
  anyKey: 'any-key',
  maxTenants: 'max-tenants',
  evictIdleMinutes: 'evict-idle-minutes',
  adminToken: 'admin-token',
  strict: 'strict',
  latency: 'latency',
  dataDir: 'data-dir',
  redisUrl: 'redis-url',
  redisAllowEviction: 'redis-allow-eviction',
  redisAllowFailoverLoss: 'redis-allow-failover-loss',
  redisReplicas: 'redis-replicas',
  tenantTtlDays: 'tenant-ttl-days',
  durability: 'durability',
  nameMaxLength: 'name-max-length',
  descriptionMaxLength: 'description-max-length',
  maxCategories: 'max-categories',
  journalBytes: 'journal-bytes',
  memoryBudgetBytes: 'memory-budget',
  storeBudgetBytes: 'store-budget',
  scenarioAllow: 'scenario-allow',
  maxConnections: 'max-connections',
  headersTimeoutMs: 'headers-timeout',
  requestTimeoutMs: 'request-timeout',
  publicUrl: 'public-url',
  trustProxy: 'trust-proxy',
  proxy: 'proxy',
  redactHeaders: 'redact-header',
  redactQueryParams: 'redact-query-param',
  watch: 'watch',
} as const satisfies { readonly [Option in keyof SandboxAppOptions]?: keyof ServeArgs }

type SandboxOptionFlags = typeof SANDBOX_OPTION_FLAGS

/** The options of {@link SANDBOX_OPTION_FLAGS}, from the flags. */
function sandboxOptions(argv: Pick<ServeArgs, SandboxOptionFlags[keyof SandboxOptionFlags]>): { [Option in keyof SandboxOptionFlags]: ServeArgs[SandboxOptionFlags[Option]] } {
  const options = Object.entries(SANDBOX_OPTION_FLAGS).map(([option, flag]) => [option, argv[flag]])
  return Object.fromEntries(options) as { [Option in keyof SandboxOptionFlags]: ServeArgs[SandboxOptionFlags[Option]] }
}

/** An option as `serve` names it: the flag that holds it (`--redis-url`). */
function flagName(option: keyof SandboxAppOptions): string {
  return Object.hasOwn(SANDBOX_OPTION_FLAGS, option) ? `--${SANDBOX_OPTION_FLAGS[option as keyof SandboxOptionFlags]}` : option
}

/**
 * A refusal of `createSandboxApp()`'s in the flags' words, so that its one line names what the
 * user set (and run-cli.ts, where a variable set it, the variable): `Invalid sandbox option
 * publicUrl: …` → `Invalid --public-url: …`; `Cannot use scenario "x"` → `Cannot use --scenario "x"`.
 * @note The library names an option in these few phrasings only (`optionJudge`, the scenario
 * loader, the Redis URL); test/cli/environment.test.ts holds each to its flag.
 */
function inFlagWords(error: unknown): unknown {
  if (!(error instanceof PetstoreError)) return error
  const flagOf = (option: string) => (Object.hasOwn(SANDBOX_OPTION_FLAGS, option) ? SANDBOX_OPTION_FLAGS[option as keyof SandboxOptionFlags] : undefined)
  const message = error.message
    .replace(/^Invalid (?:sandbox|petstore) option (\w+)[^\s:]*/, (phrase, option: string) => {
      const flag = flagOf(option)
      return flag === undefined ? phrase : `Invalid --${flag}`
    })
    .replace(/^Cannot use scenario (?=")/, error.code === 'unknown_scenario' ? 'Cannot use --scenario ' : 'Cannot use scenario ')
    .replace(/^Cannot use Redis URL /, 'Cannot use --redis-url ')
  return message === error.message ? error : new UsageError(message, { cause: error })
}

/** The scenarios of `--scenarios-dir` as the banner says them: how many, the first names, where. */
async function scenariosLine(dir: string): Promise<string> {
  const names = (await readdir(dir).catch((): string[] => []))
    .filter((entry) => /^[A-Za-z0-9_-]{1,64}\.json$/.test(entry))
    .map((entry) => entry.slice(0, -'.json'.length))
    .sort()
  const shown = names.length > 6 ? `${names.slice(0, 6).join(', ')}, …` : names.join(', ')
  return `${names.length} from ${dir}${names.length === 0 ? '' : ` (${shown})`}, beside the built-ins: tenants switch with PUT ${ADMIN_BASE_PATH}/scenario`
}

/** Starts the sandbox, prints the start banner, and resolves once it answers. */
export async function serve(argv: ServeArgs, io: CliIo): Promise<RunningSandbox> {
  let failed = false
  const sandbox = await createSandboxApp({
    ...sandboxOptions(argv),
    ...(isWorker() && argv['redis-url'] !== undefined ? workerEpochOptions() : {}),
    corsOrigins: argv['cors-origin'] ?? '*',
    log: argv.quiet ? undefined : formatLog(argv.log, io),
    // A worker never exits because Redis is away, at start either: it answers 503 until Redis is back.
    redisUnreachableAtStart: isWorker() ? 'serve' : 'refuse',
    warn: (message) => {
      if (!failed) io.stderr(`petstore-sandbox: warning: ${message}\n`)
    },
    // A refused edit is a warning (the last good version serves on); a reload, a line of the log.
    onReload: (reload) => {
      if (reload.error !== undefined) io.stderr(`petstore-sandbox: warning: ${reload.message}\n`)
      else io.stdout(`${reload.message}\n`)
    },
  }).catch((error: unknown) => {
    throw inFlagWords(error)
  })
  const server = sandbox.createServer()
  try {
    await listen(server, argv.port, argv.host)
  } catch (error) {
    // @note The store closes quietly: what its closing says (a Redis connection dropped) is not
    // the failure, which the caller reports in one line.
    failed = true
    await sandbox.close()
    throw error
  }

  const { port } = server.address() as AddressInfo
  const origin = displayOrigin(argv.host, port)
  const { scenario, limits } = sandbox
  const watched = sandbox.watchStatus()
  const keys =
    argv['proxy'] !== undefined
      ? 'judged by the real service (passed on, never logged); one journal per key'
      : sandbox.apiKeys === 'any'
      ? `any non-empty key, one store per key (at most ${argv['max-tenants']})`
      : sandbox.apiKeys.join(', ') + (sandbox.apiKeys.length === 1 && sandbox.apiKeys[0] === DEV_API_KEY ? ' (development key; choose your own with --api-key)' : '')
  const exposed = argv.host === '0.0.0.0' || argv.host === '::' ? ` (bound to ${argv.host}: reachable from the network)` : ''
  const banner = (
    [
      `petstore-sandbox ${PACKAGE.version} is running`,
      `  API        ${origin}${API_BASE_PATH}${exposed}`,
      // @note Left out, a sandbox behind a proxy showed only its local address (trial38).
      ...(argv['public-url'] === undefined ? [] : [`  public URL ${argv['public-url']} (listed first in the OpenAPI document's servers)`]),
      argv['proxy'] === undefined ? `  scenario   ${scenario.name} ${scenario.version}: ${scenario.description}` : `  scenario   none used: every API answer is the real service's`,
      // @note Left out, nothing on screen said the directory was read (trial41 R5).
      ...(argv['proxy'] === undefined && argv['scenarios-dir'] !== undefined ? [`  scenarios  ${await scenariosLine(argv['scenarios-dir'])}`] : []),
      ...(argv['proxy'] === undefined ? [] : [`  proxy      every API request passed on to ${argv['proxy']}, its answers checked against the contract (Sandbox-Violations header, GET ${ADMIN_BASE_PATH}/violations)`]),
      `  API keys   ${keys}`,
      `  admin API  ${origin}${ADMIN_BASE_PATH}/ (your API key, or the admin token: ${argv['admin-token'] === undefined ? 'not set' : 'set'})`,
      `  OpenAPI    ${origin}${ADMIN_BASE_PATH}/openapi.json`,
      `  limits     names ${limits.nameMaxLength} and descriptions ${limits.descriptionMaxLength} characters, ${limits.maxCategories} ${limits.maxCategories === 1 ? 'category' : 'categories'} and a ${showBytes(limits.journalBytes)} journal per tenant, ${showBytes(limits.memoryBudgetBytes)} for all tenants`,
      `             ${limits.maxConnections} connections, headers within ${limits.headersTimeoutMs} ms, requests within ${limits.requestTimeoutMs} ms, scenario switches to ${limits.scenarioAllow === 'any' ? 'any scenario' : limits.scenarioAllow.join(', ') || 'none'}`,
      `  data       ${dataLine(argv, limits.storeBudgetBytes)}`,
      ...(watched ? [`  watching   ${watched.files} scenario and fixture files: edits reload (tenants that never wrote see them at once, the others at their next reset)`] : []),
      ...(argv.workers > 1 ? [`  workers    ${argv.workers} processes on this port (node:cluster), every tenant in Redis; the connection and memory limits hold per process`] : []),
      `  ${READY_LINE}`,
      '',
    ].join('\n')
  )
  // A worker of `--workers` leaves the banner to the primary, which prints it once all listen.
  if (isWorker()) reportReady(banner)
  else io.stdout(banner)

  let stopping: Promise<void> | undefined
  const stop = (reason: string): Promise<void> => {
    stopping ??= (async () => {
      if (!isWorker()) io.stdout(`${reason}: finishing in-flight requests, then exiting\n`)
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      // @note close() only drops connections idle at that moment: a keep-alive connection whose
      // request finishes later would hold the stop for its idle timeout, so idle ones are swept.
      server.closeIdleConnections()
      const sweep = setInterval(() => server.closeIdleConnections(), 50)
      const grace = setTimeout(() => {
        io.stdout(`in-flight requests still running after ${SHUTDOWN_GRACE_MS} ms: closing their connections\n`)
        server.closeAllConnections()
      }, SHUTDOWN_GRACE_MS)
      try {
        await closed
      } finally {
        clearInterval(sweep)
        clearTimeout(grace)
      }
      await sandbox.close()
    })()
    return stopping
  }
  return { origin, stop }
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) => {
      const why =
        error.code === 'EADDRINUSE' ? 'the port is in use; choose another with --port'
        : error.code === 'EACCES' ? 'permission denied; choose a port above 1023'
        : error.code === 'ENOTFOUND' || error.code === 'EADDRNOTAVAIL' ? `${error.message}; give --host an address of this machine (127.0.0.1, or 0.0.0.0 for every interface)`
        : error.message
      reject(new UsageError(`Cannot listen on ${host}:${port}: ${why}`))
    })
    server.listen(port, host, () => resolve())
  })
}

/** `--log`: said in one line like the other flags (yargs' `choices` answers on three). */
function logFormat(value: unknown): 'pretty' | 'json' {
  if (value === 'pretty' || value === 'json') return value
  throw new UsageError(`--log must be pretty or json, got ${JSON.stringify(value)}`)
}
