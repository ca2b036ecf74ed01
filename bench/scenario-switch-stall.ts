/**
 * Does one partner's scenario switching stall another? `npx tsx bench/scenario-switch-stall.ts [switches]`
 *
 * One in-memory sandbox on 127.0.0.1. A "switcher" tenant flips between `large-catalog`
 * (10,000 categories to seed) and `default`, `switches` times (default 20); meanwhile a
 * "reader" tenant lists its 5 categories in a loop. Prints the reader's latency (p50, p99,
 * max, in ms) while switches run, and the same with no switching, as one JSON object.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createSandboxApp } from '../src/server/create-sandbox-app.js'

const switches = Number(process.argv[2] ?? 20)

const sandbox = await createSandboxApp({ apiKeys: ['reader', 'switcher'], demoDir: false })
const server = createServer({ keepAlive: true }, sandbox.listener)
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b)
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! * 10) / 10
}
const summary = (latencies: number[]) => ({ requests: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: percentile(latencies, 100) })

/** The reader's latencies until `done` settles. */
async function read(done: Promise<unknown>): Promise<number[]> {
  let finished = false
  void done.then(() => (finished = true))
  const latencies: number[] = []
  while (!finished) {
    const started = performance.now()
    const response = await fetch(`${origin}/v1/categories`, { headers: { authorization: 'Bearer reader' } })
    await response.arrayBuffer()
    if (response.status !== 200) throw new Error(`reader got ${response.status}`)
    latencies.push(performance.now() - started)
  }
  return latencies
}

async function switching(): Promise<void> {
  for (let i = 0; i < switches; i++) {
    const name = i % 2 === 0 ? 'large-catalog' : 'default'
    const response = await fetch(`${origin}/__sandbox/scenario`, {
      method: 'PUT',
      headers: { authorization: 'Bearer switcher', 'content-type': 'application/json' },
      body: JSON.stringify({ name }),
    })
    await response.arrayBuffer()
    if (response.status !== 200) throw new Error(`switch to ${name} answered ${response.status}`)
  }
}

const idleStarted = performance.now()
const idle = await read(new Promise((resolve) => setTimeout(resolve, 2000)))
const switchStarted = performance.now()
const during = await read(switching())
const switchSeconds = (performance.now() - switchStarted) / 1000

process.stdout.write(
  `${JSON.stringify({ switches, switchSeconds: Math.round(switchSeconds * 10) / 10, idleSeconds: Math.round((switchStarted - idleStarted) / 100) / 10, readerIdle: summary(idle), readerDuringSwitches: summary(during) })}\n`,
)
server.closeAllConnections()
server.close()
