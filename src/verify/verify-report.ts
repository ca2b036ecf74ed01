/** A {@link VerifyReport} as people and CI read it: a table, JUnit XML, JSON. */
import type { VerifyCheck, VerifyExchange, VerifyOutcome, VerifyReport } from './verify-service.js'

/** The formats `verify --report` writes. */
export type VerifyReportFormat = 'junit' | 'json'

const LABELS: Readonly<Record<VerifyOutcome, string>> = { held: 'held', broken: 'broken', not_applicable: 'n/a' }

/** The request and the answer of a broken check, a line each header, the bodies as sent and received. */
export function exchangeText(exchange: VerifyExchange): string[] {
  const { request, response } = exchange
  const lines = [`${request.method} ${request.url}`, ...Object.entries(request.headers).map(([name, value]) => `${name}: ${value}`)]
  if (request.body !== undefined) lines.push(request.body === '' ? '(empty body)' : request.body)
  if (response === undefined) return [...lines, '→ no answer']
  lines.push(`→ ${response.status}`, ...Object.entries(response.headers).map(([name, value]) => `${name}: ${value}`))
  if (response.body !== '') lines.push(response.body)
  return lines
}

/**
 * The table `verify` prints: a line per check, and under each broken one what differs, the request and the answer.
 * @example process.stdout.write(formatVerifyTable(await verifyService({ baseUrl, apiKey })))
 */
export function formatVerifyTable(report: VerifyReport): string {
  const width = Math.max(...report.checks.map((check) => check.id.length))
  const lines = [`petstore-sandbox verify ${report.baseUrl}${report.readOnly ? ' (read-only)' : ''}`, '']
  for (const check of report.checks) {
    lines.push(`${LABELS[check.outcome].padEnd(6)}  ${check.id.padEnd(width)}  ${check.title}${check.note === undefined ? '' : ` (${check.note})`}`)
    if (check.outcome !== 'broken') continue
    for (const problem of check.problems) lines.push(`        - ${problem}`)
    if (check.exchange) lines.push(...exchangeText(check.exchange).map((line) => `          ${line}`))
  }
  const { held, broken, notApplicable } = report.summary
  lines.push('', `${held} held, ${broken} broken, ${notApplicable} not applicable`, '')
  return lines.join('\n')
}

/**
 * The report as JSON: the {@link VerifyReport} itself.
 * @example await writeFile('verify.json', formatVerifyJson(report))
 */
export function formatVerifyJson(report: VerifyReport): string {
  return `${JSON.stringify(report, null, 2)}\n`
}

/** Characters XML 1.0 cannot hold (controls but tab and line breaks, unpaired surrogates, U+FFFE/U+FFFF) shown as `\uXXXX`. */
const NOT_XML = /[^\t\n\r\x20-\ud7ff\ue000-\ufffd\u{10000}-\u{10ffff}]/gu

function xml(text: string): string {
  return text
    .replace(NOT_XML, (character) => `\\u${character.charCodeAt(0).toString(16).padStart(4, '0')}`)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
}

function testcase(check: VerifyCheck): string {
  const open = `    <testcase classname="${xml(check.operation)}" name="${xml(`${check.id}: ${check.title}`)}">`
  switch (check.outcome) {
    case 'held':
      return `${open}</testcase>`
    case 'not_applicable':
      return `${open}<skipped message="${xml(check.note ?? '')}"/></testcase>`
    case 'broken': {
      const details = [...check.problems.map((problem) => `- ${problem}`), ...(check.exchange ? ['', ...exchangeText(check.exchange)] : [])].join('\n')
      return `${open}\n      <failure message="${xml(check.problems.join('; '))}" type="contract">${xml(details)}</failure>\n    </testcase>`
    }
  }
}

/**
 * The report as JUnit XML: a test case per check, `failure` for a broken one, `skipped` for one not applicable.
 * @example await writeFile('verify.xml', formatVerifyJunit(report))
 */
export function formatVerifyJunit(report: VerifyReport): string {
  const { checks, summary } = report
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    `<testsuites name="petstore-sandbox verify" tests="${checks.length}" failures="${summary.broken}" skipped="${summary.notApplicable}">`,
    `  <testsuite name="${xml(`verify ${report.baseUrl}`)}" tests="${checks.length}" failures="${summary.broken}" errors="0" skipped="${summary.notApplicable}">`,
    ...checks.map(testcase),
    '  </testsuite>',
    '</testsuites>',
    '',
  ].join('\n')
}

/** The report in `format`. */
export function formatVerifyReport(report: VerifyReport, format: VerifyReportFormat): string {
  return format === 'junit' ? formatVerifyJunit(report) : formatVerifyJson(report)
}
