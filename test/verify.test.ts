/**
 * `verify` (issue 22, point 1): the contract's conformance checks over real HTTP on loopback,
 * against a fresh sandbox (every check holds) and against a divergent upstream (a node:http
 * server in front of a sandbox that changes exactly the answers named in PLANTED).
 */
import { execFile } from 'node:child_process'
import { once } from 'node:events'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { readFileSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it, onTestFinished } from 'vitest'
import { PetstoreError } from '../src/core/petstore-error.js'
import { verifyService, type VerifyCheck } from '../src/server.js'
import { CLI_BINARY, runCliHere } from './support/sandbox-cli.js'
import { auth, startSandbox } from './support/sandbox-server.js'

const KEY = 'verify-k1'

/** Each divergence the upstream plants, by the check that must name it and what its problem says. */
const PLANTED: Readonly<Record<string, RegExp>> = {
  'listCategories.200': /item 0 is not a Category: id/,
  'listCategories.401-wrong-key': /not an Error \(code, message, status\)/,
  'createCategory.401-missing-key': /Content-Type is "text\/plain", not application\/json/,
  'createCategory.400.missing_field.name-missing': /the Error's status is 422, the HTTP status 400/,
  'createCategory.201': /the body is not a Category: id/,
  'getPetById.deprecation': /no Deprecation header/,
}

async function freshSandbox() {
  const sandbox = await startSandbox({ apiKeys: [KEY] })
  return { ...sandbox, baseUrl: `${sandbox.origin}/v1` }
}

async function listen(server: ReturnType<typeof createServer>): Promise<string> {
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  onTestFinished(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/**
 * A service that answers as the sandbox behind it does, but for the divergences of PLANTED:
 * the first listed category without its id, a 401 for a wrong key on the list in another Error
 * shape, the 401 of a POST without a key as text/plain, 422 in the body of the missing-name 400,
 * no id in the 201 of a create with a description, no Deprecation header on the pet.
 */
async function divergentUpstream(): Promise<string> {
  const { origin } = await freshSandbox()
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    void (async () => {
      const body = await bodyOf(req)
      const headers: Record<string, string> = {}
      for (const name of ['authorization', 'content-type']) if (req.headers[name] !== undefined) headers[name] = String(req.headers[name])
      const answer = await fetch(`${origin}${req.url}`, { method: req.method, headers, ...(req.method === 'POST' && { body: new Uint8Array(body) }) })
      const out: Record<string, string> = {}
      answer.headers.forEach((value, name) => {
        if (!['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'date'].includes(name)) out[name] = value
      })
      let text = await answer.text()
      const json = (() => {
        try {
          return JSON.parse(text) as Record<string, unknown> & { [index: number]: Record<string, unknown> }
        } catch {
          return undefined
        }
      })()
      const list = req.method === 'GET' && req.url === '/v1/categories'
      const post = req.method === 'POST' && req.url === '/v1/categories'
      if (list && answer.status === 200 && Array.isArray(json)) {
        delete json[0]!['id']
        text = JSON.stringify(json)
      } else if (list && answer.status === 401 && headers['authorization'] !== undefined) {
        text = JSON.stringify({ error: { type: json?.['code'], detail: json?.['message'] } })
      } else if (post && answer.status === 401 && headers['authorization'] === undefined) {
        out['content-type'] = 'text/plain'
      } else if (post && json?.['code'] === 'missing_field') {
        text = JSON.stringify({ ...json, status: 422 })
      } else if (post && answer.status === 201 && json?.['description'] !== undefined) {
        delete json['id']
        text = JSON.stringify(json)
      } else if (req.url?.startsWith('/v1/pets/')) {
        delete out['deprecation']
      }
      res.writeHead(answer.status, out).end(text)
    })().catch((error: unknown) => res.writeHead(502).end(String(error)))
  })
  return `${await listen(server)}/v1`
}

function outcomes(checks: readonly VerifyCheck[], outcome: VerifyCheck['outcome']): string[] {
  return checks.filter((check) => check.outcome === outcome).map((check) => check.id)
}

/** A port nothing listens on: bound, then closed. */
async function closedPort(): Promise<number> {
  const server = createServer()
  server.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sandbox-verify-'))
  onTestFinished(() => rm(dir, { recursive: true, force: true }))
  return dir
}

/**
 * Whether `text` is well-formed XML as far as a report needs: one declaration, tags that nest
 * and close, quoted attributes, and no `<` or `&` in text or attributes but entities.
 */
function wellFormedXml(text: string): boolean {
  const body = text.replace(/^<\?xml version="1\.0" encoding="UTF-8"\?>\n/, '')
  if (body === text) return false
  const open: string[] = []
  const token = /<(\/?)([A-Za-z][\w.-]*)((?:\s+[\w.-]+="[^"<&]*(?:&(?:amp|lt|gt|quot|apos);[^"<&]*)*")*)\s*(\/?)>|([^<]+)/gy
  let match: RegExpExecArray | null
  let seen = 0
  while ((match = token.exec(body)) !== null) {
    seen = token.lastIndex
    const [, closing, name, , selfClosing, characters] = match
    if (characters !== undefined) {
      if (/&(?!(?:amp|lt|gt|quot|apos);)/.test(characters)) return false
      if (open.length === 0 && characters.trim() !== '') return false
    } else if (closing) {
      if (open.pop() !== name) return false
    } else if (!selfClosing) open.push(name!)
  }
  return seen === body.length && open.length === 0
}

describe('verifyService', () => {
  it('holds every check against a fresh sandbox, and names every 400 class the sandbox answers', async () => {
    const { baseUrl } = await freshSandbox()
    const report = await verifyService({ baseUrl, apiKey: KEY })
    expect(outcomes(report.checks, 'broken')).toEqual([])
    expect(outcomes(report.checks, 'not_applicable')).toEqual([])
    const ids = report.checks.map((check) => check.id)
    for (const code of ['invalid_body', 'invalid_json', 'missing_field', 'invalid_field', 'unsupported_media_type']) {
      expect(ids.some((id) => id.startsWith(`createCategory.400.${code}.`)), code).toBe(true)
    }
    expect(ids).toEqual(expect.arrayContaining(['listCategories.200', 'listCategories.401-missing-key', 'listCategories.401-wrong-key', 'createCategory.401-missing-key', 'createCategory.401-wrong-key', 'getPetById.401-wrong-key', 'listOrders.401-missing-key', 'createCategory.201', 'createCategory.201-name-only', 'createCategory.201-listed', 'getPetById.deprecation', 'getPetById.sunset']))
    expect(report.summary).toEqual({ held: report.checks.length, broken: 0, notApplicable: 0 })
  })

  it('reports each divergence planted in an upstream as broken, with its request and answer, and nothing else', async () => {
    const report = await verifyService({ baseUrl: await divergentUpstream(), apiKey: KEY })
    const broken = report.checks.filter((check) => check.outcome === 'broken')
    expect(broken.map((check) => check.id).sort()).toEqual(Object.keys(PLANTED).sort())
    for (const check of broken) {
      expect(check.problems.join('\n'), check.id).toMatch(PLANTED[check.id]!)
      expect(check.exchange?.request.url, check.id).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/v1\//)
      expect(check.exchange?.response?.status, check.id).toBeGreaterThan(0)
    }
    expect(report.summary.broken).toBe(Object.keys(PLANTED).length)
    expect(report.summary.notApplicable).toBe(0)
  })

  it('sends no POST with readOnly, reporting the checks that create as not applicable', async () => {
    const { baseUrl, fetch } = await freshSandbox()
    const before = await (await fetch('/v1/categories', { headers: auth(KEY) })).json()
    const report = await verifyService({ baseUrl, apiKey: KEY, readOnly: true })
    expect(outcomes(report.checks, 'broken')).toEqual([])
    const skipped = outcomes(report.checks, 'not_applicable')
    expect(skipped).toEqual(expect.arrayContaining(['createCategory.201', 'createCategory.201-listed', 'createCategory.401-missing-key', 'createCategory.400.missing_field.name-missing']))
    expect(skipped.every((id) => id.startsWith('createCategory.'))).toBe(true)
    expect(outcomes(report.checks, 'held')).toEqual([
      'listCategories.200',
      'listCategories.401-missing-key',
      'listCategories.401-wrong-key',
      'getPetById.401-missing-key',
      'getPetById.401-wrong-key',
      'listOrders.401-missing-key',
      'listOrders.401-wrong-key',
      'getPetById.deprecation',
      'getPetById.sunset',
    ])
    expect(await (await fetch('/v1/categories', { headers: auth(KEY) })).json()).toEqual(before)
    const posts = (await (await fetch('/__sandbox/requests?method=POST', { headers: auth(KEY) })).json()) as unknown[]
    expect(posts).toEqual([])
  })

  it('checks the lengths the service is given: a sandbox with names of at most 50 holds with nameMaxLength 50; the default sandbox, which takes 51, breaks that check alone', async () => {
    const short = await startSandbox({ apiKeys: [KEY], nameMaxLength: 50 })
    const held = await verifyService({ baseUrl: `${short.origin}/v1`, apiKey: KEY, nameMaxLength: 50 })
    expect(outcomes(held.checks, 'broken')).toEqual([])
    expect(outcomes(held.checks, 'held')).toContain('createCategory.400.invalid_field.name-51-characters')
    const { baseUrl } = await freshSandbox()
    const report = await verifyService({ baseUrl, apiKey: KEY, nameMaxLength: 50 })
    expect(outcomes(report.checks, 'broken')).toEqual(['createCategory.400.invalid_field.name-51-characters'])
    expect(report.checks.find((check) => check.outcome === 'broken')?.problems).toEqual(['status 201, expected 400', expect.stringMatching(/^the body is not an Error \(code, message, status\): code: /)])
  })

  it('rejects with upstream_unreachable when nothing answers at the base URL', async () => {
    const port = await closedPort()
    const error = await verifyService({ baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: KEY }).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(PetstoreError)
    expect(error).toMatchObject({ code: 'upstream_unreachable', message: expect.stringContaining(`Cannot reach http://127.0.0.1:${port}/v1/categories: connect ECONNREFUSED`) as string })
  })
  it('rejects with upstream_unreachable naming the timeout when the service accepts the connection but never answers', async () => {
    const silent = createServer(() => {})
    const origin = await listen(silent)
    const error = await verifyService({ baseUrl: `${origin}/v1`, apiKey: KEY, timeoutMs: 200 }).catch((caught: unknown) => caught)
    expect(error).toMatchObject({ code: 'upstream_unreachable', message: `Cannot reach ${origin}/v1/categories: no answer within 200 ms. Check the base URL (it ends in /v1) and that the service is running, or give a slow service more time (--timeout)` })
  })
})

describe('petstore-sandbox verify', () => {
  it('prints every check held against a fresh sandbox and exits 0', async () => {
    const { baseUrl } = await freshSandbox()
    const run = await runCliHere(['verify', baseUrl, '--api-key', KEY])
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toMatch(/^held {4}listCategories\.200 /m)
    expect(run.stdout()).not.toMatch(/^broken/m)
    expect(run.stdout()).toMatch(/^\d+ held, 0 broken, 0 not applicable$/m)
    expect(run.code).toBe(0)
  })

  it('prints the broken checks of a divergent upstream with their request and answer, writes them to a JUnit report, and exits 1', async () => {
    const report = join(await tempDir(), 'verify.xml')
    const run = await runCliHere(['verify', await divergentUpstream(), '--api-key', KEY, '--report', report])
    expect(run.code).toBe(1)
    const out = run.stdout()
    expect(out).toMatch(new RegExp(`^${Object.keys(PLANTED).length} broken|, ${Object.keys(PLANTED).length} broken,`, 'm'))
    // The 201 without an id: the problem, then the request (key redacted) and the answer.
    expect(out).toMatch(/^broken {2}createCategory\.201 .*\n {8}- the body is not a Category: id.*\n(?: {8}- .*\n)* {10}POST http:\/\/127\.0\.0\.1:\d+\/v1\/categories\n {10}authorization: Bearer \[the API key\]\n {10}content-type: application\/json\n {10}\{"name":.*\n {10}→ 201\n/m)
    expect(out).not.toContain(`Bearer ${KEY}`)
    const xml = await readFile(report, 'utf8')
    expect(wellFormedXml(xml)).toBe(true)
    const failed = [...xml.matchAll(/<testcase classname="\w+" name="([^":]+):[^"]*">\s*<failure message="([^"]*)"/g)].map(([, id]) => id)
    expect(failed.sort()).toEqual(Object.keys(PLANTED).sort())
    expect(xml).toMatch(/<testsuites name="petstore-sandbox verify" tests="\d+" failures="6" skipped="0">/)
  })

  it('writes a JSON report naming the broken checks, by extension or --report-format', async () => {
    const dir = await tempDir()
    const upstream = await divergentUpstream()
    for (const [file, extra] of [['verify.json', []], ['verify.out', ['--report-format', 'json']]] as const) {
      const run = await runCliHere(['verify', upstream, '--api-key', KEY, '--report', join(dir, file), ...extra])
      expect(run.code).toBe(1)
      const json = JSON.parse(await readFile(join(dir, file), 'utf8')) as { checks: VerifyCheck[]; summary: { broken: number } }
      expect(outcomes(json.checks, 'broken').sort()).toEqual(Object.keys(PLANTED).sort())
      expect(json.summary.broken).toBe(Object.keys(PLANTED).length)
    }
  })

  it('with --read-only, creates nothing and reports the creating checks as n/a in a JUnit report', async () => {
    const { baseUrl, fetch } = await freshSandbox()
    const report = join(await tempDir(), 'verify.xml')
    const run = await runCliHere(['verify', baseUrl, '--api-key', KEY, '--read-only', '--report', report])
    expect(run.code).toBe(0)
    expect(run.stdout()).toMatch(/^n\/a {5}createCategory\.201 .*\(read-only: no POST is sent\)$/m)
    const xml = await readFile(report, 'utf8')
    expect(wellFormedXml(xml)).toBe(true)
    expect(xml).toContain('<testcase classname="createCategory" name="createCategory.201: ')
    expect(xml).toMatch(/failures="0" skipped="[1-9]\d*"/)
    expect(await (await fetch('/__sandbox/requests?method=POST', { headers: auth(KEY) })).json()).toEqual([])
  })

  it('reads --api-key and --read-only from PETSTORE_SANDBOX_API_KEY and PETSTORE_SANDBOX_READ_ONLY=1, as a CI job sets them', async () => {
    const { baseUrl, fetch } = await freshSandbox()
    const run = await runCliHere(['verify', baseUrl], { PETSTORE_SANDBOX_API_KEY: KEY, PETSTORE_SANDBOX_READ_ONLY: '1' })
    expect(run.stderr()).toBe('')
    expect(run.stdout()).toContain(`petstore-sandbox verify ${baseUrl} (read-only)`)
    expect(run.code).toBe(0)
    expect(await (await fetch('/__sandbox/requests?method=POST', { headers: auth(KEY) })).json()).toEqual([])
  })

  it.each([
    { name: 'no --api-key', args: (base: string) => ['verify', base], message: 'Missing required argument: api-key' },
    { name: 'a base URL that is not http', args: () => ['verify', 'ftp://127.0.0.1/v1', '--api-key', KEY], message: '<base-url> must be an http(s) URL such as http://127.0.0.1:4010/v1, got "ftp://127.0.0.1/v1"' },
    { name: 'a key the service refuses', args: (base: string) => ['verify', base, '--api-key', 'not-a-key'], message: '--api-key is refused by the service: GET ' },
    { name: 'the base URL without /v1', args: (base: string) => ['verify', base.replace(/\/v1$/, ''), '--api-key', KEY], message: "<base-url> has no /categories under it: GET http://127.0.0.1:" },
    { name: 'a wrong key equal to the key', args: (base: string) => ['verify', base, '--api-key', KEY, '--wrong-key', KEY], message: '--wrong-key must differ from --api-key' },
    { name: 'a report of unknown format', args: (base: string) => ['verify', base, '--api-key', KEY, '--report', 'out.txt'], message: '--report out.txt: name a .xml (JUnit) or .json file, or add --report-format junit|json' },
    { name: 'an unknown report format', args: (base: string) => ['verify', base, '--api-key', KEY, '--report', 'out.txt', '--report-format', 'tap'], message: '--report-format must be junit or json, got "tap"' },
    { name: 'a timeout that is not a number', args: (base: string) => ['verify', base, '--api-key', KEY, '--timeout', 'soon'], message: '--timeout must be an integer from 1 to 600000, got "soon"' },
  ])('exits 2 with one clear line for $name', async ({ args, message }) => {
    const { baseUrl } = await freshSandbox()
    const run = await runCliHere(args(baseUrl))
    expect(run.stderr()).toContain(`petstore-sandbox: ${message}`)
    expect(run.stderr().trim().split('\n')).toHaveLength(1)
    expect(run.stdout()).toBe('')
    expect(run.code).toBe(2)
  })

  it('exits 2 naming the address when nothing answers there', async () => {
    const port = await closedPort()
    const run = await runCliHere(['verify', `http://127.0.0.1:${port}/v1`, '--api-key', KEY])
    expect(run.stderr()).toBe(`petstore-sandbox: Cannot reach http://127.0.0.1:${port}/v1/categories: connect ECONNREFUSED 127.0.0.1:${port}. Check the base URL (it ends in /v1) and that the service is running\n`)
    expect(run.code).toBe(2)
  })
})

describe("docs/real-service.md's verify section", () => {
  const ROOT = fileURLToPath(new URL('..', import.meta.url))
  const GUIDE = readFileSync(join(ROOT, 'docs/real-service.md'), 'utf8')

  /** The verify lines of the section's sh block, as a shell runs them. */
  function verifyLines(): string[] {
    const section = /<!-- section:verify -->([\s\S]*?)<!-- \/section:verify -->/.exec(GUIDE)?.[1] ?? ''
    const block = /```sh\n([\s\S]*?)```/.exec(section)?.[1] ?? ''
    return block.split('\n').filter((line) => line.startsWith('npx petstore-sandbox verify '))
  }

  /** Runs one line of the guide in sh, `npx petstore-sandbox` being the built binary; resolves with its exit code and output. */
  function run(line: string, cwd: string, env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
    const script = `npx() { shift; "${process.execPath}" "${join(ROOT, CLI_BINARY)}" "$@"; }\n${line}`
    return new Promise((resolve) => {
      execFile('sh', ['-c', script], { cwd, env: { ...process.env, NO_COLOR: '1', ...env } }, (error, stdout, stderr) => {
        resolve({ code: error ? Number(error.code) : 0, stdout, stderr })
      })
    })
  }

  it('runs every verify line of the block word for word against a sandbox: each exits 0, the --report line writes its JUnit file', async () => {
    const { baseUrl } = await freshSandbox()
    const cwd = await tempDir()
    const lines = verifyLines()
    expect(lines).toHaveLength(3)
    for (const line of lines) {
      const result = await run(line, cwd, { STAGING_URL: baseUrl, STAGING_KEY: KEY })
      expect(result.stderr, line).toBe('')
      expect(result.stdout, line).toMatch(/^\d+ held, 0 broken, \d+ not applicable$/m)
      expect(result.code, line).toBe(0)
    }
    expect(wellFormedXml(await readFile(join(cwd, 'verify.xml'), 'utf8'))).toBe(true)
  })

  it('names in its table every check a run makes', async () => {
    const { baseUrl } = await freshSandbox()
    const report = await verifyService({ baseUrl, apiKey: KEY })
    const table = /\| Check \| What must hold \|\n([\s\S]*?)\n\n/.exec(GUIDE)?.[1] ?? ''
    const named = [...table.matchAll(/`([\w.…<>-]+)`/g)].map(([, name]) => name!)
    const covered = (id: string) =>
      named.some((name) => {
        const operation = id.split('.')[0]!
        const pattern = name.replace(/^…/, `${operation}.`).replace(/[.]/g, '\\.').replace(/<\w+>/g, '[^.]+')
        return new RegExp(`^${pattern}$`).test(id)
      })
    expect(report.checks.map((check) => check.id).filter((id) => !covered(id))).toEqual([])
  })
})

/** What a body-bounding upstream saw: the bytes it managed to write, and whether the client hung up. */
interface BodyUpstream {
  readonly baseUrl: string
  written(): number
  /** Resolves once the client has closed the connection of the first answer. */
  readonly hungUp: Promise<void>
}

/** Most an endless upstream writes before it stops writing (the connection left open): far above any cap a test gives. */
const ENDLESS_STOPS_AT = 48 * 1024 * 1024

/**
 * A service answering every request 200 with a JSON array that never ends: `fast` writes as fast
 * as the client reads (up to ENDLESS_STOPS_AT, then holds the connection open without a word more),
 * else one byte every 50 ms.
 */
async function endlessUpstream(fast: boolean): Promise<BodyUpstream> {
  let written = 0
  let hungUp!: () => void
  const closed = new Promise<void>((resolve) => (hungUp = resolve))
  const chunk = Buffer.from(`${'{"id":1,"name":"Dogs"},'.repeat(700)}`)
  const server = createServer((_req: IncomingMessage, res: ServerResponse) => {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.write('[')
    res.once('close', () => hungUp())
    const timer = fast
      ? undefined
      : setInterval(() => {
          res.write(' ')
          written += 1
        }, 50)
    res.once('close', () => clearInterval(timer))
    if (!fast) return
    const pump = () => {
      while (!res.destroyed && written < ENDLESS_STOPS_AT) {
        written += chunk.length
        if (!res.write(chunk)) return void res.once('drain', pump)
      }
    }
    pump()
  })
  return { baseUrl: `${await listen(server)}/v1`, written: () => written, hungUp: closed }
}

describe('verify against a service whose answer is too large, never ends or drips', () => {
  it('exits 2 at --max-answer-bytes on a body that never ends, naming the request and the cap, having let go of the connection', async () => {
    const upstream = await endlessUpstream(true)
    const run = await runCliHere(['verify', upstream.baseUrl, '--api-key', KEY, '--max-answer-bytes', '64KiB', '--timeout', '60000'])
    expect(run.stderr()).toBe(`petstore-sandbox: GET ${upstream.baseUrl}/categories answered more than 65536 bytes, the most verify reads of one answer (--max-answer-bytes): the rest was not read\n`)
    expect(run.stdout()).toBe('')
    expect(run.code).toBe(2)
    await upstream.hungUp
    // Read no further than the cap: what the upstream wrote past it sits in socket buffers, far below what it would send.
    expect(upstream.written()).toBeLessThan(ENDLESS_STOPS_AT / 2)
  })

  it('rejects with upstream_nonconformant when a whole list is larger than maxAnswerBytes', async () => {
    const list = JSON.stringify(Array.from({ length: 2000 }, (_, index) => ({ id: index + 1, name: `category ${index + 1}` })))
    const server = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(list))
    const baseUrl = `${await listen(server)}/v1`
    expect(list.length).toBeGreaterThan(16_384)
    const error = await verifyService({ baseUrl, apiKey: KEY, maxAnswerBytes: 16_384 }).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(PetstoreError)
    expect(error).toMatchObject({ code: 'upstream_nonconformant', message: `GET ${baseUrl}/categories answered more than 16384 bytes, the most verify reads of one answer (maxAnswerBytes): the rest was not read` })
    const held = await verifyService({ baseUrl, apiKey: KEY, maxAnswerBytes: list.length, readOnly: true })
    expect(held.checks.find((check) => check.id === 'listCategories.200')?.outcome).toBe('held')
  })

  it('exits 2 with the no-answer line when the body drips and never ends within --timeout', async () => {
    const upstream = await endlessUpstream(false)
    const run = await runCliHere(['verify', upstream.baseUrl, '--api-key', KEY, '--timeout', '300'])
    expect(run.stderr()).toBe(`petstore-sandbox: Cannot reach ${upstream.baseUrl}/categories: no complete answer within 300 ms. Check the base URL (it ends in /v1) and that the service is running, or give a slow service more time (--timeout)\n`)
    expect(run.code).toBe(2)
    await upstream.hungUp
  })

  it('refuses a --max-answer-bytes that is not a size, as a usage error', async () => {
    const run = await runCliHere(['verify', 'http://127.0.0.1:1/v1', '--api-key', KEY, '--max-answer-bytes', 'lots'])
    expect(run.stderr()).toBe('petstore-sandbox: --max-answer-bytes must be a size in bytes (1048576) or with a unit (512KiB, 64MiB, 2GiB), got "lots"\n')
    expect(run.code).toBe(2)
  })
})
