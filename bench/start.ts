/**
 * Start: milliseconds from exec to the first 200 on `GET /v1/categories` with a key (polled
 * every 5 ms, a new connection each time), for the CLI (`node dist/cli.js serve`), `npm start`,
 * and every installed peer (bench/peers/setup.sh), started one after the other in rounds, each
 * stopped before the next starts; medians of the runs. `npm --version` is timed in the same
 * rounds: what npm itself costs before it runs anything.
 */
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { launch } from './lib/exec-server.js'
import { machineLoad, median, type Figure } from './lib/figures.js'
import { npmScript, npmStart, peers, ROOT, sandbox, type System } from './peers/systems.js'

const COMMAND = 'npm run bench -- start'

export interface StartOptions {
  /** Starts of each system. @default 7 */
  readonly runs?: number
}

export async function measureStart(options: StartOptions = {}): Promise<Figure[]> {
  const runs = options.runs ?? 7
  // The CLI is timed as built: build first if src/ changed, so no run pays for a build.
  spawnSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), '--if-stale'], { stdio: 'inherit' })
  const dir = mkdtempSync(join(tmpdir(), 'petstore-bench-start-'))
  try {
    const listed = peers(dir)
    const skipped = listed.filter((peer): peer is { name: string; skipped: string } => 'skipped' in peer)
    for (const peer of skipped) process.stderr.write(`start: ${peer.name} skipped (${peer.skipped}; bash bench/peers/setup.sh installs the peers)\n`)
    const systems: System[] = [sandbox(dir), npmScript(dir), npmStart(dir), ...listed.filter((peer): peer is System => !('skipped' in peer))]
    const times = new Map<string, number[]>(systems.map((system) => [system.name, []]))
    const cpu = new Map<string, number[]>(systems.map((system) => [system.name, []]))
    const npmOwn: number[] = []
    for (let run = 1; run <= runs; run++) {
      const started = performance.now()
      spawnSync('npm', ['--version'], { stdio: 'ignore' })
      npmOwn.push(performance.now() - started)
      for (const system of systems) {
        const server = await launch(system)
        times.get(system.name)!.push(server.startMs)
        if (server.cpuMs !== undefined) cpu.get(system.name)!.push(server.cpuMs)
        await server.stop()
      }
      process.stderr.write(`start: run ${run} of ${runs}: ${systems.map((system) => `${system.name} ${Math.round(times.get(system.name)!.at(-1)!)} ms`).join(', ')}\n`)
    }
    const ms = (name: string) => median(times.get(name)!)
    const spread = (name: string) => `${Math.round(Math.min(...times.get(name)!))}-${Math.round(Math.max(...times.get(name)!))} ms`
    const cli = ms('petstore-sandbox')
    const figures: Figure[] = [
      {
        section: 'start',
        name: 'Start: exec to first answer, CLI (node dist/cli.js serve)',
        value: cli,
        unit: 'ms',
        detail: `median of ${runs} starts (${spread('petstore-sandbox')}), polled every 5 ms, ${machineLoad()}; the peers started in the same rounds: ${systems.slice(3).map((system) => `${system.name} ${Math.round(ms(system.name))} ms (${spread(system.name)})`).join(', ') || 'none installed'}`,
        command: COMMAND,
      },
    ]
    const jsonServer = systems.find((system) => system.name.startsWith('json-server'))
    if (jsonServer) {
      const ratios = times.get('petstore-sandbox')!.map((value, run) => value / times.get(jsonServer.name)![run]!)
      figures.push({
        section: 'start',
        name: 'Start: CLI vs json-server 0.17 (time ratio)',
        value: median(ratios),
        unit: 'x',
        target: { kind: 'max', value: 1 },
        detail: `median of ${runs} per-round ratios of exec-to-first-answer times; json-server ${Math.round(ms(jsonServer.name))} ms, the CLI ${Math.round(cli)} ms`,
        command: COMMAND,
      })
      const cpuOf = (name: string) => cpu.get(name)!
      if (cpuOf('petstore-sandbox').length === runs && cpuOf(jsonServer.name).length === runs) {
        figures.push({
          section: 'start',
          name: 'Start: CLI vs json-server 0.17, CPU time to first answer (ratio)',
          value: median(cpuOf('petstore-sandbox').map((value, run) => value / cpuOf(jsonServer.name)[run]!)),
          unit: 'x',
          detail: `median of ${runs} per-round ratios of the CPU time (user and system) each process had used when it first answered, steadier than wall time on a busy machine: the CLI ${Math.round(median(cpuOf('petstore-sandbox')))} ms, json-server ${Math.round(median(cpuOf(jsonServer.name)))} ms`,
          command: COMMAND,
        })
      }
    }
    const npm = ms('npm start')
    const npmSelf = median(npmOwn)
    const beyondCli = (name: string) => median(times.get(name)!.map((value, run) => value - times.get('petstore-sandbox')![run]!))
    figures.push({
      section: 'start',
      name: "Start: npm start's script (scripts/start.mjs) beyond the CLI",
      value: beyondCli('scripts/start.mjs'),
      unit: 'ms',
      target: { kind: 'max', value: 50 },
      detail: `median of ${runs} per-round differences: what npm start runs (the dist/ freshness check, then the CLI in the same process) ${Math.round(ms('scripts/start.mjs'))} ms, the CLI ${Math.round(cli)} ms`,
      command: COMMAND,
    })
    figures.push({
      section: 'start',
      name: 'Start: npm start beyond the CLI',
      value: beyondCli('npm start'),
      unit: 'ms',
      detail: `median of ${runs} per-round differences: npm start ${Math.round(npm)} ms (${spread('npm start')}), the CLI ${Math.round(cli)} ms; npm's own start (npm --version) ${Math.round(npmSelf)} ms, and its run-script (a shell, the lifecycle) the rest`,
      command: COMMAND,
    })
    return figures
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
