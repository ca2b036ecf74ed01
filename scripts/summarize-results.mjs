// Prints the closing "N passed, N failed" line from vitest's JSON report (CI reads it).
import { readFileSync } from 'node:fs'

const file = process.argv[2] ?? 'test-results/results.json'
let report
try {
  report = JSON.parse(readFileSync(file, 'utf8'))
} catch (error) {
  console.error(`No test results at ${file}: ${error.message}`)
  console.log('0 passed, 1 failed')
  process.exit(1)
}
const skipped = report.numPendingTests + report.numTodoTests
console.log(`${report.numPassedTests} passed, ${report.numFailedTests} failed${skipped ? `, ${skipped} skipped` : ''}`)
process.exit(report.numFailedTests > 0 || report.numTotalTests === 0 ? 1 : 0)
