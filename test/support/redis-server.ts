/**
 * Real `redis-server` processes on free loopback ports, each in its own temporary directory:
 * standalone (optionally with AOF, `appendfsync always`) and a 3-master cluster. Each is torn
 * down by the test that started it (or, for the one shared by a test file, when that file's
 * worker exits).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process'
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer, connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { onTestFinished } from 'vitest'
import { FULL_TESTS } from './test-scale.js'

const run = promisify(execFile)

/** Whether redis-server is installed (CI installs it). */
export const HAVE_REDIS = existsSync('/usr/bin/redis-server') && existsSync('/usr/bin/redis-cli')
/** Whether the Redis tests run: in the full run (`PETSTORE_FULL_TESTS=1`, CI), where they fail without redis-server. */
export const REQUIRE_REDIS = FULL_TESTS

/** A port nothing listens on now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

export interface RedisServerOptions {
  /** Append-only file with `appendfsync always`: every write is on disk before Redis answers it. */
  readonly aof?: boolean
  /** Start as a cluster node (`--cluster-enabled yes`). */
  readonly cluster?: boolean
  /** `--requirepass`: clients must send this password. */
  readonly password?: string
  /** TLS only (`--tls-port`, a self-signed certificate for 127.0.0.1 made with openssl): `rediss://`. */
  readonly tls?: boolean
  /** Environment variables of redis-server's process beyond this one's (an LD_PRELOAD shim). */
  readonly env?: Readonly<Record<string, string>>
  /** A cluster node's `--cluster-node-timeout` (ms): how long a node may not answer before the others mark it failed. @default 2000 */
  readonly clusterNodeTimeoutMs?: number
}

export class RedisServer {
  readonly port: number
  readonly dir: string
  readonly #options: RedisServerOptions
  #child: ChildProcess | undefined

  constructor(port: number, dir: string, options: RedisServerOptions) {
    this.port = port
    this.dir = dir
    this.#options = options
  }

  get url(): string {
    return `${this.#options.tls ? 'rediss' : 'redis'}://127.0.0.1:${this.port}`
  }

  /** The certificate a TLS server presents (its own CA), for NODE_EXTRA_CA_CERTS. */
  get certificate(): string {
    return join(this.dir, 'cert.pem')
  }

  /**
   * Starts (or restarts) the server and waits until it answers PING, or with `listening` only
   * until it accepts connections (it may answer `-LOADING` for seconds yet, reloading its AOF). `extraArgs` go to redis-server
   * for this start only (`--key-load-delay 1000`: a reload slowed to 1 ms a command).
   */
  async start(options: { readonly extraArgs?: readonly string[]; readonly until?: 'ready' | 'listening' } = {}): Promise<void> {
    if (this.#options.tls && !existsSync(this.certificate)) {
      await run('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(this.dir, 'key.pem'), '-out', this.certificate, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'])
    }
    const tls = this.#options.tls
      ? ['--port', '0', '--tls-port', String(this.port), '--tls-cert-file', this.certificate, '--tls-key-file', join(this.dir, 'key.pem'), '--tls-ca-cert-file', this.certificate, '--tls-auth-clients', 'no']
      : ['--port', String(this.port)]
    const args = [...tls, '--bind', '127.0.0.1', '--dir', this.dir, '--save', '', '--daemonize', 'no', '--logfile', join(this.dir, 'redis.log')]
    if (this.#options.aof) args.push('--appendonly', 'yes', '--appendfsync', 'always')
    else args.push('--appendonly', 'no')
    if (this.#options.password !== undefined) args.push('--requirepass', this.#options.password)
    if (this.#options.cluster) args.push('--cluster-enabled', 'yes', '--cluster-config-file', join(this.dir, 'nodes.conf'), '--cluster-node-timeout', String(this.#options.clusterNodeTimeoutMs ?? 2000))
    args.push(...(options.extraArgs ?? []))
    const child = spawn('redis-server', args, { stdio: 'ignore', env: { ...process.env, ...this.#options.env } })
    this.#child = child
    const deadline = Date.now() + 10_000
    const until = options.until ?? 'ready'
    while (!(this.#options.tls ? await this.cli('PING').then((out) => out.includes('PONG'), () => false) : await answersPing(this.port, this.#options.password, until))) {
      if (child.exitCode !== null) throw new Error(`redis-server on port ${this.port} exited with ${child.exitCode}`)
      if (Date.now() > deadline) throw new Error(`redis-server on port ${this.port} did not answer within 10 s`)
      await sleep(50)
    }
  }

  /**
   * Stops the server: SIGKILL (a crash) or SIGTERM (a clean shutdown). A SIGKILL also kills the
   * child Redis forks for a background AOF rewrite: it outlives its parent and goes on writing a
   * `temp-rewriteaof-*.aof` into the directory for seconds (SIGTERM lets Redis stop it itself).
   */
  async stop(signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    const child = this.#child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    const forks = signal === 'SIGKILL' ? killWithForks(child) : (child.kill(signal), [])
    await exited
    await untilGone(forks)
  }

  /** Freezes (SIGSTOP) or thaws (SIGCONT) the server: a Redis that hangs rather than refuses. */
  signal(signal: 'SIGSTOP' | 'SIGCONT'): void {
    this.#child?.kill(signal)
  }

  /** Kills the process (and any fork of it) now, for exit handlers. */
  killNow(): void {
    if (this.#child) killWithForks(this.#child)
  }

  /** `redis-cli -p PORT …`, its output. */
  async cli(...args: string[]): Promise<string> {
    const auth = [
      ...(this.#options.password === undefined ? [] : ['--no-auth-warning', '-a', this.#options.password]),
      ...(this.#options.tls ? ['--tls', '--cacert', this.certificate] : []),
    ]
    const { stdout } = await run('redis-cli', ['-p', String(this.port), ...auth, ...args])
    return stdout
  }
}

/**
 * A failover behind a fixed address, as a managed Redis does it: `master` killed -9, `replica`
 * made a master and stopped, its AOF moved into the master's directory, the master started on it
 * (both started with `aof`). `replica` is left stopped.
 */
export async function promoteBehindAddress(master: RedisServer, replica: RedisServer): Promise<void> {
  await master.stop('SIGKILL')
  await replica.cli('REPLICAOF', 'NO', 'ONE')
  await replica.stop('SIGTERM')
  rmSync(join(master.dir, 'appendonlydir'), { recursive: true, force: true })
  cpSync(join(replica.dir, 'appendonlydir'), join(master.dir, 'appendonlydir'), { recursive: true })
  await master.start()
}

/**
 * What an operator's slip does: lets `redis` evict keys with a time to live (tenants' keys; the epoch's have none) for a
 * moment, past a `maxmemory` just under what it holds, and sets `noeviction` back. Resolves to how many keys it evicted.
 */
export async function evictForAMoment(redis: { cli(...args: string[]): Promise<string> }): Promise<number> {
  const used = Number(/used_memory:(\d+)/.exec(await redis.cli('INFO', 'memory'))?.[1])
  await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'volatile-random')
  await redis.cli('CONFIG', 'SET', 'maxmemory', String(used - 20_000))
  await redis.cli('SET', 'filler', 'f'.repeat(1000))
  await redis.cli('CONFIG', 'SET', 'maxmemory', '0')
  await redis.cli('CONFIG', 'SET', 'maxmemory-policy', 'noeviction')
  return Number(/evicted_keys:(\d+)/.exec(await redis.cli('INFO', 'stats'))?.[1])
}

/** Starts a standalone redis-server for one test and stops it (and removes its directory) when the test ends. */
export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  const server = await newServer(options)
  onTestFinished(() => teardown(server))
  return server
}

async function newServer(options: RedisServerOptions): Promise<RedisServer> {
  // @note A port free when asked may be taken before redis-server binds it (by any process's
  // outgoing connection), and a cluster node binds port + 10,000 too, never asked: a start that
  // exits is tried again on another port (CI: "redis-server on port 35333 exited with 1").
  for (let attempt = 0; ; attempt++) {
    const dir = mkdtempSync(join(tmpdir(), 'petstore-redis-'))
    const server = new RedisServer(await freePort(), dir, options)
    try {
      await server.start()
      return server
    } catch (error) {
      removeDir(dir)
      if (attempt >= 4 || !/exited with/.test((error as Error).message)) throw error
    }
  }
}

async function teardown(server: RedisServer): Promise<void> {
  await server.stop()
  removeDir(server.dir)
}

/** Removes a server's directory once it has stopped (retrying a file that a dying fork just closed). */
export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 100 })
}

/**
 * SIGKILLs a redis-server and the children it forked (a background AOF rewrite or save), which a
 * SIGKILL of the parent alone leaves running. The parent is stopped first so that it cannot fork
 * between the reading of its children and its death. Returns the children's pids.
 */
function killWithForks(child: ChildProcess): number[] {
  const pid = child.pid
  if (pid === undefined || child.exitCode !== null || child.signalCode !== null) return []
  child.kill('SIGSTOP')
  let forks: number[] = []
  try {
    forks = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  } catch {
    // Gone already, or no /proc: nothing forked that we can see.
  }
  for (const fork of forks) {
    try {
      process.kill(fork, 'SIGKILL')
    } catch {
      // It had just exited.
    }
  }
  child.kill('SIGKILL')
  return forks
}

/** Resolves once none of `pids` runs any more (a zombie nobody reaps counts as gone: its files are closed). */
async function untilGone(pids: readonly number[]): Promise<void> {
  const deadline = Date.now() + 5_000
  for (const pid of pids) {
    while (running(pid)) {
      if (Date.now() > deadline) throw new Error(`redis-server's fork ${pid} still runs 5 s after SIGKILL`)
      await sleep(10)
    }
  }
}

function running(pid: number): boolean {
  try {
    // /proc/PID/stat: "pid (comm) state …"; comm may hold spaces and parentheses.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z'
  } catch {
    return false
  }
}

let shared: Promise<RedisServer> | undefined

/**
 * One redis-server for a whole test file (its worker process): tests keep apart by key prefix.
 * Killed when the worker exits.
 */
export function sharedRedis(): Promise<RedisServer> {
  shared ??= newServer({}).then((server) => {
    process.once('exit', () => {
      server.killNow()
      removeDir(server.dir)
    })
    return server
  })
  return shared
}

export interface RedisCluster {
  readonly nodes: readonly RedisServer[]
  /** `redis-cluster://127.0.0.1:a,127.0.0.1:b,127.0.0.1:c` */
  readonly url: string
  /** The port of the master serving `key`'s slot. */
  masterOf(key: string): Promise<number>
  /** Moves `key`'s slot, with its keys, to the master on port `to`, as `redis-cli --cluster reshard` does (IMPORTING, MIGRATING, MIGRATE, SETSLOT NODE). */
  moveSlot(key: string, to: number): Promise<void>
}

/**
 * A 3-master cluster (`--cluster-enabled yes` on three ports, `redis-cli --cluster create`), for
 * one test, node `i`'s process with `envOf(i)` added. Resolves once every node reports `cluster_state:ok`.
 * `nodeTimeoutMs`: each node's `--cluster-node-timeout` (Redis's own default is 15 s; 2 s here unless set).
 */
export async function startRedisCluster(options: { readonly envOf?: (node: number) => Readonly<Record<string, string>>; readonly nodeTimeoutMs?: number } = {}): Promise<RedisCluster> {
  const nodes: RedisServer[] = []
  onTestFinished(async () => {
    for (const node of nodes) await teardown(node)
  })
  for (let i = 0; i < 3; i++) nodes.push(await newServer({ cluster: true, env: options.envOf?.(i), ...(options.nodeTimeoutMs === undefined ? {} : { clusterNodeTimeoutMs: options.nodeTimeoutMs }) }))
  await run('redis-cli', ['--cluster', 'create', ...nodes.map((node) => `127.0.0.1:${node.port}`), '--cluster-replicas', '0', '--cluster-yes'])
  const deadline = Date.now() + 20_000
  for (const node of nodes) {
    while (!(await node.cli('CLUSTER', 'INFO')).includes('cluster_state:ok')) {
      if (Date.now() > deadline) throw new Error('the cluster did not reach cluster_state:ok within 20 s')
      await sleep(100)
    }
  }
  const first = nodes[0]!
  const cluster: RedisCluster = {
    nodes,
    url: `redis-cluster://${nodes.map((node) => `127.0.0.1:${node.port}`).join(',')}`,
    async masterOf(key) {
      const slot = Number((await first.cli('CLUSTER', 'KEYSLOT', key)).trim())
      // CLUSTER NODES lines: id host:port@bus flags master - ping pong epoch state slot-ranges…
      for (const line of (await first.cli('CLUSTER', 'NODES')).trim().split('\n')) {
        const fields = line.split(' ')
        const port = Number(fields[1]!.split('@')[0]!.split(':')[1])
        for (const range of fields.slice(8)) {
          const [low, high = low] = range.split('-').map(Number)
          if (low !== undefined && high !== undefined && slot >= low && slot <= high) return port
        }
      }
      throw new Error(`no master serves slot ${slot}`)
    },
    async moveSlot(key, to) {
      const slot = (await first.cli('CLUSTER', 'KEYSLOT', key)).trim()
      const from = await cluster.masterOf(key)
      const source = nodes.find((node) => node.port === from)!
      const target = nodes.find((node) => node.port === to)!
      const [sourceId, targetId] = await Promise.all([source, target].map(async (node) => (await node.cli('CLUSTER', 'MYID')).trim()))
      await target.cli('CLUSTER', 'SETSLOT', slot, 'IMPORTING', sourceId!)
      await source.cli('CLUSTER', 'SETSLOT', slot, 'MIGRATING', targetId!)
      for (;;) {
        const keys = (await source.cli('CLUSTER', 'GETKEYSINSLOT', slot, '100')).trim().split('\n').filter((line) => line !== '')
        if (keys.length === 0) break
        await source.cli('MIGRATE', '127.0.0.1', String(to), '', '0', '5000', 'KEYS', ...keys)
      }
      for (const node of nodes) await node.cli('CLUSTER', 'SETSLOT', slot, 'NODE', targetId!)
    },
  }
  return cluster
}

/** Whether the server answers a PING with PONG (`ready`), or accepts a connection at all (`listening`). */
function answersPing(port: number, password: string | undefined, until: 'ready' | 'listening' = 'ready'): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1')
    let reply = ''
    socket.setTimeout(1000)
    socket.on('connect', () => {
      if (until === 'ready') socket.write(password === undefined ? 'PING\r\n' : `AUTH ${password}\r\nPING\r\n`)
      else {
        socket.destroy()
        resolve(true)
      }
    })
    socket.on('data', (chunk) => {
      reply += chunk.toString()
      if (reply.includes('\r\n')) {
        socket.destroy()
        resolve(reply.startsWith('+PONG') || reply.startsWith('+OK'))
      }
    })
    socket.on('error', () => resolve(false))
    socket.on('timeout', () => {
      socket.destroy()
      resolve(false)
    })
  })
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))
