// The contract tools teams point at an OpenAPI document, run on the one the packed sandbox serves
// (`GET /__sandbox/openapi.json`) and against the sandbox itself: Spectral with `spectral:oas`,
// Dredd, and Portman's generated contract tests run by newman. Each must find nothing wrong;
// what a tool reads differently from OpenAPI is worked around in its own config, with the reason
// (.spectral.yaml, dredd-hooks.js, portman-config.json).
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { readFile } from 'node:fs/promises'
import { resolve } from 'node:path'
import { after, before, test } from 'node:test'

// The development key the sandbox accepts when started without --api-key.
const KEY = 'sandbox-dev-key'
const results = resolve(process.env.RESULTS_DIR ?? 'test-results')
let sandbox
let api = ''
let documentUrl = ''

/** Runs a command to its end: its exit code and everything it printed. */
function run(command, args, env = {}) {
  return new Promise((done, fail) => {
    const child = spawn(command, args, { env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let output = ''
    child.stdout.on('data', (chunk) => (output += chunk))
    child.stderr.on('data', (chunk) => (output += chunk))
    child.on('error', fail)
    child.on('close', (code) => done({ code, output }))
  })
}

/** The JUnit report's test cases: name and the failure's text, if any. */
async function testCases(file) {
  const xml = await readFile(file, 'utf8')
  return [...xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)].map(([, attributes, body = '']) => ({
    name: /\bname="([^"]*)"/.exec(attributes)?.[1] ?? '',
    failure: /<(failure|error)\b/.test(body) ? body : undefined,
    skipped: /<skipped\b/.test(body),
  }))
}

before(async () => {
  sandbox = spawn('node_modules/.bin/petstore-sandbox', ['serve', '--port', '0', '--quiet'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let log = ''
  sandbox.stdout.on('data', (chunk) => (log += chunk))
  sandbox.stderr.on('data', (chunk) => (log += chunk))
  const deadline = Date.now() + 30_000
  while (!(api = /^\s*API\s+(http:\/\/\S+)/m.exec(log)?.[1] ?? '')) {
    if (Date.now() > deadline || sandbox.exitCode !== null) throw new Error(`petstore-sandbox serve did not start:\n${log}`)
    await new Promise((done) => setTimeout(done, 100))
  }
  documentUrl = new URL('/__sandbox/openapi.json', api).href
})

after(() => {
  if (sandbox?.exitCode === null) process.kill(-sandbox.pid, 'SIGTERM')
})

test('the served document names the address the sandbox was reached at', async () => {
  const document = await (await fetch(documentUrl)).json()
  assert.equal(document.servers[0].url, api)
})

test('Spectral (spectral:oas) finds no problem in the served document', async () => {
  const { code, output } = await run('node_modules/.bin/spectral', [
    'lint', documentUrl, '--ruleset', '.spectral.yaml', '--fail-severity', 'warn', '--format', 'stylish',
  ])
  console.log(output)
  assert.equal(code, 0, output)
  assert.match(output, /No results with a severity of 'warn' or higher found!/)
})

test('Dredd: every documented response of every operation, against the sandbox', async () => {
  const report = `${results}/consumer-contract-tools-dredd.xml`
  const { code, output } = await run(
    'node_modules/.bin/dredd',
    [documentUrl, api, '--header', `Authorization: Bearer ${KEY}`, '--hookfiles', 'dredd-hooks.js', '--reporter', 'xunit',
      '--output', report, '--color', 'false'],
    { OPENAPI_URL: documentUrl },
  )
  console.log(output)
  const cases = await testCases(report)
  const document = await (await fetch(documentUrl)).json()
  const responses = Object.values(document.paths).flatMap((item) => Object.values(item).flatMap((operation) => Object.keys(operation.responses)))
  assert.equal(cases.length, responses.length, `one transaction per documented response:\n${output}`)
  assert.deepEqual(cases.filter((testCase) => testCase.failure || testCase.skipped), [], output)
  assert.equal(code, 0, output)
})

test("Portman's contract tests, generated from the served document and run by newman", async () => {
  const report = `${results}/consumer-contract-tools-portman.xml`
  const newman = { reporters: ['cli', 'junit'], reporter: { junit: { export: report } } }
  const { code, output } = await run('node_modules/.bin/portman', [
    '--url', documentUrl, '--baseUrl', api, '--portmanConfigFile', 'portman-config.json', '--output', 'collection.json',
    '--runNewman', '--newmanRunOptions', JSON.stringify(newman),
  ])
  console.log(output)
  const cases = await testCases(report)
  assert.ok(cases.length > 0, output)
  assert.deepEqual(cases.filter((testCase) => testCase.failure), [], output)
  assert.equal(code, 0, output)
  // Every operation of the document ran, with the dev key and without a valid one (newman's
  // report has a test suite per request, named after the operation's summary, after its folders).
  const suites = [...(await readFile(report, 'utf8')).matchAll(/<testsuite\b[^>]*\bname="([^"]*)"/g)].map(([, name]) => name)
  const ran = (request) => suites.some((suite) => suite === request || suite.endsWith(` / ${request}`))
  const document = await (await fetch(documentUrl)).json()
  for (const operation of Object.values(document.paths).flatMap((item) => Object.values(item))) {
    assert.ok(ran(operation.summary), `${operation.operationId} ran: ${suites.join(', ')}`)
    assert.ok(ran(`${operation.summary}[Unauthorized]`), `${operation.operationId} ran without a valid key: ${suites.join(', ')}`)
  }
})
