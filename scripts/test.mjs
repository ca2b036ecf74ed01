// `npm test`: the type-check and the lint side by side (each mostly one core), then vitest with
// any arguments given (`npm test -- test/cli`). Exits with the first failing step's code; the
// type-check's and the lint's output each come whole, one after the other.
import { spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'

const require = createRequire(import.meta.url)

/** The file of package `name`'s command (its package.json `bin`). */
function bin(name) {
  const manifest = require.resolve(`${name}/package.json`)
  const { bin: command } = JSON.parse(readFileSync(manifest, 'utf8'))
  return join(dirname(manifest), typeof command === 'string' ? command : command[name === 'typescript' ? 'tsc' : name])
}

/** Runs `node <bin> ...args`, its output collected; resolves with its exit code and output. */
function run(bin, args) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    const output = []
    child.stdout.on('data', (chunk) => output.push(chunk))
    child.stderr.on('data', (chunk) => output.push(chunk))
    child.on('close', (code, signal) => resolve({ code: code ?? (signal ? 1 : 0), output: Buffer.concat(output) }))
  })
}

// The type-check keeps what it learnt between runs (a second run checks only what changed: ~1 s
// instead of ~7), under node_modules like the lint's cache, one file per checkout (worktrees may
// share node_modules).
const checkout = createHash('sha256').update(process.cwd()).digest('hex').slice(0, 12)
const buildInfo = join('node_modules', '.cache', 'tsc', `${checkout}.tsbuildinfo`)

const checks = await Promise.all([
  run(bin('typescript'), ['-p', 'tsconfig.json', '--incremental', '--tsBuildInfoFile', buildInfo]),
  // The cache lives under node_modules (a fresh clone has none; a second run lints only what changed).
  run(bin('eslint'), ['--cache', '--cache-location', 'node_modules/.cache/eslint/', '.']),
])
for (const check of checks) process.stdout.write(check.output)
const failed = checks.find((check) => check.code !== 0)
if (failed) process.exit(failed.code)

const vitest = spawn(process.execPath, [bin('vitest'), 'run', ...process.argv.slice(2)], { stdio: 'inherit' })
vitest.on('close', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
