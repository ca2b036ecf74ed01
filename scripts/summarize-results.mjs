// Prints the closing "N passed, N failed" line from the JSON reports of vitest and Jest (same
// shape) and Playwright (`stats`), and from JUnit XML (`node --test`, `bun test`): the main suite's and the packed-package consumers' (CI reads
// it). A report that is missing counts as a failure. Each failed test is named, with the first
// lines of its error, just above that line: CI's record keeps only the end of the output.
import { readFileSync } from 'node:fs'

/** The failures to name at the end, as `report: test: first lines of the error`. */
const named = []
const firstLines = (message = '') =>
  message
    .replace(/\u001b\[[0-9;]*m/g, '')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .slice(0, 3)
    .join(' / ')
    .slice(0, 400)

/** Playwright's failed tests: specs in nested suites, a test failed when its status is unexpected. */
function playwrightFailures(suites, file, titles = []) {
  for (const suite of suites ?? []) {
    const path = [...titles, suite.title]
    for (const spec of suite.specs ?? []) {
      for (const test of spec.tests ?? []) {
        if (test.status !== 'unexpected') continue
        const error = test.results?.at(-1)?.errors?.[0]?.message
        const project = test.projectName ? ` [${test.projectName}]` : ''
        named.push(`${file}: ${[...path, spec.title].join(' › ')}${project}: ${firstLines(error)}`)
      }
    }
    playwrightFailures(suite.suites, file, path)
  }
}

const attribute = (attributes, name) =>
  (new RegExp(`\\b${name}="([^"]*)"`).exec(attributes)?.[1] ?? '')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&apos;/g, "'")
    .replace(/&amp;/g, '&')

/** A JUnit report's counts: each `<testcase>` failed with a `<failure>` or `<error>`, skipped with a `<skipped>`. */
function junitCounts(xml, file) {
  const counts = { passed: 0, failed: 0, skipped: 0 }
  for (const [, attributes = '', body = ''] of xml.matchAll(/<testcase\b([^>]*?)(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const problem = /<(failure|error)\b([^>]*)>?/.exec(body)
    if (problem) {
      counts.failed++
      const message = attribute(problem[2] ?? '', 'message') || body.replace(/<[^>]*>/g, '')
      named.push(`${file}: ${attribute(attributes, 'classname')} › ${attribute(attributes, 'name')}: ${firstLines(message)}`)
    } else if (/<skipped\b/.test(body)) counts.skipped++
    else counts.passed++
  }
  return counts
}

const files = process.argv.length > 2 ? process.argv.slice(2) : ['test-results/results.json']
let passed = 0
let failed = 0
let skipped = 0
let total = 0
for (const file of files) {
  let report
  try {
    const text = readFileSync(file, 'utf8')
    if (text.trimStart().startsWith('<')) {
      const counts = junitCounts(text, file)
      if (counts.passed + counts.failed + counts.skipped === 0) {
        named.push(`${file}: the report holds no test`)
        failed++
      }
      passed += counts.passed
      failed += counts.failed
      skipped += counts.skipped
      total += counts.passed + counts.failed + counts.skipped
      continue
    }
    report = JSON.parse(text)
  } catch (error) {
    console.error(`No test results at ${file}: ${error.message}`)
    named.push(`${file}: no report (${error.message.split('\n')[0]})`)
    failed++
    continue
  }
  if (report.stats && report.numTotalTests === undefined) {
    // Playwright: expected and flaky passed in the end, unexpected failed.
    const { expected = 0, unexpected = 0, flaky = 0, skipped: notRun = 0 } = report.stats
    passed += expected + flaky
    failed += unexpected
    playwrightFailures(report.suites, file)
    // Errors outside any test (a spec that failed to load, a web server that never started).
    for (const error of report.errors ?? []) {
      named.push(`${file}: ${firstLines(error.message)}`)
      failed++
    }
    skipped += notRun
    total += expected + unexpected + flaky + notRun
    continue
  }
  passed += report.numPassedTests
  failed += report.numFailedTests
  for (const suite of report.testResults ?? []) {
    const failures = (suite.assertionResults ?? []).filter((test) => test.status === 'failed')
    for (const test of failures) named.push(`${file}: ${suite.name} › ${test.fullName}: ${firstLines(test.failureMessages?.[0])}`)
    // A file that failed outside any test (an import, a hook) has no failed test to name or count.
    if (failures.length === 0 && suite.status === 'failed') {
      named.push(`${file}: ${suite.name}: ${firstLines(suite.message)}`)
      failed++
    }
  }
  skipped += report.numPendingTests + report.numTodoTests
  total += report.numTotalTests
}
if (named.length > 0) console.log(`Failed:\n${named.map((line) => `- ${line}`).join('\n')}`)
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`)
process.exit(failed > 0 || total === 0 ? 1 : 0)
