// Fails on a high or critical advisory in the runtime dependencies (npm audit --omit=dev).
// When the registry's audit endpoint cannot be reached, says so loudly and does not fail: no
// advisory data is not the same as a finding, and CI must not go red on a missing service.
import { spawnSync } from 'node:child_process'

const run = spawnSync('npm', ['audit', '--omit=dev', '--json'], { encoding: 'utf8' })
let report
try {
  report = JSON.parse(run.stdout)
} catch {
  console.error(`audit: npm audit printed no JSON (exit ${run.status}): ${run.stderr.trim().split('\n').pop()}`)
  process.exit(1)
}
const counts = report.metadata?.vulnerabilities
if (!counts) {
  const reason = report.message ?? report.error?.summary ?? 'no advisory data'
  console.log(`audit: NOT CHECKED, the audit endpoint did not answer (${reason})`)
  process.exit(0)
}
const serious = (counts.high ?? 0) + (counts.critical ?? 0)
console.log(
  `audit: ${counts.total ?? 0} advisories in runtime dependencies (${counts.critical ?? 0} critical, ${counts.high ?? 0} high, ${counts.moderate ?? 0} moderate, ${counts.low ?? 0} low)`,
)
process.exit(serious > 0 ? 1 : 0)
