/**
 * Several cores of one machine: `serve --workers N --redis-url` (node:cluster workers on one port,
 * every tenant in Redis), with 1 and 2 workers, and the in-memory single process for reference,
 * all up at once and loaded in turn in rounds (`GET` and `POST /v1/categories`, 10 connections,
 * request log on to /dev/null). Figures: how throughput grows from 1 process to 2 (median of
 * per-round ratios), and what 2 workers on Redis give against one in-memory process.
 *
 * @note On a 2-core machine the load generator (this process), Redis and the workers share two
 * cores: a second worker can only use what the others leave. Needs Debian's redis-server.
 */
import { spawn, spawnSync } from 'node:child_process'
import { existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, launch, type RunningServer } from './lib/exec-server.js'
import { machineLoad, median, type Figure } from './lib/figures.js'
import { load, METHODS, type Method, type Sample } from './lib/load.js'
import { READ_KEY, WRITE_KEY } from './servers/keys.js'
import { ROOT } from './peers/systems.js'

const COMMAND = 'npm run bench -- workers'

export interface WorkersOptions {
  /** @default 5 */
  readonly rounds?: number
  /** Seconds of load per measurement. @default 3 */
  readonly seconds?: number
  readonly connections?: number
}

export async function measureWorkers(options: WorkersOptions = {}): Promise<Figure[]> {
  if (!existsSync('/usr/bin/redis-server')) throw new Error('the workers section needs redis-server (apt-get install redis-server)')
  const rounds = options.rounds ?? 5
  const seconds = options.seconds ?? 3
  const connections = options.connections ?? 10
  spawnSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale'], { stdio: 'inherit' })
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-workers-'))
  const redisPort = await freePort()
  const redis = spawn('redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' })
  const serve = (name: string, extra: readonly string[]) => ({
    name,
    command: [process.execPath, join(ROOT, 'dist/cli.js'), 'serve', '--port', '{port}', '--api-key', `${READ_KEY},${WRITE_KEY}`, '--max-categories', '500000', '--name-max-length', '20', '--description-max-length', '20', ...extra],
  })
  const redisUrl = `redis://127.0.0.1:${redisPort}`
  const contenders = [
    serve('in memory, 1 process', []),
    // @note Both Redis contenders share the bench's tenants: the GET rounds read a tenant the POST rounds never write.
    serve('Redis, 1 worker', ['--redis-url', redisUrl, '--workers', '1']),
    serve('Redis, 2 workers', ['--redis-url', redisUrl, '--workers', '2']),
  ]
  const running: RunningServer[] = []
  const samples = new Map<string, Sample[]>()
  const key = (name: string, method: Method) => `${name} ${method}`
  try {
    for (const contender of contenders) running.push(await launch(contender))
    // @note Every POST measurement starts on the seed: five rounds at ~30,000 creates a second
    // outgrew the 500,000 categories allowed, and the in-memory process refused the rest (409).
    const measure = (server: RunningServer, method: Method, duration: number) => load(server.origin, method, duration, connections, { fromSeed: true })
    for (const server of running) for (const method of METHODS) await measure(server, method, 2)
    for (let round = 1; round <= rounds; round++) {
      for (const method of METHODS) {
        for (const server of running) {
          const sample = await measure(server, method, seconds)
          samples.set(key(server.name, method), [...(samples.get(key(server.name, method)) ?? []), sample])
        }
      }
      process.stderr.write(`workers: round ${round} of ${rounds} done\n`)
    }
  } finally {
    await Promise.all(running.map((server) => server.stop()))
    redis.kill('SIGTERM')
    await new Promise((resolve) => redis.once('exit', resolve))
    rmSync(dir, { recursive: true, force: true })
  }
  const rps = (name: string, method: Method) => samples.get(key(name, method))!.map((sample) => sample.requestsPerSecond)
  const ratio = (a: string, b: string, method: Method) => median(rps(a, method).map((value, round) => value / rps(b, method)[round]!))
  const figures: Figure[] = []
  const busy = machineLoad()
  for (const method of METHODS) {
    const shown = contenders.map((contender) => `${contender.name} ${Math.round(median(rps(contender.name, method)))} req/s`).join(', ')
    figures.push({
      section: 'workers',
      name: `${method} /v1/categories, --workers 2 vs --workers 1 (Redis)`,
      value: ratio('Redis, 2 workers', 'Redis, 1 worker', method),
      unit: 'x',
      detail: `median of ${rounds} per-round ratios, ${seconds} s each, ${connections} connections; ${shown}; 2 cores shared by the load generator, Redis and the workers; ${busy}`,
      command: COMMAND,
    })
    figures.push({
      section: 'workers',
      name: `${method} /v1/categories, --workers 2 (Redis) vs in memory, 1 process`,
      value: ratio('Redis, 2 workers', 'in memory, 1 process', method),
      unit: 'x',
      detail: `median of ${rounds} per-round ratios: what using both cores through Redis gives against the single in-memory process`,
      command: COMMAND,
    })
  }
  return figures
}
