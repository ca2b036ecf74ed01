/**
 * `npx tsx bench/floods.ts [scale]`: the floods of issue 10 at the sizes that crashed the server,
 * each against a fresh `petstore-sandbox serve --any-key` (default limits) in a process of its
 * own, printing what was answered and the server's peak RSS. `scale` (default 1) multiplies the
 * sizes. A script, not a test: the test (`test/server/floods.test.ts`) runs the same floods small.
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { delayFlood, journalFlood, scenarioFlood, type FloodReport, type FloodTarget } from './flood-load.js'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const scale = Number(process.argv[2] ?? 1)
if (!(scale > 0)) throw new Error(`scale must be a positive number, got ${process.argv[2]}`)

/** Peak resident memory of a process (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kib = Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN)
  return Math.round(kib / 1024)
}

async function withServer(args: readonly string[], run: (target: FloodTarget) => Promise<FloodReport>): Promise<void> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'serve', '--any-key', '--port', '0', '--quiet', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  let out = ''
  const origin = await new Promise<string>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}\n${out}`)))
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk
      const match = /API\s+(http:\/\/[^/\s]+)\/v1/.exec(out)
      if (match) resolve(match[1]!.replace('localhost', '127.0.0.1'))
    })
  })
  let exited = false
  child.once('exit', () => (exited = true))
  try {
    const report = await run({ origin })
    const alive = !exited
    process.stdout.write(
      `${report.name.padEnd(9)} ${String(report.sent).padStart(6)} requests in ${report.seconds} s: ${JSON.stringify(report.statuses)}; ` +
        `health ${report.healthChecks - report.healthFailures}/${report.healthChecks}; partner intact: ${report.partnerIntact}; ` +
        `server alive: ${alive}; peak RSS ${alive ? peakRssMb(child.pid!) : '?'} MB\n`,
    )
  } finally {
    const gone = new Promise((resolve) => (exited ? resolve(undefined) : child.once('exit', resolve)))
    child.kill('SIGKILL')
    await gone
  }
}

process.stdout.write(`bench/floods.ts, scale ${scale}, Node ${process.version}, ${new Date().toISOString().slice(0, 10)}\n`)
await withServer([], (target) => journalFlood(target, Math.round(3059 * scale), Math.round(48 * scale)))
await withServer([], (target) => scenarioFlood(target, Math.round(485 * scale)))
await withServer([], (target) => delayFlood(target, Math.round(5000 * scale), 25_000))
