/**
 * The systems the peers and start sections compare, each given the same answer to serve: a list
 * of the same 3 categories for `GET /v1/categories` with the bench's read key, and a 201 with the
 * created category for `POST /v1/categories` with its write key. The peers' files (WireMock
 * mappings, a Mockoon environment, json-server's data and auth middleware, a small OpenAPI
 * document for Prism, cut from our openapi.json) are written here, into a temporary directory,
 * from that one list. The peers come from `bash bench/peers/setup.sh` (in .bench-peers/).
 */
import { spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { READ_KEY, WRITE_KEY } from '../servers/keys.js'
import type { Launch } from '../lib/exec-server.js'

export const ROOT = fileURLToPath(new URL('../../', import.meta.url))
export const PEERS_DIR = join(ROOT, '.bench-peers')
const MODULES = join(PEERS_DIR, 'node_modules')

/** The list every system answers: the default scenario's first three categories. */
export const THREE = [
  { id: 1, name: 'Dogs', description: 'Loyal companions of every size' },
  { id: 2, name: 'Cats', description: 'Independent, curious and fond of naps' },
  { id: 3, name: 'Rabbits', description: 'Gentle grazers that need room to hop' },
] as const
/** What the POST rounds send (bench/lib/load.ts), and the fixed answer of the peers that do not store it. */
const CREATED = { id: 4, name: 'Ferrets', description: 'Curious and quick' }

export interface System extends Launch {
  /** Whether a POST is stored (and the next GET would list it), or answered with a fixed body. */
  readonly post: 'stores' | 'fixed answer'
  /** Brought back to its seed before each POST load (the sandbox's admin API), so no load meets a limit. */
  readonly resets?: boolean
}

/** The sandbox's command line, as a user runs it (request log on), on a 3-category scenario. */
export function sandboxCommand(dir: string): string[] {
  const scenario = join(dir, 'three-categories.json')
  writeFileSync(scenario, JSON.stringify({ name: 'three-categories', version: '1.0.0', description: 'The bench: three categories', seed: { categories: THREE } }))
  // @note A POST round creates more categories than a tenant may hold by default (20,000): the
  // bench lifts the limit, as bench/servers/sandbox-variants.ts does.
  return ['serve', '--port', '{port}', '--api-key', `${READ_KEY},${WRITE_KEY}`, '--scenario', scenario, '--max-categories', '500000', '--name-max-length', '20', '--description-max-length', '20']
}

export function sandbox(dir: string): System {
  return { name: 'petstore-sandbox', command: [process.execPath, join(ROOT, 'dist/cli.js'), ...sandboxCommand(dir)], post: 'stores', resets: true }
}

/** What `npm start` runs, without npm: `node scripts/start.mjs serve …`. */
export function npmScript(dir: string): System {
  return { name: 'scripts/start.mjs', command: [process.execPath, join(ROOT, 'scripts/start.mjs'), ...sandboxCommand(dir)], cwd: ROOT, post: 'stores' }
}

/** `npm start` in this checkout, with the same options. */
export function npmStart(dir: string): System {
  return { name: 'npm start', command: ['npm', 'start', '--silent', '--', ...sandboxCommand(dir).slice(1)], cwd: ROOT, post: 'stores' }
}

function wiremock(dir: string): System | string {
  const jar = join(MODULES, 'wiremock/build')
  const file = existsSync(jar) ? readdirSync(jar).find((name) => name.endsWith('.jar')) : undefined
  if (file === undefined) return 'not installed'
  const mappings = join(dir, 'wiremock/mappings')
  mkdirSync(mappings, { recursive: true })
  const stub = (method: string, key: string, status: number, body: unknown) => ({
    request: { method, url: '/v1/categories', headers: { Authorization: { equalTo: `Bearer ${key}` } } },
    response: { status, headers: { 'Content-Type': 'application/json' }, jsonBody: body },
  })
  writeFileSync(join(mappings, 'categories.json'), JSON.stringify({ mappings: [stub('GET', READ_KEY, 200, THREE), stub('POST', WRITE_KEY, 201, CREATED)] }))
  // @note The request journal is bounded (WireMock keeps every request by default), as ours is.
  return {
    name: 'WireMock 3',
    command: ['java', '-jar', join(jar, file), '--port', '{port}', '--bind-address', '127.0.0.1', '--root-dir', join(dir, 'wiremock'), '--disable-banner', '--max-request-journal-entries', '1000'],
    post: 'fixed answer',
  }
}

function prism(dir: string): System | string {
  const bin = join(MODULES, '@stoplight/prism-cli/dist/index.js')
  if (!existsSync(bin)) return 'not installed'
  // Our own document, cut to the one path, under /v1 (Prism serves paths as written), with the examples it answers.
  const ours = JSON.parse(readFileSync(join(ROOT, 'openapi.json'), 'utf8')) as {
    openapi: string
    info: unknown
    paths: Record<string, Record<string, { responses: Record<string, { content?: Record<string, { example?: unknown }> }> }>>
    components: unknown
    security: unknown
  }
  const path = structuredClone(ours.paths['/categories']!)
  path['get']!.responses['200']!.content!['application/json']!.example = THREE
  path['post']!.responses['201']!.content!['application/json']!.example = CREATED
  const document = { openapi: ours.openapi, info: ours.info, security: ours.security, components: ours.components, paths: { '/v1/categories': path } }
  writeFileSync(join(dir, 'prism-openapi.json'), JSON.stringify(document))
  return { name: 'Prism 5', command: [process.execPath, bin, 'mock', join(dir, 'prism-openapi.json'), '--host', '127.0.0.1', '--port', '{port}'], post: 'fixed answer' }
}

function jsonServer(dir: string): System | string {
  const bin = join(MODULES, 'json-server/lib/cli/bin.js')
  if (!existsSync(bin)) return 'not installed'
  // @note A .js data file keeps json-server's data in memory (a .json one is rewritten on every create).
  writeFileSync(join(dir, 'json-server-db.cjs'), `module.exports = () => (${JSON.stringify({ categories: THREE, created: [] })})\n`)
  writeFileSync(join(dir, 'json-server-routes.json'), JSON.stringify({ '/v1/*': '/$1' }))
  // The bearer check; the write key's creates go to a collection of their own, as to a tenant of their own.
  writeFileSync(
    join(dir, 'json-server-auth.cjs'),
    `module.exports = (req, res, next) => {
  const auth = req.headers.authorization
  if (auth === 'Bearer ${READ_KEY}') return next()
  if (auth === 'Bearer ${WRITE_KEY}') { req.url = req.url.replace('/categories', '/created'); return next() }
  res.status(401).json({ code: 'invalid_api_key', message: 'Invalid API key', status: 401 })
}
`,
  )
  return {
    name: 'json-server 0.17',
    command: [process.execPath, bin, join(dir, 'json-server-db.cjs'), '--host', '127.0.0.1', '--port', '{port}', '--routes', join(dir, 'json-server-routes.json'), '--middlewares', join(dir, 'json-server-auth.cjs')],
    post: 'stores',
  }
}

function mockoon(dir: string): System | string {
  const bin = join(MODULES, '@mockoon/cli/bin/run.js')
  if (!existsSync(bin)) return 'not installed'
  // The environment is built with Mockoon's own builders, so it is valid for the installed version.
  const commons = createRequire(join(MODULES, '@mockoon/cli/package.json'))('@mockoon/commons') as MockoonBuilders
  const answer = (status: number, body: unknown, key: string | undefined) => ({
    ...commons.BuildRouteResponse(),
    statusCode: status,
    body: JSON.stringify(body),
    default: key === undefined,
    rules: key === undefined ? [] : [{ ...commons.BuildResponseRule(), target: 'header', modifier: 'Authorization', value: `Bearer ${key}`, operator: 'equals' }],
  })
  const unauthorized = { code: 'invalid_api_key', message: 'Invalid API key', status: 401 }
  const route = (method: string, key: string, status: number, body: unknown) => ({
    ...commons.BuildHTTPRoute(false),
    method,
    endpoint: 'v1/categories',
    responses: [answer(status, body, key), answer(401, unauthorized, undefined)],
  })
  const routes = [route('get', READ_KEY, 200, THREE), route('post', WRITE_KEY, 201, CREATED)]
  const environment = {
    ...commons.BuildEnvironment({ hasDefaultRoute: false, hasContentTypeHeader: true, hasCorsHeaders: false }),
    name: 'bench',
    hostname: '127.0.0.1',
    routes,
    rootChildren: routes.map((entry) => ({ type: 'route', uuid: entry.uuid })),
  }
  writeFileSync(join(dir, 'mockoon-environment.json'), JSON.stringify(environment))
  return { name: 'Mockoon CLI 9', command: [process.execPath, bin, 'start', '--data', join(dir, 'mockoon-environment.json'), '--port', '{port}'], post: 'fixed answer' }
}

interface MockoonBuilders {
  BuildEnvironment(params: { hasDefaultRoute: boolean; hasContentTypeHeader: boolean; hasCorsHeaders: boolean }): Record<string, unknown>
  BuildHTTPRoute(hasDefaultRouteResponse: boolean): { uuid: string } & Record<string, unknown>
  BuildRouteResponse(): Record<string, unknown>
  BuildResponseRule(): Record<string, unknown>
}


/** Every peer, written into `dir`; a peer that cannot run here is a string saying why. */
export function peers(dir: string): Array<System | { name: string; skipped: string }> {
  const java = spawnSync('java', ['-version']).status === 0
  const all: Array<[string, () => System | string]> = [
    ['WireMock 3', () => (java ? wiremock(dir) : 'no java on PATH')],
    ['json-server 0.17', () => jsonServer(dir)],
    ['Prism 5', () => prism(dir)],
    ['Mockoon CLI 9', () => mockoon(dir)],
  ]
  return all.map(([name, make]) => {
    const made = make()
    return typeof made === 'string' ? { name, skipped: made } : made
  })
}
