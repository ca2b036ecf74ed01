// `npm test`: the type-check, the lint and vitest (with any arguments given: `npm test -- test/cli`)
// side by side. Exits with a failing check's code, else vitest's. The type-check's and the lint's
// output each come whole, one after the other: after vitest's, or at once when one fails.
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

// @note The tests start with the checks rather than after them: the checks use about one core of
// two for their seconds, the tests' first files would wait on them otherwise. A failing check is
// shown at once and stops the tests (vitest ends the files it is running first: up to ~30 s).
const vitest = spawn(process.execPath, [bin('vitest'), 'run', ...process.argv.slice(2)], { stdio: 'inherit' })
const tested = new Promise((resolve) => vitest.on('close', (code, signal) => resolve(code ?? (signal ? 1 : 0))))
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => vitest.kill(signal))

const checks = await Promise.all([
  run(bin('typescript'), ['-p', 'tsconfig.json', '--incremental', '--tsBuildInfoFile', buildInfo]),
  // The cache lives under node_modules (a fresh clone has none; a second run lints only what changed).
  run(bin('eslint'), ['--cache', '--cache-location', 'node_modules/.cache/eslint/', '.']),
])
const failed = checks.find((check) => check.code !== 0)
if (failed) {
  for (const check of checks) process.stdout.write(check.output)
  process.stdout.write(`\nnpm test: ${failed === checks[0] ? 'the type-check' : 'the lint'} failed (above): stopping the tests.\n\n`)
  vitest.kill('SIGTERM')
  await tested
  process.exit(failed.code)
}
const code = await tested
for (const check of checks) process.stdout.write(check.output)
process.exit(code)
