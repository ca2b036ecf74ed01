/**
 * The 60-second soak: `npx tsx bench/soak.ts [seconds] [--data-dir DIR]`. Prints one JSON report
 * (requests, 5xx, lost writes, RSS start/end, creates per second); exits 1 on any 5xx or lost write.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { soak } from './soak-load.js'

const args = process.argv.slice(2)
const seconds = Number(args.find((arg) => /^\d+$/.test(arg)) ?? 60)
const durable = args.includes('--data-dir')
const given = durable ? args[args.indexOf('--data-dir') + 1] : undefined
const dataDir = durable ? (given && !given.startsWith('--') ? given : mkdtempSync(join(tmpdir(), 'petstore-soak-'))) : undefined

const report = await soak({ seconds, ...(dataDir ? { dataDir } : {}) })
process.stdout.write(`${JSON.stringify({ durable: dataDir !== undefined, ...report }, null, 2)}\n`)
if (dataDir && !given) rmSync(dataDir, { recursive: true, force: true })
process.exit(report.status5xx === 0 && report.lostWrites === 0 && report.unexpectedWrites === 0 ? 0 : 1)
