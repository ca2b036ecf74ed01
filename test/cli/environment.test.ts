/**
 * `PETSTORE_SANDBOX_*` variables across commands: a shell or CI job that exports its `serve`
 * configuration runs every other command there too. Each command reads the variables of its own
 * options, leaves those of another command's options alone, and refuses, naming it, a variable
 * that names no option of any command. The commands run in this process (`runCliHere`).
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it, onTestFinished } from 'vitest'
import { runCli, runCliHere } from '../support/sandbox-cli.js'
import { auth, startSandbox } from '../support/sandbox-server.js'

/** What a shell that runs `serve` exports: serve's options only, a boolean written as containers write it. */
const SERVE_ONLY = { PETSTORE_SANDBOX_PORT: '4011', PETSTORE_SANDBOX_QUIET: '1', PETSTORE_SANDBOX_LOG: 'json' }

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-env-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/** A data directory a stopped `serve --data-dir` left, holding the development key's tenant. */
async function stoppedDataDir(): Promise<string> {
  const dir = await tempDir()
  const run = await runCliHere(['serve', '--port', '0', '--quiet', '--data-dir', dir])
  const origin = /API\s+(http:\/\/\S+)\/v1/.exec(run.stdout())?.[1]
  const created = await fetch(`${origin}/v1/categories`, { method: 'POST', headers: auth(undefined, true), body: JSON.stringify({ name: 'Kept' }) })
  expect(created.status).toBe(201)
  await run.server?.stop('test')
  return dir
}

/** Every command that runs something (`scenarios list`, not `scenarios`), with the options its help lists, found from `--help` down. */
async function everyCommand(path: readonly string[] = []): Promise<{ path: readonly string[]; options: string[] }[]> {
  const help = (await runCliHere([...path, '--help'])).stdout()
  const below = [...help.matchAll(/^ {2}petstore-sandbox ([a-z ]+?)(?= <| {2}|$)/gm)].map((match) => match[1]!.split(' '))
  if (below.length === 0) return [{ path, options: [...help.matchAll(/^ {2}--([a-z][a-z-]*) /gm)].map((match) => match[1]!) }]
  return (await Promise.all(below.map((sub) => everyCommand(sub)))).flat()
}

/** Exits with `code`, printing one line on stderr and nothing on stdout. */
function expectOneLine(run: Awaited<ReturnType<typeof runCliHere>>, code: number): string {
  expect(run.stdout()).toBe('')
  expect(run.stderr()).toMatch(/^petstore-sandbox: [^\n]+\n$/)
  expect(run.code).toBe(code)
  return run.stderr()
}

describe("a command beside serve's exported variables", () => {
  it('scenarios list lists the scenarios', async () => {
    const run = await runCliHere(['scenarios', 'list'], SERVE_ONLY)
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toMatch(/^default\s+1\.0\.0\s+A small shop/m)
    expect(run.code).toBe(0)
  })

  it('scenarios validate checks the files', async () => {
    const run = await runCliHere(['scenarios', 'validate', 'scenarios/default.json'], SERVE_ONLY)
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toBe('ok   scenarios/default.json: default 1.0.0\n')
    expect(run.code).toBe(0)
  })

  it('tenants list --data-dir lists the stopped server’s tenants', async () => {
    const dir = await stoppedDataDir()
    const run = await runCliHere(['tenants', 'list', '--data-dir', dir], SERVE_ONLY)
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toMatch(/^[0-9a-f]+ {2}default\s+6 categories {2}last used /)
    expect(run.code).toBe(0)
  })

  it('verify checks a live sandbox, and names a missing --api-key rather than a serve option', async () => {
    const sandbox = await startSandbox({ apiKeys: ['verify-env-key'] })
    const run = await runCliHere(['verify', `${sandbox.origin}/v1`, '--api-key', 'verify-env-key'], SERVE_ONLY)
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toMatch(/^\d+ held, 0 broken, 0 not applicable$/m)
    expect(run.code).toBe(0)
    const usage = await runCliHere(['verify', `${sandbox.origin}/v1`], SERVE_ONLY)
    expect(expectOneLine(usage, 2)).toBe('petstore-sandbox: Missing required argument: api-key\n')
  })

  it('scenarios record records a live sandbox', async () => {
    const upstream = await startSandbox({ apiKeys: ['record-env-key'] })
    const out = join(await tempDir(), 'shop.json')
    const run = await runCliHere(['scenarios', 'record', '--from', `${upstream.origin}/v1`, '--api-key', 'record-env-key', '--out', out], SERVE_ONLY)
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toMatch(/^recorded shop 1\.0\.0: 5 categories, /)
    expect(run.code).toBe(0)
  })
})

describe('every command beside a variable for every option of every command', () => {
  it('scenarios validate, which has no option of its own, runs', async () => {
    const commands = await everyCommand()
    expect(commands.map(({ path }) => path.join(' ')).sort()).toEqual(['scenarios list', 'scenarios record', 'scenarios validate', 'serve', 'tenants delete', 'tenants list', 'verify'])
    const own = new Set(commands.find(({ path }) => path.join(' ') === 'scenarios validate')!.options)
    const others = [...new Set(commands.flatMap(({ options }) => options))].filter((option) => !own.has(option))
    expect(others).toEqual(expect.arrayContaining(['port', 'read-only', 'force', 'data-dir', 'scenarios-dir', 'report']))
    const env = Object.fromEntries(others.map((option) => [`PETSTORE_SANDBOX_${option.toUpperCase().replaceAll('-', '_')}`, 'not for validate']))
    const run = await runCliHere(['scenarios', 'validate', 'scenarios/default.json'], env)
    expect(run.stderr()).toBe('')
    expect(run.code).toBe(0)
  })
})

describe('each command reads the variables of its own options', () => {
  it('serve reads its own, and leaves the variables of verify and scenarios record alone', async () => {
    const run = await runCliHere(['serve'], { PETSTORE_SANDBOX_PORT: '0', PETSTORE_SANDBOX_SCENARIO: 'empty', PETSTORE_SANDBOX_READ_ONLY: '1', PETSTORE_SANDBOX_FORCE: 'maybe' })
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toMatch(/scenario\s+empty 1\.0\.0/)
    expect(run.code).toBe(0)
  })

  it('scenarios list reads PETSTORE_SANDBOX_SCENARIOS_DIR, which serve shares', async () => {
    const dir = await tempDir()
    await writeFile(join(dir, 'extra.json'), JSON.stringify({ name: 'extra', version: '2.1.0', description: 'From the directory', seed: { categories: [] } }))
    const run = await runCliHere(['scenarios', 'list'], { ...SERVE_ONLY, PETSTORE_SANDBOX_SCENARIOS_DIR: dir })
    expect(run.stdout()).toMatch(/^extra\s+2\.1\.0\s+From the directory$/m)
    expect(run.code).toBe(0)
  })

  it('tenants list reads PETSTORE_SANDBOX_DATA_DIR, the directory serve keeps its tenants in', async () => {
    const dir = await stoppedDataDir()
    const run = await runCliHere(['tenants', 'list'], { ...SERVE_ONLY, PETSTORE_SANDBOX_DATA_DIR: dir })
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toMatch(/ default\s+6 categories /)
    expect(run.code).toBe(0)
  })

  it('scenarios record reads PETSTORE_SANDBOX_FORCE=1 as --force, and refuses a value that is neither true nor false', async () => {
    const upstream = await startSandbox({ apiKeys: ['record-env-key'] })
    const out = join(await tempDir(), 'shop.json')
    await writeFile(out, 'an older recording\n')
    const args = ['scenarios', 'record', '--from', `${upstream.origin}/v1`, '--api-key', 'record-env-key', '--out', out]
    const refused = await runCliHere(args, { PETSTORE_SANDBOX_FORCE: 'maybe' })
    expect(expectOneLine(refused, 1)).toBe('petstore-sandbox: PETSTORE_SANDBOX_FORCE must be true or false (1/0, yes/no, on/off), got "maybe"\n')
    const forced = await runCliHere(args, { PETSTORE_SANDBOX_FORCE: '1' })
    expect(forced.stderr()).toBe('')
    expect(forced.code).toBe(0)
    expect(JSON.parse(await readFile(out, 'utf8'))).toMatchObject({ name: 'shop', version: '1.0.0' })
  })

  it.each([
    { name: 'serve', args: ['serve', '--port', '0'], variable: 'PETSTORE_SANDBOX_ANY_KEY', code: 1 },
    { name: 'verify', args: ['verify', 'http://127.0.0.1:9/v1', '--api-key', 'k'], variable: 'PETSTORE_SANDBOX_READ_ONLY', code: 2 },
    { name: 'scenarios list', args: ['scenarios', 'list'], variable: 'PETSTORE_SANDBOX_VERBOSE', code: 1 },
  ])('$name refuses a boolean variable of its own that is neither true nor false, naming it', async ({ args, variable, code }) => {
    const run = await runCliHere(args, { [variable]: 'maybe' })
    expect(expectOneLine(run, code)).toBe(`petstore-sandbox: ${variable} must be true or false (1/0, yes/no, on/off), got "maybe"\n`)
  })
})

describe('a PETSTORE_SANDBOX_* variable that names no option of any command', () => {
  it.each([
    { name: 'serve', args: ['serve', '--port', '0'], code: 1 },
    { name: 'scenarios list', args: ['scenarios', 'list'], code: 1 },
    { name: 'scenarios validate', args: ['scenarios', 'validate', 'scenarios/default.json'], code: 1 },
    { name: 'scenarios record', args: ['scenarios', 'record', '--from', 'http://127.0.0.1:9/v1', '--api-key', 'k', '--out', 'never-written.json'], code: 1 },
    { name: 'verify', args: ['verify', 'http://127.0.0.1:9/v1', '--api-key', 'k'], code: 2 },
    { name: 'tenants list', args: ['tenants', 'list', '--data-dir', 'no-such-dir'], code: 1 },
    { name: 'tenants delete', args: ['tenants', 'delete', '123456789012', '--data-dir', 'no-such-dir'], code: 1 },
  ])('is refused by $name, naming the variable', async ({ args, code }) => {
    const run = await runCliHere(args, { ...SERVE_ONLY, PETSTORE_SANDBOX_NOPE: '1' })
    expect(expectOneLine(run, code)).toBe('petstore-sandbox: PETSTORE_SANDBOX_NOPE names no option of any petstore-sandbox command: unset it or correct its name\n')
  })
})

describe('an option set by a PETSTORE_SANDBOX_* variable to a value its command refuses', () => {
  it.each<{ judged: string; env: Record<string, string>; says: string }>([
    { judged: 'as a whole number', env: { PETSTORE_SANDBOX_PORT: 'x' }, says: 'PETSTORE_SANDBOX_PORT (--port) must be an integer from 0 to 65535, got "x"' },
    { judged: 'as a size', env: { PETSTORE_SANDBOX_MEMORY_BUDGET: '2TB' }, says: 'PETSTORE_SANDBOX_MEMORY_BUDGET (--memory-budget) must be a size in bytes' },
    { judged: 'as a latency', env: { PETSTORE_SANDBOX_LATENCY: 'soon' }, says: 'PETSTORE_SANDBOX_LATENCY (--latency) must be milliseconds' },
    { judged: 'as a log format', env: { PETSTORE_SANDBOX_LOG: 'xml' }, says: 'PETSTORE_SANDBOX_LOG (--log) must be pretty or json, got "xml"' },
    { judged: 'as a worker count', env: { PETSTORE_SANDBOX_WORKERS: 'two' }, says: 'PETSTORE_SANDBOX_WORKERS (--workers) must be an integer from 1 to 1024, or auto' },
    { judged: 'among its choices', env: { PETSTORE_SANDBOX_DURABILITY: 'maybe' }, says: 'PETSTORE_SANDBOX_DURABILITY (--durability) must be power-loss or process-crash, got "maybe"' },
    { judged: 'beside another option', env: { PETSTORE_SANDBOX_HEADERS_TIMEOUT: '5000', PETSTORE_SANDBOX_REQUEST_TIMEOUT: '1000' }, says: 'PETSTORE_SANDBOX_HEADERS_TIMEOUT (--headers-timeout) must not be greater than PETSTORE_SANDBOX_REQUEST_TIMEOUT (--request-timeout)' },
    { judged: 'as a token', env: { PETSTORE_SANDBOX_ADMIN_TOKEN: ' ' }, says: 'PETSTORE_SANDBOX_ADMIN_TOKEN (--admin-token) must not be empty' },
    { judged: 'as a URL by the sandbox', env: { PETSTORE_SANDBOX_PUBLIC_URL: 'ftp://x' }, says: 'Invalid PETSTORE_SANDBOX_PUBLIC_URL (--public-url): an http:// or https:// URL' },
    { judged: 'as a list of header names by the sandbox', env: { PETSTORE_SANDBOX_REDACT_HEADER: 'a b' }, says: 'Invalid PETSTORE_SANDBOX_REDACT_HEADER (--redact-header): expected a header name' },
    { judged: 'as scenario names by the sandbox', env: { PETSTORE_SANDBOX_SCENARIO_ALLOW: 'nope' }, says: 'Invalid PETSTORE_SANDBOX_SCENARIO_ALLOW (--scenario-allow): no scenario named "nope"' },
    { judged: 'as a scenario by the sandbox', env: { PETSTORE_SANDBOX_SCENARIO: 'nope' }, says: 'Cannot use PETSTORE_SANDBOX_SCENARIO (--scenario) "nope": no such scenario' },
    { judged: 'as a Redis URL by the sandbox', env: { PETSTORE_SANDBOX_REDIS_URL: 'http://x' }, says: 'Cannot use PETSTORE_SANDBOX_REDIS_URL (--redis-url) "http://x": unknown scheme' },
  ])('names the variable beside the flag when judged $judged', async ({ env, says }) => {
    const run = await runCliHere(['serve', '--quiet'], { PETSTORE_SANDBOX_PORT: '0', ...env })
    expect(expectOneLine(run, 1)).toContain(`petstore-sandbox: ${says}`)
  })

  it('names the variable in scenarios record, for a base URL the recorder refuses', async () => {
    const run = await runCliHere(['scenarios', 'record', '--api-key', 'k', '--out', 'never-written.json'], { PETSTORE_SANDBOX_FROM: 'staging.example.com/v1' })
    expect(expectOneLine(run, 1)).toContain('petstore-sandbox: Cannot record PETSTORE_SANDBOX_FROM (--from) "staging.example.com/v1": not an absolute URL')
  })

  it('names the variable and the flag of a host to listen on that this machine lacks', async () => {
    const run = await runCliHere(['serve', '--quiet'], { PETSTORE_SANDBOX_PORT: '0', PETSTORE_SANDBOX_HOST: '192.0.2.1' })
    expect(expectOneLine(run, 1)).toContain('give PETSTORE_SANDBOX_HOST (--host) an address of this machine')
  })

  it('names the variable in verify, whose usage errors exit 2', async () => {
    const run = await runCliHere(['verify', 'http://127.0.0.1:9/v1', '--api-key', 'k'], { PETSTORE_SANDBOX_TIMEOUT: 'soon' })
    expect(expectOneLine(run, 2)).toBe('petstore-sandbox: PETSTORE_SANDBOX_TIMEOUT (--timeout) must be an integer from 1 to 600000, got "soon"\n')
  })

  it('takes a request timeout shorter than the default headers timeout on its own, the headers timeout then as short (new-user trial)', async () => {
    const run = runCli(['serve', '--port', '0', '--request-timeout', '2000'])
    await run.waitFor('is running')
    // Before: refused, "--headers-timeout must not be greater than --request-timeout", for a default the user never set.
    expect(run.stdout()).toContain('headers within 2000 ms, requests within 2000 ms')
  })

  it('names only the flag when a flag set the value, whatever the variable holds', async () => {
    const run = await runCliHere(['serve', '--port', 'x'], { PETSTORE_SANDBOX_PORT: '0' })
    expect(expectOneLine(run, 1)).toBe('petstore-sandbox: --port must be an integer from 0 to 65535, got "x"\n')
    const equals = await runCliHere(['serve', '--port=0', '--headers-timeout=5000'], { PETSTORE_SANDBOX_REQUEST_TIMEOUT: '1000' })
    expect(expectOneLine(equals, 1)).toBe('petstore-sandbox: --headers-timeout must not be greater than PETSTORE_SANDBOX_REQUEST_TIMEOUT (--request-timeout)\n')
  })
})
