/**
 * The peers: the sandbox as a user runs it (the CLI, request log on) against WireMock, json-server,
 * Prism and Mockoon CLI, each installed by `bash bench/peers/setup.sh` and serving the same 3
 * categories behind the same bearer keys (bench/peers/systems.ts). Every system is up at once,
 * warmed with load (long enough for the JVM's compilers), then loaded in turn, in rounds:
 * `GET` and `POST /v1/categories`, 10 connections. Figures are medians of per-round ratios
 * (sandbox / peer), so the machine's noise hits both sides of each ratio alike.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { spawnSync } from 'node:child_process'
import { launch, type RunningServer } from './lib/exec-server.js'
import { machineLoad, median, type Figure } from './lib/figures.js'
import { load, METHODS, type Method, type Sample } from './lib/load.js'
import { READ_KEY } from './servers/keys.js'
import { peers, ROOT, sandbox, THREE, type System } from './peers/systems.js'

const COMMAND = 'bash bench/peers/setup.sh && npm run bench -- peers'

export interface PeersOptions {
  /** Rounds; each loads every system once per method. @default 6 */
  readonly rounds?: number
  /** Seconds of load per measurement. @default 3 */
  readonly seconds?: number
  /** Seconds of load per system and method before the rounds. @default 10 (20 per system) */
  readonly warmupSeconds?: number
  readonly connections?: number
}

/** Checks that a system answers the bench's list, so that no system is fast by answering something else. */
async function checkAnswer(server: RunningServer): Promise<void> {
  const response = await fetch(`${server.origin}/v1/categories`, { headers: { authorization: `Bearer ${READ_KEY}` } })
  const body = (await response.json()) as Array<{ id: number; name: string }>
  const names = Array.isArray(body) ? body.map((category) => `${category.id} ${category.name}`).join(', ') : JSON.stringify(body)
  const expected = THREE.map((category) => `${category.id} ${category.name}`).join(', ')
  if (names !== expected) throw new Error(`${server.name} answers ${names}, not ${expected}`)
}

export async function measurePeers(options: PeersOptions = {}): Promise<Figure[]> {
  const rounds = options.rounds ?? 6
  const seconds = options.seconds ?? 3
  const warmup = options.warmupSeconds ?? 10
  const connections = options.connections ?? 10
  spawnSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale'], { stdio: 'inherit' })
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-peers-'))
  const running: RunningServer[] = []
  const samples = new Map<string, Sample[]>()
  const key = (name: string, method: Method) => `${name} ${method}`
  const listed = peers(dir)
  const skipped = listed.filter((peer): peer is { name: string; skipped: string } => 'skipped' in peer)
  for (const peer of skipped) process.stderr.write(`peers: ${peer.name} skipped (${peer.skipped}; bash bench/peers/setup.sh installs the peers)\n`)
  const systems: System[] = [sandbox(dir), ...listed.filter((peer): peer is System => !('skipped' in peer))]
  try {
    for (const system of systems) {
      const server = await launch(system)
      running.push(server)
      await checkAnswer(server)
    }
    const fromSeed = (server: RunningServer) => systems[running.indexOf(server)]!.resets
    for (const server of running) {
      for (const method of METHODS) {
        await load(server.origin, method, warmup, connections, { fromSeed: fromSeed(server) })
      }
      process.stderr.write(`peers: ${server.name} warmed (${2 * warmup} s)\n`)
    }
    for (let round = 1; round <= rounds; round++) {
      for (const method of METHODS) {
        for (const server of running) {
          const sample = await load(server.origin, method, seconds, connections, { fromSeed: fromSeed(server) })
          samples.set(key(server.name, method), [...(samples.get(key(server.name, method)) ?? []), sample])
        }
      }
      process.stderr.write(`peers: round ${round} of ${rounds}: ${running.map((server) => `${server.name} GET ${Math.round(samples.get(key(server.name, 'GET'))!.at(-1)!.requestsPerSecond)}/s`).join(', ')}\n`)
    }
  } finally {
    await Promise.all(running.map((server) => server.stop()))
    rmSync(dir, { recursive: true, force: true })
  }

  const figures: Figure[] = []
  const busy = machineLoad()
  const ours = systems[0]!.name
  const rps = (name: string, method: Method) => median(samples.get(key(name, method))!.map((sample) => sample.requestsPerSecond))
  const p99 = (name: string, method: Method) => median(samples.get(key(name, method))!.map((sample) => sample.p99))
  const lastRounds = (name: string, method: Method) =>
    samples
      .get(key(name, method))!
      .map((sample, round) => samples.get(key(ours, method))![round]!.requestsPerSecond / sample.requestsPerSecond)
      .slice(-2)
      .map((ratio) => `${ratio.toFixed(2)}x`)
      .join(', ')
  for (const method of METHODS) {
    figures.push({
      section: 'peers',
      name: `${method} /v1/categories, petstore-sandbox (CLI) next to its peers`,
      value: rps(ours, method),
      unit: 'req/s',
      detail: `median of ${rounds} rounds of ${seconds} s, ${connections} connections, request log on (to /dev/null, as every peer's); p99 ${p99(ours, method)} ms; ${busy}`,
      command: COMMAND,
    })
    for (const peer of systems.slice(1)) {
      const ratios = samples.get(key(ours, method))!.map((sample, round) => sample.requestsPerSecond / samples.get(key(peer.name, method))![round]!.requestsPerSecond)
      const isWireMock = peer.name.startsWith('WireMock')
      figures.push({
        section: 'peers',
        name: `${method} /v1/categories, sandbox vs ${peer.name}${isWireMock ? ' (warmed)' : ''}`,
        value: median(ratios),
        unit: 'x',
        ...(isWireMock ? { target: { kind: 'min' as const, value: 1.5 } } : {}),
        detail: `median of ${rounds} per-round ratios (last two ${lastRounds(peer.name, method)}), all up at once, ${2 * warmup} s of load each before; ${peer.name} ${Math.round(rps(peer.name, method))} req/s, p99 ${p99(peer.name, method)} ms${method === 'POST' ? `; its POST ${peer.post === 'stores' ? 'stores the category' : 'answers a fixed 201 body (stores nothing)'}` : ''}`,
        command: COMMAND,
      })
    }
  }
  for (const peer of skipped) {
    process.stderr.write(`peers: no figure for ${peer.name}: ${peer.skipped}\n`)
  }
  return figures
}
