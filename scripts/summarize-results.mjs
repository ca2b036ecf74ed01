// Prints the closing "N passed, N failed" line from the JSON reports of vitest and Jest (same
// shape) and Playwright (`stats`): the main suite's and the packed-package consumers' (CI reads
// it). A report that is missing counts as a failure.
import { readFileSync } from 'node:fs'

const files = process.argv.length > 2 ? process.argv.slice(2) : ['test-results/results.json']
let passed = 0
let failed = 0
let skipped = 0
let total = 0
for (const file of files) {
  let report
  try {
    report = JSON.parse(readFileSync(file, 'utf8'))
  } catch (error) {
    console.error(`No test results at ${file}: ${error.message}`)
    failed++
    continue
  }
  if (report.stats && report.numTotalTests === undefined) {
    // Playwright: expected and flaky passed in the end, unexpected failed.
    const { expected = 0, unexpected = 0, flaky = 0, skipped: notRun = 0 } = report.stats
    passed += expected + flaky
    failed += unexpected
    skipped += notRun
    total += expected + unexpected + flaky + notRun
    continue
  }
  passed += report.numPassedTests
  failed += report.numFailedTests
  skipped += report.numPendingTests + report.numTodoTests
  total += report.numTotalTests
}
console.log(`${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}`)
process.exit(failed > 0 || total === 0 ? 1 : 0)
