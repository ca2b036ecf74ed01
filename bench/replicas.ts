/**
 * Replicas: requests per second and p99 latency of `GET` and `POST /v1/categories` for the
 * in-memory single process, one replica on Redis and two replicas on Redis, each behind the same
 * nginx round-robin (so every contender pays the same proxy hop), measured side by side in one
 * run; and how throughput grows from one replica to two. Needs redis-server and nginx (Debian's).
 *
 * @note On a 2-core machine the load generator, nginx, Redis and the replicas share two cores:
 * the growth figure shows the overhead of sharing, not what more machines would give. docs/replicas.md's
 * "Running several replicas" section says what to expect where each process has its own cores.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { median, type Figure } from './lib/figures.js'
import { load, METHODS, type Method, type Sample } from './lib/load.js'
import { READ_KEY, WRITE_KEY } from './servers/keys.js'

export interface ReplicaBenchOptions {
  /** Seconds of load per measurement. @default 3 */
  readonly seconds?: number
  /** Rounds; each measures every contender once per method. @default 3 */
  readonly rounds?: number
  /** @default 20 */
  readonly connections?: number
}

const COMMAND = 'npm run bench -- replicas'
const ROOT = fileURLToPath(new URL('../', import.meta.url))


function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/** A child process that is stopped at the end. */
class Service {
  readonly child: ChildProcess
  constructor(command: string, args: readonly string[], env: Record<string, string> = {}) {
    this.child = spawn(command, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, ...env } })
  }

  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return
    const exited = new Promise((resolve) => this.child.once('exit', resolve))
    this.child.kill('SIGTERM')
    await exited
  }
}

async function waitForHttp(origin: string): Promise<void> {
  const deadline = Date.now() + 20_000
  for (;;) {
    try {
      if ((await fetch(`${origin}/__sandbox/health`)).status === 200) return
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${origin} did not answer within 20 s`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}

async function startSandbox(extra: readonly string[], env: Record<string, string> = {}): Promise<{ service: Service; port: number }> {
  const port = await freePort()
  const service = new Service(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve', '--port', String(port), '--api-key', `${READ_KEY},${WRITE_KEY}`, '--quiet', ...extra], env)
  await waitForHttp(`http://127.0.0.1:${port}`)
  return { service, port }
}

async function startRedis(dir: string): Promise<{ service: Service; url: string }> {
  const port = await freePort()
  const service = new Service('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'])
  const url = `redis://127.0.0.1:${port}`
  return { service, url }
}

async function startNginx(dir: string, upstreams: readonly number[]): Promise<{ service: Service; origin: string }> {
  const port = await freePort()
  const user = process.getuid?.() === 0 ? 'user root;' : ''
  writeFileSync(
    join(dir, `nginx-${port}.conf`),
    `${user}
worker_processes 1;
daemon off;
pid ${dir}/nginx-${port}.pid;
error_log ${dir}/nginx-${port}.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/body; proxy_temp_path ${dir}/proxy; fastcgi_temp_path ${dir}/fastcgi; uwsgi_temp_path ${dir}/uwsgi; scgi_temp_path ${dir}/scgi;
  upstream sandbox {
${upstreams.map((upstream) => `    server 127.0.0.1:${upstream};`).join('\n')}
    keepalive 64;
  }
  server {
    listen 127.0.0.1:${port};
    location / { proxy_pass http://sandbox; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
`,
  )
  const service = new Service('/usr/sbin/nginx', ['-c', join(dir, `nginx-${port}.conf`), '-p', dir, '-e', join(dir, `nginx-${port}.log`)])
  const origin = `http://127.0.0.1:${port}`
  await waitForHttp(origin)
  return { service, origin }
}

export async function measureReplicas(options: ReplicaBenchOptions = {}): Promise<Figure[]> {
  const seconds = options.seconds ?? 3
  const rounds = options.rounds ?? 3
  const connections = options.connections ?? 20
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-replicas-'))
  const services: Service[] = []
  try {
    const redis = await startRedis(dir)
    services.push(redis.service)
    const memory = await startSandbox(['--scenario', 'default'])
    services.push(memory.service)
    const replicas = [await startSandbox(['--scenario', 'default'], { PETSTORE_SANDBOX_REDIS_URL: redis.url }), await startSandbox(['--scenario', 'default'], { PETSTORE_SANDBOX_REDIS_URL: redis.url })]
    services.push(...replicas.map((replica) => replica.service))
    const contenders = [
      { name: 'in memory, 1 process', nginx: await startNginx(dir, [memory.port]) },
      { name: 'Redis, 1 replica', nginx: await startNginx(dir, [replicas[0]!.port]) },
      { name: 'Redis, 2 replicas', nginx: await startNginx(dir, replicas.map((replica) => replica.port)) },
    ]
    services.push(...contenders.map((contender) => contender.nginx.service))
    for (const contender of contenders) for (const method of METHODS) await load(contender.nginx.origin, method, 1, connections)
    const samples = new Map<string, Sample[]>()
    for (let round = 1; round <= rounds; round++) {
      for (const method of METHODS) {
        for (const contender of contenders) {
          const key = `${contender.name} ${method}`
          samples.set(key, [...(samples.get(key) ?? []), await load(contender.nginx.origin, method, seconds, connections)])
        }
      }
      process.stderr.write(`replicas: round ${round} of ${rounds} done\n`)
    }
    const figures: Figure[] = []
    const rate = (name: string, method: Method) => median(samples.get(`${name} ${method}`)!.map((sample) => sample.requestsPerSecond))
    for (const method of METHODS) {
      for (const contender of contenders) {
        const list = samples.get(`${contender.name} ${method}`)!
        figures.push({
          section: 'replicas',
          name: `${method} /v1/categories, ${contender.name}: req/s`,
          value: median(list.map((sample) => sample.requestsPerSecond)),
          unit: 'req/s',
          detail: `median of ${rounds} rounds of ${seconds} s, ${connections} connections through nginx round-robin; rounds ${list.map((sample) => Math.round(sample.requestsPerSecond)).join(', ')}`,
          command: COMMAND,
        })
        figures.push({
          section: 'replicas',
          name: `${method} /v1/categories, ${contender.name}: p99`,
          value: median(list.map((sample) => sample.p99)),
          unit: 'ms',
          detail: `median of the rounds' 99th percentile latency, same runs`,
          command: COMMAND,
        })
      }
      figures.push({
        section: 'replicas',
        name: `${method} throughput, 2 Redis replicas vs 1`,
        value: rate('Redis, 2 replicas', method) / rate('Redis, 1 replica', method),
        unit: 'x',
        detail: `same run; every process shares this machine's cores, so this shows sharing, not more machines (see docs/replicas.md, Running several replicas)`,
        command: COMMAND,
      })
      figures.push({
        section: 'replicas',
        name: `${method} throughput, 1 Redis replica vs in memory`,
        value: rate('Redis, 1 replica', method) / rate('in memory, 1 process', method),
        unit: 'x',
        detail: 'same run: the cost of a Redis round trip per read and write, and of the journal written to Redis',
        command: COMMAND,
      })
    }
    return figures
  } finally {
    for (const service of services.reverse()) await service.stop()
    rmSync(dir, { recursive: true, force: true })
  }
}
