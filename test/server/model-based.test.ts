/**
 * Model-based tests of the standalone server (issue 20): fast-check drives random sequences of
 * creates (valid and invalid bodies), lists, resets (API key or admin token), scenario switches,
 * planned answers (issue 21: each used once, by its own tenant and operation, dropped by a reset)
 * from three tenants of a spawned `petstore-sandbox serve`, on plain connections and on raw ones:
 * pipelined requests (several tenants on one connection), a half-close after a complete request, a
 * slow reader, a client pipelining past the limit (its create under way answered, none waiting
 * run), a client that leaves before its answer, bursts of concurrent requests, store stalls
 * (SIGSTOP of redis-server; of the sandbox process for the memory and SQLite stores, whose
 * database lock is exclusive), restarts (SIGTERM) and `kill -9` of the sandbox, and `kill -9` of
 * redis-server (AOF, `appendfsync always`), and a failover of Redis to a replica that lagged (attack15 F1). Durable stores run with `--max-tenants` below the
 * run's tenants, so tenants are evicted and reloaded throughout. Every answer is checked against a
 * sequential model (test/support/sandbox-model.ts).
 *
 * Small and seeded in `npm test`; larger in the full run (`PETSTORE_FULL_TESTS=1`). Both start
 * with fixed sequences holding the kinds the quick seed does not draw ({@link fixedSequences}). A failure
 * prints the command that replays it (`PETSTORE_MODEL_SEED=… PETSTORE_MODEL_PATH=…
 * PETSTORE_MODEL_REPLAY_PATH=… npx vitest run test/server/model-based.test.ts -t <store>`).
 * `PETSTORE_MODEL_KNOWN_OPEN` (comma-separated, empty for none) overrides {@link KNOWN_OPEN}.
 */
import { rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import fc from 'fast-check'
import { describe, it } from 'vitest'
import type { Category } from '../../src/index.js'
import { tenantId } from '../../src/server.js'
import { PIPELINE_LIMIT } from '../../src/server/conversation.js'
import { FAILSYNC_FLAG_VARIABLE, failingFsyncShim } from '../support/failing-fsync.js'
import { converse, sendAndLeave, type Conversation, type HttpAnswer, type HttpRequest } from '../support/http-conversation.js'
import { startFlakyProxy } from '../support/flaky-proxy.js'
import { promoteBehindAddress, startRedis, type RedisServer } from '../support/redis-server.js'
import { runCli, type CliRun } from '../support/sandbox-cli.js'
import { Clock, TenantModel, type PlannedOperation } from '../support/sandbox-model.js'
import { dataDir, STORES, type StoreKind } from '../support/stores.js'
import { FULL_TESTS, size } from '../support/test-scale.js'

/** Every kind of command the suite generates. */
const KINDS = ['create', 'list', 'reset', 'switch', 'plan', 'burst', 'pipelined-order', 'half-close', 'slow-reader', 'past-limit', 'leave', 'stall', 'restart', 'kill-9', 'store-crash', 'failover', 'fsync-fail'] as const
type Kind = (typeof KINDS)[number]

/** Known open bugs the suite finds, each a command kind left out of the generated sequences or a leniency. */
const OPEN_BUGS = [...KINDS, 'ambiguous-503', 'tenant-capacity', 'lone-surrogate'] as const
type OpenBug = (typeof OPEN_BUGS)[number]

/**
 * Command kinds the suite may leave out while a bug they find is open (remove an entry with its
 * fix): none today. Issue 20's F07 (`pipelined-order`, `slow-reader`), F04 (`half-close`), F03
 * (`ambiguous-503`), F12 (`tenant-capacity`) and F08 (`lone-surrogate`) were found here before
 * their fixes. `PETSTORE_MODEL_KNOWN_OPEN=a,b` leaves kinds out for a run.
 */
const KNOWN_OPEN: readonly OpenBug[] = names('PETSTORE_MODEL_KNOWN_OPEN') ?? []

/** `PETSTORE_MODEL_ONLY=stall,list`: only these command kinds, to chase one kind of bug. */
const ONLY = names('PETSTORE_MODEL_ONLY')

/** The comma-separated names in the variable `variable`, or undefined when it is unset. */
function names(variable: string): readonly OpenBug[] | undefined {
  const text = process.env[variable]
  if (text === undefined) return undefined
  const list = text.split(',').map((name) => name.trim()).filter(Boolean)
  for (const name of list) if (!(OPEN_BUGS as readonly string[]).includes(name)) throw new Error(`${variable}: no command kind or open bug ${name}. Known: ${OPEN_BUGS.join(', ')}`)
  return list as OpenBug[]
}

/** `PETSTORE_MODEL_VERBOSE=1`: print every run's trace. */
const VERBOSE = Boolean(process.env['PETSTORE_MODEL_VERBOSE'])

const SEED = Number(process.env['PETSTORE_MODEL_SEED'] ?? 20_261_126)
const PATH = process.env['PETSTORE_MODEL_PATH'] || undefined
/** The commands' own replay path (fast-check prints it as `replayPath` in the counterexample): with SEED and PATH, replays the shrunk sequence exactly. */
const REPLAY_PATH = process.env['PETSTORE_MODEL_REPLAY_PATH'] || undefined
const RUNS = size('PETSTORE_MODEL_RUNS', 3, 12)
const MAX_COMMANDS = size('PETSTORE_MODEL_COMMANDS', 12, 30)
/** Stop starting new runs (and shrinking) after this long: seconds, not minutes. */
const TIME_LIMIT_MS = FULL_TESTS ? 60_000 : 15_000

const ADMIN_TOKEN = 'model-admin-token'
const START_SCENARIO = 'default'
const SCENARIOS = ['default', 'empty', 'after-sunset'] as const
const TENANTS = 3

// ---- the system under test ----------------------------------------------------------------

/** `petstore-sandbox serve` in a child process, restarted on the same data. */
class Sandbox {
  origin = ''
  #run: CliRun | undefined

  constructor(
    readonly store: StoreKind['name'],
    readonly args: readonly string[],
    readonly redis: RedisServer | undefined,
    /** SQLite, where gcc builds the shim: the file whose presence makes the server's fsyncs fail. */
    readonly failsyncFlag?: string | undefined,
  ) {}

  get running(): boolean {
    return this.#run !== undefined
  }

  /** The last lines the running process wrote to stderr (its warnings), for a failure's message. */
  said(lines = 20): string {
    return (this.#run?.stderr() ?? '').trimEnd().split('\n').slice(-lines).join('\n')
  }

  get durable(): boolean {
    return this.store !== 'memory'
  }

  async start(): Promise<void> {
    const shim: Record<string, string> = this.failsyncFlag === undefined ? {} : { LD_PRELOAD: failingFsyncShim()!, [FAILSYNC_FLAG_VARIABLE]: this.failsyncFlag }
    const run = runCli(['serve', '--port', '0', '--quiet', '--any-key', '--admin-token', ADMIN_TOKEN, '--scenario', START_SCENARIO, ...this.args], shim)
    await run.waitFor('Ctrl+C stops it')
    this.origin = /API\s+(http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(run.stdout())![1]!
    this.#run = run
  }

  /** Stops the process (SIGTERM: it finishes what is in flight; SIGKILL: a crash) and starts another on the same data. */
  async restart(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    await this.stop(signal)
    await this.start()
  }

  async stop(signal: 'SIGTERM' | 'SIGKILL'): Promise<void> {
    const run = this.#run
    if (!run) return
    this.#run = undefined
    run.child.kill('SIGCONT')
    run.child.kill(signal)
    await run.exited
  }

  /** Makes every fsync of the server fail (EIO), or work again. */
  failFsyncs(failing: boolean): void {
    if (this.failsyncFlag === undefined) return
    if (failing) writeFileSync(this.failsyncFlag, '')
    else rmSync(this.failsyncFlag, { force: true })
  }

  /** Freezes the store: redis-server when there is one, else the sandbox process itself. */
  freeze(frozen: boolean): void {
    const signal = frozen ? 'SIGSTOP' : 'SIGCONT'
    if (this.redis) this.redis.signal(signal)
    else this.#run?.child.kill(signal)
  }
}

async function openSandbox(kind: StoreKind): Promise<Sandbox> {
  let redis: RedisServer | undefined
  let args: string[] = []
  let failsyncFlag: string | undefined
  if (kind.name === 'sqlite') args = ['--data-dir', dataDir()]
  if (kind.name === 'sqlite' && failingFsyncShim() !== undefined) failsyncFlag = join(dataDir(), 'failsync')
  // Fewer tenants in memory than a run uses: tenants of a durable store are evicted and reloaded all the time.
  if (kind.name !== 'memory') args.push('--max-tenants', String(TENANTS - 1))
  if (kind.name === 'redis') {
    // Its own redis-server, which a stall may freeze and a crash kill without touching other
    // tests; every write on disk before Redis answers it, so a crash keeps what it acknowledged.
    redis = await startRedis({ aof: true })
    args.push('--redis-url', redis.url)
  }
  const sandbox = new Sandbox(kind.name, args, redis, failsyncFlag)
  await sandbox.start()
  return sandbox
}

// ---- one run's world: the sandbox, its tenants and their model ------------------------------

interface World {
  readonly sandbox: Sandbox
  /** This run's keys: fresh tenants for every run (and every shrink). */
  readonly keys: readonly string[]
  readonly tenants: readonly TenantModel[]
  readonly clock: Clock
  /** What happened so far, for the failure message. */
  readonly trace: string[]
  counter: number
  /** Failovers run so far: one a run (each takes seconds: a replica synced twice). */
  failovers: number
}

let runs = 0
/** Commands run, by kind, for the figures a run prints. */
const ran = new Map<Kind, number>()

function newWorld(sandbox: Sandbox): World {
  const run = ++runs
  const keys = Array.from({ length: TENANTS }, (_, i) => `model-${process.pid}-${run}-${'abc'[i]}`)
  return { sandbox, keys, tenants: keys.map(() => new TenantModel(START_SCENARIO)), clock: new Clock(), trace: [], counter: 0, failovers: 0 }
}

// ---- operations: one request and how to judge its answer -----------------------------------

type Body = { readonly valid: true; readonly suffix: string; readonly description: string | undefined } | { readonly valid: false; readonly text: string }

type Op =
  | { readonly kind: 'create'; readonly tenant: number; readonly body: Body }
  | { readonly kind: 'list'; readonly tenant: number }
  | { readonly kind: 'reset'; readonly tenant: number; readonly admin: boolean }
  | { readonly kind: 'switch'; readonly tenant: number; readonly scenario: string }
  | { readonly kind: 'plan'; readonly tenant: number; readonly operation: PlannedOperation; readonly status: 500 | 503; readonly times: number }

const showOp = (op: Op): string => {
  const who = 'abc'[op.tenant]
  switch (op.kind) {
    case 'create':
      return op.body.valid ? `create(${who}${op.body.suffix ? ` +${JSON.stringify(op.body.suffix)}` : ''}${op.body.description === undefined ? '' : ` desc ${JSON.stringify(op.body.description)}`})` : `create(${who} invalid ${op.body.text.slice(0, 30)})`
    case 'list':
      return `list(${who})`
    case 'reset':
      return `reset(${who}${op.admin ? ' by admin' : ''})`
    case 'switch':
      return `switch(${who} → ${op.scenario})`
    case 'plan':
      return `plan(${who}: ${op.operation} ${op.status} ×${op.times})`
  }
}

/** What the circumstances allow besides a plain answer. */
interface Allowance {
  /** No answer at all (the server was killed, the client left). */
  readonly drop?: boolean
  /** 503 with `Retry-After` (the store was frozen). */
  readonly refuse?: boolean
  /** In flight with others: which of them took a planned answer is not known. */
  readonly together?: boolean
}

interface Prepared {
  readonly request: HttpRequest
  readonly label: string
  /** Checks the answer (undefined: none came) against the model and updates it. */
  judge(answer: HttpAnswer | undefined, sentAt: number, answeredAt: number, allow: Allowance): void
}

/**
 * Judges the answers of requests that were in flight together (each on its own connection), in
 * the order the store may have applied them whatever their order in the command: creates
 * answered 201 by the id they got (a create sent later may have been applied first), then the
 * other writes, then lists (so that a list may show a create it overlapped).
 */
function judgeTogether(ops: readonly Op[], prepared: readonly Prepared[], answerOf: (i: number) => [HttpAnswer | undefined, number, number], allow: Allowance): void {
  const rank = (i: number): number => {
    if (ops[i]!.kind === 'list') return Number.MAX_SAFE_INTEGER
    const [answer] = answerOf(i)
    // @note A create whose outcome is unknown may have taken an id before a 201's: judged first, so
    // that the 201's id may count it (found when a failover's standby made creates unknown).
    if (ops[i]!.kind === 'create' && (answer === undefined || (answer.status === 503 && saysUnknown(errorOf(answer).message)))) return -1
    if (ops[i]!.kind !== 'create' || answer?.status !== 201) return Number.MAX_SAFE_INTEGER - 1
    return (JSON.parse(answer.body) as Category).id
  }
  const order = [...ops.keys()].sort((a, b) => rank(a) - rank(b))
  for (const i of order) prepared[i]!.judge(...answerOf(i), allow)
}

const INVALID_BODIES = ['{}', '{"name":""}', '{"name":5}', 'not json', '{"name":"x","description":7}', `{"name":"${'n'.repeat(201)}"}`, '[]', 'null']

/** A 503 whose message says the write may or may not have happened. */
const saysUnknown = (message: string) => /unknown|may have|might have|may or may not/i.test(message)

/** An answer as a trace shows it: its status, and an Error body's code (`503 storage_unavailable`). */
function shown(answer: HttpAnswer): string {
  if (answer.status < 400) return String(answer.status)
  const code = /"code":"([a-z_]+)"/.exec(answer.body)?.[1]
  return code === undefined ? String(answer.status) : `${answer.status} ${code}`
}

function errorOf(answer: HttpAnswer): { code: string; message: string } {
  const body = JSON.parse(answer.body) as { code?: unknown; message?: unknown; status?: unknown }
  if (typeof body.code !== 'string' || typeof body.message !== 'string' || body.status !== answer.status) {
    throw new Error(`${answer.status} without the Error body: ${answer.body.slice(0, 200)}`)
  }
  return { code: body.code, message: body.message }
}

function prepare(world: World, op: Op): Prepared {
  const prepared = prepareOp(world, op)
  const tenant = world.tenants[op.tenant]!
  return {
    ...prepared,
    judge(answer, sentAt, answeredAt, allow) {
      prepared.judge(answer, sentAt, answeredAt, allow)
      if (answer && answer.status < 500 && !(op.kind === 'reset' && op.admin)) tenant.answered = true
    },
  }
}

function prepareOp(world: World, op: Op): Prepared {
  const key = world.keys[op.tenant]!
  const tenant = world.tenants[op.tenant]!
  const requestId = `model-${++world.counter}`
  const headers = { authorization: `Bearer ${key}`, 'x-request-id': requestId }
  const label = `${showOp(op)} [${requestId}]`
  const unexpected = (answer: HttpAnswer | undefined, allow: Allowance): Error =>
    new Error(`${label}: ${answer ? `${answer.status} ${answer.body.slice(0, 300)}` : 'no answer'}${allow.refuse ? ' (store frozen)' : ''}${allow.drop ? ' (dropping allowed)' : ''}`)
  /** A 503 allowed while the store is frozen: whether its message says the outcome is unknown. */
  const refused = (answer: HttpAnswer, allow: Allowance): boolean | undefined => {
    if (answer.status !== 503) return undefined
    const error = errorOf(answer)
    // Every tenant of a durable store may leave memory: a new key is never refused for room.
    const openCapacity = error.code === 'tenant_capacity' && world.sandbox.store === 'redis' && KNOWN_OPEN.includes('tenant-capacity')
    // @note With a replica a failover left attached, any write may be unknown: the replica resyncs
    // after every crash of its master (a new replication history), and confirms nothing meanwhile.
    const replicaUnknown = error.code === 'write_outcome_unknown' && world.sandbox.store === 'redis' && standby !== undefined
    if (!(allow.refuse || openCapacity || replicaUnknown)) return undefined
    if (answer.headers['retry-after'] === undefined) throw new Error(`${label}: 503 ${error.code} without Retry-After`)
    return error.code === 'write_outcome_unknown' || saysUnknown(error.message) || (world.sandbox.store === 'redis' && KNOWN_OPEN.includes('ambiguous-503'))
  }
  switch (op.kind) {
    case 'create': {
      const { body } = op
      const name = body.valid ? `${'abc'[op.tenant]}${world.counter}${body.suffix}` : ''
      const input = body.valid ? (body.description === undefined ? { name } : { name, description: body.description }) : undefined
      const text = input ? JSON.stringify(input) : (body as { text: string }).text
      return {
        label,
        request: { method: 'POST', path: '/v1/categories', headers: { ...headers, 'content-type': 'application/json' }, body: text },
        judge(answer, sentAt, answeredAt, allow) {
          if (!answer) {
            if (!allow.drop) throw unexpected(answer, allow)
            tenant.mayHaveTaken('createCategory')
            if (input) tenant.maybeCreated(input, sentAt)
            return
          }
          // A planned 500 or 503 stores nothing.
          if (isPlanned(answer)) return tenant.tookPlan('createCategory')
          const unknown = refused(answer, allow)
          if (unknown !== undefined) {
            tenant.mayHaveTaken('createCategory')
            if (unknown && input) tenant.maybeCreated(input, sentAt)
            return
          }
          tenant.answeredUnplanned('createCategory', !allow.together)
          // A lone surrogate is refused (400 invalid_field) on every store, never stored (issue 20 F08).
          if (input && LONE_SURROGATE.test(input.name)) {
            if (answer.status === 400 && errorOf(answer).code === 'invalid_field') return
            throw unexpected(answer, allow)
          }
          if (input && answer.status === 201) return tenant.created(JSON.parse(answer.body) as Category, input, sentAt, answeredAt)
          if (!input && answer.status === 400) return void errorOf(answer)
          throw unexpected(answer, allow)
        },
      }
    }
    case 'list':
      return {
        label,
        request: { method: 'GET', path: '/v1/categories', headers },
        judge(answer, sentAt, answeredAt, allow) {
          if (answer && isPlanned(answer)) return tenant.tookPlan('listCategories')
          if ((!answer && allow.drop) || (answer && refused(answer, allow) !== undefined)) return tenant.mayHaveTaken('listCategories')
          if (answer?.status !== 200) throw unexpected(answer, allow)
          tenant.answeredUnplanned('listCategories', !allow.together)
          tenant.listed(JSON.parse(answer.body) as Category[], sentAt, answeredAt)
        },
      }
    case 'reset':
    case 'switch': {
      const request: HttpRequest =
        op.kind === 'switch'
          ? { method: 'PUT', path: '/__sandbox/scenario', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ name: op.scenario }) }
          : op.admin
            ? { method: 'POST', path: `/__sandbox/reset?tenant=${tenantId(key)}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'x-request-id': requestId } }
            : { method: 'POST', path: '/__sandbox/reset', headers }
      const scenario = op.kind === 'switch' ? op.scenario : undefined
      return {
        label,
        request,
        judge(answer, _sentAt, _answeredAt, allow) {
          // A key's first request admits its tenant: before it, the admin token may not find it.
          if (op.kind === 'reset' && op.admin && answer?.status === 404 && !tenant.mustBeKnown(world.sandbox.durable, START_SCENARIO) && errorOf(answer).code === 'unknown_tenant') return
          if (!answer) {
            if (!allow.drop) throw unexpected(answer, allow)
            if (op.kind === 'reset') tenant.plansCleared(false)
            return tenant.reseeded(scenario, false)
          }
          const unknown = refused(answer, allow)
          if (unknown !== undefined) {
            if (op.kind === 'reset') tenant.plansCleared(false)
            if (unknown) tenant.reseeded(scenario, false)
            return
          }
          if (answer.status !== 200) throw unexpected(answer, allow)
          const reply = JSON.parse(answer.body) as { scenario?: { name?: unknown } }
          const expected = scenario ?? tenant.scenarios
          if (!(typeof reply.scenario?.name === 'string' && [expected].flat().includes(reply.scenario.name))) {
            throw new Error(`${label}: 200 ${answer.body.slice(0, 200)}, expected the scenario ${JSON.stringify(expected)}`)
          }
          tenant.reseeded(scenario ?? reply.scenario.name)
          if (op.kind === 'reset') tenant.plansCleared(true)
        },
      }
    }
    case 'plan':
      return {
        label,
        request: { method: 'POST', path: '/__sandbox/answers', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ operation: op.operation, status: op.status, times: op.times }) },
        judge(answer, _sentAt, _answeredAt, allow) {
          if (answer?.status === 201) return tenant.planned(op.operation, op.times, true)
          if ((!answer && allow.drop) || (answer && refused(answer, allow) !== undefined)) return tenant.planned(op.operation, op.times, false)
          throw unexpected(answer, allow)
        },
      }
  }
}

/** An answer a plan made: the Error body of a planned 500 or 503. */
function isPlanned(answer: HttpAnswer): boolean {
  if (answer.status !== 500 && answer.status !== 503) return false
  return errorOf(answer).message.endsWith('(planned answer)')
}

/** Sends `op` on its own connection and judges the answer. */
async function perform(world: World, op: Op, allow: Allowance = {}, options: { halfClose?: boolean } = {}): Promise<void> {
  const prepared = prepare(world, op)
  const sentAt = world.clock.tick()
  const conversation = await converse(world.sandbox.origin, [prepared.request], { halfClose: options.halfClose ?? false })
  const answeredAt = world.clock.tick()
  const answer = conversation.answers[0]
  world.trace.push(`${prepared.label}${options.halfClose ? ' half-closed' : ''} → ${answer ? answer.status : `no answer${conversation.timedOut ? ' (timed out)' : ''}`}`)
  prepared.judge(answer, sentAt, answeredAt, allow)
}

/**
 * Judges the answers of one pipelined conversation in order: request i counts as sent once
 * answer i-1 came, since one connection is one ordered conversation.
 */
function judgeConversation(world: World, prepared: readonly Prepared[], conversation: Conversation, sentAt: number, allow: Allowance): void {
  let previous = sentAt
  world.trace.push(`  answers: ${conversation.answers.map(shown).join(' ') || 'none'}${conversation.closedEarly ? ' (closed early)' : ''}${conversation.timedOut ? ' (timed out)' : ''}`)
  for (const [i, item] of prepared.entries()) {
    const answer = conversation.answers[i]
    const answeredAt = world.clock.tick()
    try {
      item.judge(answer, previous, answeredAt, allow)
    } catch (error) {
      throw new Error(`pipelined request ${i + 1} of ${prepared.length}: ${(error as Error).message}`, { cause: error })
    }
    previous = answeredAt
  }
}

// ---- commands --------------------------------------------------------------------------------

abstract class Command implements fc.AsyncCommand<World, World> {
  abstract readonly kind: Kind
  check(_world: Readonly<World>): boolean {
    return true
  }
  run(world: World): Promise<void> {
    ran.set(this.kind, (ran.get(this.kind) ?? 0) + 1)
    return this.execute(world)
  }
  abstract execute(world: World): Promise<void>
  abstract toString(): string
}

class Single extends Command {
  readonly kind: Kind
  constructor(readonly op: Op) {
    super()
    this.kind = op.kind
  }
  async execute(world: World): Promise<void> {
    await perform(world, this.op)
  }
  toString(): string {
    return showOp(this.op)
  }
}

/** Several requests at once, each on its own connection. */
class Burst extends Command {
  readonly kind = 'burst'
  constructor(readonly ops: readonly Op[]) {
    super()
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    const prepared = this.ops.map((op) => prepare(world, op))
    const sentAt = world.clock.tick()
    const answers = await Promise.all(prepared.map((item) => converse(world.sandbox.origin, [item.request]).then((conversation) => ({ conversation, answeredAt: world.clock.tick() }))))
    world.trace.push(`  answers: ${answers.map(({ conversation }) => (conversation.answers[0] ? shown(conversation.answers[0]) : 'none')).join(' ')}`)
    judgeTogether(this.ops, prepared, (i) => [answers[i]!.conversation.answers[0], sentAt, answers[i]!.answeredAt], { together: true })
  }
  toString(): string {
    return `burst[${this.ops.map(showOp).join(', ')}]`
  }
}

/** Several requests, of any tenants, written at once on one connection. */
class Pipelined extends Command {
  readonly kind = 'pipelined-order'
  constructor(readonly ops: readonly Op[]) {
    super()
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    const prepared = this.ops.map((op) => prepare(world, op))
    const sentAt = world.clock.tick()
    const conversation = await converse(world.sandbox.origin, prepared.map((item) => item.request))
    judgeConversation(world, prepared, conversation, sentAt, {})
  }
  toString(): string {
    return `pipelined[${this.ops.map(showOp).join(', ')}]`
  }
}

/** One request, then the client ends its writing side (a half-close): the answer must still come. */
class HalfClose extends Command {
  readonly kind = 'half-close'
  constructor(readonly op: Op) {
    super()
  }
  async execute(world: World): Promise<void> {
    try {
      await perform(world, this.op, {}, { halfClose: true })
    } catch (error) {
      if (!/: no answer/.test((error as Error).message) || this.op.kind !== 'create') throw error
      // Say whether the silence hid a write: the model takes it as unknown, and a list tells.
      const name = `${'abc'[this.op.tenant]}${world.counter}`
      const conversation = await converse(world.sandbox.origin, [{ method: 'GET', path: '/v1/categories', headers: { authorization: `Bearer ${world.keys[this.op.tenant]!}` } }])
      const listed = JSON.parse(conversation.answers[0]?.body ?? '[]') as Category[]
      const stored = listed.find((category) => category.name.startsWith(name))
      throw new Error(`${(error as Error).message} to a complete POST on a half-closed connection; the category is ${stored ? `stored: ${JSON.stringify(stored)}` : 'not listed'}`, { cause: error })
    }
  }
  toString(): string {
    return `half-close[${showOp(this.op)}]`
  }
}

/**
 * The most lists on each side of the slow reader's create: all its requests stay within the
 * requests one connection may have waiting ({@link PIPELINE_LIMIT}); past it the server closes
 * the connection by design (connection-order tests it), which a client within it never meets.
 * @note 40 before the limit existed: 81 requests on a Redis store, whose answers take a round trip
 * each, had more than 64 waiting and the connection was closed (CI, stop 25).
 */
const SLOW_READER_MOST_LISTS = Math.floor((PIPELINE_LIMIT - 1) / 2)

/**
 * Lists pipelined around a create on one connection that stops reading for a while; meanwhile
 * another tenant is served. Then it reads on, and every answer must be in order.
 */
class SlowReader extends Command {
  readonly kind = 'slow-reader'
  constructor(
    readonly tenant: number,
    readonly lists: number,
    readonly pauseMs: number,
    readonly other: Op,
  ) {
    super()
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    const ops: Op[] = [
      ...Array.from({ length: this.lists }, (): Op => ({ kind: 'list', tenant: this.tenant })),
      { kind: 'create', tenant: this.tenant, body: { valid: true, suffix: ' slow', description: undefined } },
      ...Array.from({ length: this.lists }, (): Op => ({ kind: 'list', tenant: this.tenant })),
    ]
    const prepared = ops.map((op) => prepare(world, op))
    const sentAt = world.clock.tick()
    let sent!: () => void
    const written = new Promise<void>((resolve) => (sent = resolve))
    const slow = converse(world.sandbox.origin, prepared.map((item) => item.request), { pauseMs: this.pauseMs, onSent: sent })
    await written
    // While the slow reader does not read, the other tenant is served (its own ordering applies).
    await perform(world, this.other)
    judgeConversation(world, prepared, await slow, sentAt, {})
  }
  toString(): string {
    return `slow-reader(${'abc'[this.tenant]}: ${this.lists} lists, create, ${this.lists} lists; not reading for ${this.pauseMs} ms; meanwhile ${showOp(this.other)})`
  }
}

/**
 * A create, then more creates pipelined behind it than one connection may have waiting
 * ({@link PIPELINE_LIMIT}), all in one write: the server cuts the connection. The create under
 * way must still be answered, and truly (attack 3 G2); the creates waiting must not run, so the
 * model, told nothing of them, finds any of them stored at the next list.
 * @note The create is delayed (50 ms or more) so that every request behind it has arrived while
 * it is under way: answered at once, it leaves the line short and no cut happens.
 * @note One write is not one read: TCP may hand the server these 14 to 21 KB in two reads (seen
 * on a loaded machine: 83 and 105 requests, every one answered, no cut). The server stops reading
 * at PIPELINE_DEPTH (16) waiting and reads the rest once the line is short again, so neither
 * read need pass the limit. What the client sees either way: its requests answered in order up to
 * some point (the delayed create at least), and, when not all were, the connection closed and
 * none of the rest run. Each answered create is judged; connection-order.test.ts holds the cut
 * itself, with requests small enough for one read.
 */
class PastLimit extends Command {
  readonly kind = 'past-limit'
  constructor(
    readonly tenant: number,
    readonly extra: number,
    readonly delayMs: number,
  ) {
    super()
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    const create = (suffix: string): Op => ({ kind: 'create', tenant: this.tenant, body: { valid: true, suffix, description: undefined } })
    const first = prepare(world, create(' first'))
    const request = { ...first.request, headers: { ...first.request.headers, prefer: `delay=${this.delayMs}` } }
    const waiting = Array.from({ length: PIPELINE_LIMIT + this.extra }, () => prepare(world, create(' waiting')))
    const sentAt = world.clock.tick()
    const conversation = await converse(world.sandbox.origin, [request, ...waiting.map((item) => item.request)])
    const { answers } = conversation
    const all = answers.length === waiting.length + 1
    if (conversation.timedOut || (!all && !conversation.closedEarly)) {
      throw new Error(`${this}: ${answers.length} answers${conversation.timedOut ? ', then none for 15 s' : ', the connection left open'}; expected the first create's alone, then the connection closed`)
    }
    // The answered ones in order, as on any connection; the delayed create must be among them.
    judgeConversation(world, [first, ...waiting.slice(0, Math.max(answers.length, 1) - 1)], conversation, sentAt, {})
    if (answers.length > 1) world.trace.push(`  (the server read the write in pieces: ${answers.length - 1} of the ${waiting.length} waiting answered${all ? ', no cut' : ', then the cut'})`)
  }
  toString(): string {
    return `past-limit(${'abc'[this.tenant]}: create with a ${this.delayMs} ms delay, then ${PIPELINE_LIMIT + this.extra} creates in the same write)`
  }
}

/** A complete create, then the client leaves without its answer: the create may or may not be written. */
class Leave extends Command {
  readonly kind = 'leave'
  constructor(readonly tenant: number) {
    super()
  }
  async execute(world: World): Promise<void> {
    const prepared = prepare(world, { kind: 'create', tenant: this.tenant, body: { valid: true, suffix: ' left', description: undefined } })
    const sentAt = world.clock.tick()
    await sendAndLeave(world.sandbox.origin, prepared.request)
    world.trace.push(`${prepared.label}, client left`)
    prepared.judge(undefined, sentAt, world.clock.tick(), { drop: true })
    await untilJournaled(world, this.tenant, prepared.request.headers!['x-request-id']!)
  }
  toString(): string {
    return `leave(${'abc'[this.tenant]})`
  }
}

/**
 * Waits (up to 3 s) until the tenant's journal holds the request: the server has finished it, so
 * it cannot write later than the commands that follow (a reset would otherwise race it).
 */
async function untilJournaled(world: World, tenant: number, requestId: string): Promise<void> {
  const deadline = Date.now() + 3000
  while (Date.now() < deadline) {
    const conversation = await converse(world.sandbox.origin, [{ method: 'GET', path: '/__sandbox/requests', headers: { authorization: `Bearer ${world.keys[tenant]!}` } }])
    const answer = conversation.answers[0]
    if (answer?.status === 200 && (JSON.parse(answer.body) as { requestId?: string }[]).some((entry) => entry.requestId === requestId)) return
    await sleep(50)
  }
}

/**
 * Freezes the store (redis-server, or the sandbox process for memory and SQLite) for a while,
 * with requests sent one every `gapMs` from before the freeze (`leadMs`), so that some are in the
 * store's hands when it stops; then thaws it. Each answer is a normal one or a 503 with
 * `Retry-After`; a refused write must not be written, unless the answer says its outcome is unknown.
 */
class Stall extends Command {
  readonly kind = 'stall'
  constructor(
    readonly leadMs: number,
    readonly gapMs: number,
    readonly ms: number,
    readonly ops: readonly Op[],
  ) {
    super()
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    const prepared = this.ops.map((op) => prepare(world, op))
    const sends: Promise<{ conversation: Conversation; sentAt: number; answeredAt: number }>[] = []
    try {
      const sending = (async () => {
        for (const item of prepared) {
          const sentAt = world.clock.tick()
          sends.push(converse(world.sandbox.origin, [item.request]).then((conversation) => ({ conversation, sentAt, answeredAt: world.clock.tick() })))
          await sleep(this.gapMs)
        }
      })()
      await sleep(this.leadMs)
      world.sandbox.freeze(true)
      await sending
      await sleep(this.ms)
      world.sandbox.freeze(false)
      await Promise.all(sends)
    } finally {
      world.sandbox.freeze(false)
    }
    const answers = await Promise.all(sends)
    world.trace.push(`  answers: ${answers.map(({ conversation }) => (conversation.answers[0] ? shown(conversation.answers[0]) : 'none')).join(' ')}`)
    judgeTogether(this.ops, prepared, (i) => [answers[i]!.conversation.answers[0], answers[i]!.sentAt, answers[i]!.answeredAt], { refuse: true, together: true })
    await untilServing(world)
  }
  toString(): string {
    return `stall(${this.ms} ms, from ${this.leadMs} ms into sending one request every ${this.gapMs} ms: ${this.ops.map(showOp).join(', ')})`
  }
}

/** Waits (up to 15 s) until the store answers again after a stall: health 200. */
async function untilServing(world: World): Promise<void> {
  const deadline = Date.now() + 15_000
  while (Date.now() < deadline) {
    const conversation = await converse(world.sandbox.origin, [{ method: 'GET', path: '/__sandbox/health' }])
    if (conversation.answers[0]?.status === 200) return
    await sleep(100)
  }
  throw new Error('the sandbox did not answer health 200 within 15 s of the stall')
}

/** Restarts the server on the same data: SIGTERM, or `kill -9` with creates in flight. */
class Restart extends Command {
  readonly kind: Kind
  constructor(
    readonly signal: 'SIGTERM' | 'SIGKILL',
    readonly inFlight: readonly Op[],
    readonly afterMs: number,
  ) {
    super()
    this.kind = signal === 'SIGKILL' ? 'kill-9' : 'restart'
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    const prepared = this.inFlight.map((op) => prepare(world, op))
    const sentAt = world.clock.tick()
    const pending = Promise.all(prepared.map((item) => converse(world.sandbox.origin, [item.request]).then((conversation) => ({ conversation, answeredAt: world.clock.tick() }))))
    if (this.signal === 'SIGKILL') await sleep(this.afterMs)
    else await pending
    await world.sandbox.stop(this.signal)
    const answers = await pending
    world.trace.push(`  answers: ${answers.map(({ conversation }) => (conversation.answers[0] ? shown(conversation.answers[0]) : 'none')).join(' ')}`)
    judgeTogether(this.inFlight, prepared, (i) => [answers[i]!.conversation.answers[0], sentAt, answers[i]!.answeredAt], { drop: this.signal === 'SIGKILL', together: true })
    await world.sandbox.start()
    // Planned answers are kept in Redis, and in the process otherwise.
    for (const tenant of world.tenants) tenant.restarted(world.sandbox.durable, START_SCENARIO, world.sandbox.store === 'redis')
  }
  toString(): string {
    return this.signal === 'SIGKILL' ? `kill-9(after ${this.afterMs} ms, in flight: ${this.inFlight.map(showOp).join(', ')})` : 'restart(SIGTERM)'
  }
}

/**
 * Redis only: `kill -9` of redis-server (append-only file, `appendfsync always`) with creates in
 * flight, then the same server restarted on its file. The sandbox stays up: what it acknowledged
 * must still be listed; what it refused with 503 must not be, unless the answer said unknown.
 */
class StoreCrash extends Command {
  readonly kind = 'store-crash'
  constructor(
    readonly inFlight: readonly Op[],
    readonly afterMs: number,
  ) {
    super()
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    const redis = world.sandbox.redis!
    const prepared = this.inFlight.map((op) => prepare(world, op))
    const sentAt = world.clock.tick()
    const pending = Promise.all(prepared.map((item) => converse(world.sandbox.origin, [item.request]).then((conversation) => ({ conversation, answeredAt: world.clock.tick() }))))
    await sleep(this.afterMs)
    await redis.stop('SIGKILL')
    await redis.start()
    // A replica left by a failover syncs again with the restarted master: until it is online, writes are unknown.
    if (standby !== undefined) await untilReplicaOnline(redis)
    const answers = await pending
    world.trace.push(`  answers: ${answers.map(({ conversation }) => (conversation.answers[0] ? shown(conversation.answers[0]) : 'none')).join(' ')}`)
    judgeTogether(this.inFlight, prepared, (i) => [answers[i]!.conversation.answers[0], sentAt, answers[i]!.answeredAt], { refuse: true, together: true })
    await untilServing(world)
  }
  toString(): string {
    return `store-crash(kill -9 of redis-server after ${this.afterMs} ms, in flight: ${this.inFlight.map(showOp).join(', ')})`
  }
}

/** The replica a {@link Failover} left attached to the promoted master (writes wait for it), stopped by the next one. */
let standby: RedisServer | undefined

/** Waits until `master` lists a replica online (a replica syncing confirms nothing: writes meanwhile are answered unknown). */
async function untilReplicaOnline(master: RedisServer): Promise<void> {
  // A full sync starts at once (Redis 7 waits 5 s by default for more replicas to share it).
  await master.cli('CONFIG', 'SET', 'repl-diskless-sync-delay', '0')
  for (let attempt = 0; !/slave0:.*state=online/.test(await master.cli('INFO', 'replication')); attempt++) {
    if (attempt > 400) throw new Error('the replica did not come online')
    await sleep(50)
  }
}

/**
 * Redis only: a failover to a replica that lagged (attack15 F1). The sandbox's Redis gets a
 * replica (AOF), in sync and counted by the sandbox, whose replication path then stalls while
 * `inFlight` is sent; `lagMs` later the master is killed (-9) and the replica promoted in its place: its data
 * served on the master's address, as a managed Redis's endpoint moves to the promoted replica.
 * Every write answered as applied must be there (before the fix, creates answered 201 were not,
 * and their ids were handed out again).
 */
class Failover extends Command {
  readonly kind = 'failover'
  constructor(
    readonly inFlight: readonly Op[],
    readonly lagMs: number,
  ) {
    super()
  }
  override check(world: Readonly<World>): boolean {
    return world.failovers === 0
  }
  async execute(world: World): Promise<void> {
    world.failovers++
    world.trace.push(`${this}`)
    const master = world.sandbox.redis!
    // One replica at a time: another, in sync, would confirm what the stalled one never gets.
    await standby?.stop('SIGKILL')
    standby = undefined
    const replica = await startRedis({ aof: true })
    // Through a proxy whose path can stall: a replica stopped still reads what its kernel took in.
    const path = await startFlakyProxy(master.port)
    await replica.cli('REPLICAOF', '127.0.0.1', String(path.port))
    await untilReplicaOnline(master)
    // The sandbox counts a master's replicas again once its count is a second old, before the write that finds it so.
    await sleep(1100)
    path.stall()
    const prepared = this.inFlight.map((op) => prepare(world, op))
    const sentAt = world.clock.tick()
    const pending = Promise.all(prepared.map((item) => converse(world.sandbox.origin, [item.request]).then((conversation) => ({ conversation, answeredAt: world.clock.tick() }))))
    await sleep(this.lagMs)
    await promoteBehindAddress(master, replica)
    // A replica again, as a managed Redis adds one: the one listed before stays expected for minutes (its writes unknown meanwhile).
    await replica.start()
    await replica.cli('REPLICAOF', '127.0.0.1', String(master.port))
    await untilReplicaOnline(master)
    standby = replica
    const answers = await pending
    world.trace.push(`  answers: ${answers.map(({ conversation }) => (conversation.answers[0] ? shown(conversation.answers[0]) : 'none')).join(' ')}`)
    judgeTogether(this.inFlight, prepared, (i) => [answers[i]!.conversation.answers[0], sentAt, answers[i]!.answeredAt], { refuse: true, together: true })
    await untilServing(world)
  }
  toString(): string {
    return `failover(the replica's path stalled, its master killed -9 after ${this.lagMs} ms and the replica promoted, in flight: ${this.inFlight.map(showOp).join(', ')})`
  }
}

/**
 * SQLite only (where gcc builds the LD_PRELOAD shim): every fsync of the server fails (EIO, as on a
 * disk whose writeback fails) from before the first of `ops` until `failMs` later, while they are
 * sent one after another (attack6 S1, S2). A write answered 503 `storage_unavailable` must not be
 * written, live or after a restart; one answered `write_outcome_unknown` may be, as lists then show.
 */
class FsyncFail extends Command {
  readonly kind = 'fsync-fail'
  constructor(
    readonly failMs: number,
    readonly ops: readonly Op[],
  ) {
    super()
  }
  async execute(world: World): Promise<void> {
    world.trace.push(`${this}`)
    world.sandbox.failFsyncs(true)
    const timer = setTimeout(() => world.sandbox.failFsyncs(false), this.failMs)
    try {
      for (const op of this.ops) await perform(world, op, { refuse: true })
    } finally {
      clearTimeout(timer)
      world.sandbox.failFsyncs(false)
    }
    await untilServing(world)
  }
  toString(): string {
    return `fsync-fail(${this.failMs} ms, while: ${this.ops.map(showOp).join(', ')})`
  }
}

// ---- generators ------------------------------------------------------------------------------

const tenantArb = fc.integer({ min: 0, max: TENANTS - 1 })
/** Names at the length limit (200), and (unless left open) names holding a lone surrogate. */
const SUFFIXES = ['', '', ' é', ' 🐈', ' "q"', ' \\ b', ' <i>', ` ${'x'.repeat(180)}`, ...(KNOWN_OPEN.includes('lone-surrogate') ? [] : [' a\ud800b', ' \udfff'])]
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/
const validBody: fc.Arbitrary<Body> = fc.record({
  valid: fc.constant(true as const),
  suffix: fc.constantFrom(...SUFFIXES),
  description: fc.constantFrom(undefined, undefined, 'd', 'ü and "quotes"'),
})
const invalidBody: fc.Arbitrary<Body> = fc.constantFrom(...INVALID_BODIES).map((text) => ({ valid: false as const, text }))
const createArb = fc.record({ kind: fc.constant('create' as const), tenant: tenantArb, body: fc.oneof({ arbitrary: validBody, weight: 4 }, { arbitrary: invalidBody, weight: 1 }) })
const validCreateArb = fc.record({ kind: fc.constant('create' as const), tenant: tenantArb, body: validBody })
const listArb = fc.record({ kind: fc.constant('list' as const), tenant: tenantArb })
const resetArb = fc.record({ kind: fc.constant('reset' as const), tenant: tenantArb, admin: fc.boolean() })
const switchArb = fc.record({ kind: fc.constant('switch' as const), tenant: tenantArb, scenario: fc.constantFrom(...SCENARIOS) })
const planArb = fc.record({
  kind: fc.constant('plan' as const),
  tenant: tenantArb,
  operation: fc.constantFrom<PlannedOperation>('listCategories', 'createCategory'),
  status: fc.constantFrom<500 | 503>(500, 503),
  times: fc.integer({ min: 1, max: 3 }),
})
const opArb: fc.Arbitrary<Op> = fc.oneof({ arbitrary: createArb, weight: 4 }, { arbitrary: listArb, weight: 3 }, { arbitrary: resetArb, weight: 1 }, { arbitrary: switchArb, weight: 1 })
/** Requests for one connection: most of them of one tenant (whose writes and reads must keep their order), some of others. */
const pipelineArb: fc.Arbitrary<Op[]> = fc
  .tuple(tenantArb, fc.array(fc.tuple(opArb, fc.integer({ min: 0, max: 3 })), { minLength: 2, maxLength: 6 }))
  .map(([main, items]) => items.map(([op, dice]) => (dice < 3 ? { ...op, tenant: main } : op)))
/** What may run concurrently: creates and lists (a reset racing a create has no single expected outcome). */
const concurrentOpArb: fc.Arbitrary<Op> = fc.oneof(createArb, listArb)

function commandArbs(store: StoreKind['name']): fc.Arbitrary<Command>[] {
  const arbs: [Kind, fc.Arbitrary<Command>, number][] = [
    ['create', createArb.map((op) => new Single(op)), 4],
    ['list', listArb.map((op) => new Single(op)), 3],
    ['reset', resetArb.map((op) => new Single(op)), 1],
    ['switch', switchArb.map((op) => new Single(op)), 1],
    ['plan', planArb.map((op) => new Single(op)), 1],
    ['burst', fc.array(concurrentOpArb, { minLength: 2, maxLength: 6 }).map((ops) => new Burst(ops)), 2],
    ['pipelined-order', pipelineArb.map((ops) => new Pipelined(ops)), 3],
    ['half-close', fc.oneof(validCreateArb, listArb).map((op) => new HalfClose(op)), 1],
    ['slow-reader', fc.tuple(tenantArb, fc.integer({ min: 5, max: SLOW_READER_MOST_LISTS }), fc.integer({ min: 50, max: 400 }), fc.oneof(validCreateArb, listArb)).map(([tenant, lists, pauseMs, other]) => new SlowReader(tenant, lists, pauseMs, other.tenant === tenant ? { ...other, tenant: (tenant + 1) % TENANTS } : other)), 1],
    ['past-limit', fc.tuple(tenantArb, fc.integer({ min: 1, max: 40 }), fc.integer({ min: 50, max: 200 })).map(([tenant, extra, delayMs]) => new PastLimit(tenant, extra, delayMs)), 1],
    ['leave', tenantArb.map((tenant) => new Leave(tenant)), 1],
    ['stall', fc.tuple(fc.integer({ min: 0, max: 25 }), fc.integer({ min: 0, max: 3 }), fc.integer({ min: 100, max: store === 'redis' ? 3500 : 600 }), fc.array(concurrentOpArb, { minLength: 1, maxLength: 10 })).map(([leadMs, gapMs, ms, ops]) => new Stall(leadMs, gapMs, ms, ops)), 1],
    ['restart', fc.constant(new Restart('SIGTERM', [], 0)), 1],
    ['kill-9', fc.tuple(fc.array(validCreateArb, { minLength: 1, maxLength: 5 }), fc.integer({ min: 0, max: 30 })).map(([ops, ms]) => new Restart('SIGKILL', ops, ms)), 1],
  ]
  if (store === 'sqlite' && failingFsyncShim() !== undefined) {
    arbs.push(['fsync-fail', fc.tuple(fc.integer({ min: 0, max: 300 }), fc.array(opArb, { minLength: 1, maxLength: 6 })).map(([ms, ops]) => new FsyncFail(ms, ops)), 1])
  }
  if (store === 'redis') arbs.push(['store-crash', fc.tuple(fc.array(validCreateArb, { minLength: 1, maxLength: 8 }), fc.integer({ min: 0, max: 20 })).map(([ops, ms]) => new StoreCrash(ops, ms)), 1])
  if (store === 'redis') arbs.push(['failover', fc.tuple(fc.oneof(fc.array(validCreateArb, { minLength: 1, maxLength: 8 }), fc.oneof(resetArb, switchArb).map((op) => [op])), fc.integer({ min: 0, max: 600 })).map(([ops, ms]) => new Failover(ops, ms)), 1])
  return arbs.filter(([kind]) => generated(kind)).flatMap(([, arb, weight]) => Array.from({ length: weight }, () => arb))
}

/** Whether a command kind is run: not left out as known open, and among `PETSTORE_MODEL_ONLY` when set. */
const generated = (kind: Kind): boolean => !KNOWN_OPEN.includes(kind) && (ONLY === undefined || ONLY.includes(kind))

/**
 * Fixed sequences every run of the suite starts with, before the seeded ones: the command kinds
 * the quick run's seed does not draw (the full run's does), so that `npm test` covers them too.
 * Today `past-limit`: a create of tenant a, a create with 8 more than the limit pipelined behind
 * it, then a's list (and every tenant's, as after any run), which must hold the two creates answered
 * and none of those cut. Kinds left out (KNOWN_OPEN, ONLY) are left out of these too.
 */
function fixedSequences(): Command[][] {
  const sequence: Command[] = [new Single({ kind: 'create', tenant: 0, body: { valid: true, suffix: '', description: undefined } }), new PastLimit(0, 8, 100), new Single({ kind: 'list', tenant: 0 })]
  return generated('past-limit') ? [sequence.filter((command) => generated(command.kind))] : []
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

// ---- the suite -------------------------------------------------------------------------------

describe.each(STORES)('model-based: random conversations checked against a sequential model ($name store, issue 20)', (kind) => {
  it('acknowledged writes stay visible in order, nothing unacknowledged appears, ids count up, resets reseed, tenants stay apart', { timeout: TIME_LIMIT_MS + 90_000 }, async () => {
    const sandbox = await openSandbox(kind)
    const property = fc.asyncProperty(fc.commands(commandArbs(kind.name), { maxCommands: MAX_COMMANDS, size: 'max', replayPath: REPLAY_PATH }), async (commands) => {
      let world: World | undefined
      try {
        await fc.asyncModelRun(async () => {
          // A failed run may have left the server stopped or frozen: every run starts on a serving one.
          sandbox.freeze(false)
          if (!sandbox.running) await sandbox.start()
          world = newWorld(sandbox)
          return { model: world, real: world }
        }, commands)
        // Every tenant's list, once more at the end.
        for (let tenant = 0; tenant < TENANTS; tenant++) await perform(world!, { kind: 'list', tenant })
        if (VERBOSE) console.log(world!.trace.join('\n'))
      } catch (error) {
        const trace = world ? `\nWhat happened:\n  ${world.trace.join('\n  ')}\nWhat the model allows:\n  ${world.tenants.map((tenant, i) => `${'abc'[i]}: ${tenant.describe()}`).join('\n  ')}` : ''
        throw new Error(`${(error as Error).message}${trace}`, { cause: error })
      }
    })
    const fixed = fixedSequences()
    // The fixed sequences come first and count as runs: as many more runs leave the seeded ones as they were.
    const details = await fc.check(property, { seed: SEED, path: PATH, numRuns: RUNS + fixed.length, examples: fixed.map((commands) => [commands]), interruptAfterTimeLimit: TIME_LIMIT_MS, markInterruptAsFailure: false })
    console.log(`model-based (${kind.name} store): ${details.numRuns} runs, seed ${details.seed}; commands: ${[...ran].map(([name, count]) => `${name} ${count}`).join(', ')}${KNOWN_OPEN.length > 0 ? `; left out as known open: ${KNOWN_OPEN.join(', ')}` : ''}`)
    ran.clear()
    if (details.failed) {
      const replayPath = /replayPath="([^"]*)"/.exec(String(details.counterexample?.[0]))?.[1]
      const settings = [
        ...(FULL_TESTS ? ['PETSTORE_FULL_TESTS=1'] : []),
        `PETSTORE_MODEL_COMMANDS=${MAX_COMMANDS}`,
        ...(process.env['PETSTORE_MODEL_KNOWN_OPEN'] === undefined ? [] : [`PETSTORE_MODEL_KNOWN_OPEN=${KNOWN_OPEN.join(',')}`]),
        ...(ONLY === undefined ? [] : [`PETSTORE_MODEL_ONLY=${ONLY.join(',')}`]),
        `PETSTORE_MODEL_SEED=${details.seed}`,
        `PETSTORE_MODEL_PATH=${details.counterexamplePath ?? ''}`,
        ...(replayPath ? [`PETSTORE_MODEL_REPLAY_PATH=${replayPath}`] : []),
      ]
      const replay = `${settings.join(' ')} npx vitest run test/server/model-based.test.ts -t ${kind.name}`
      const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance)
      throw new Error(`Model-based run failed (${kind.name} store). Replay: ${replay}\n\n${error}\n\n${fc.defaultReportMessage(details)}\n\nThe sandbox's last warnings:\n${sandbox.said()}`)
    }
  })
})
