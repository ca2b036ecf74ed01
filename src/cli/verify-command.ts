/** `petstore-sandbox verify <base-url> --api-key K`: the contract's conformance checks against a live deployment. */
import { writeFile } from 'node:fs/promises'
import { extname } from 'node:path'
import type { Argv } from 'yargs'
import { DEFAULT_DESCRIPTION_MAX_LENGTH, DEFAULT_NAME_MAX_LENGTH } from '../contract/limits.js'
import { PetstoreError } from '../core/petstore-error.js'
import { formatVerifyReport, formatVerifyTable, type VerifyReportFormat } from '../verify/verify-report.js'
import { DEFAULT_MAX_ANSWER_BYTES } from '../verify/answer-body.js'
import { verifyService } from '../verify/verify-service.js'
import { UsageError, type CliIo } from './cli-io.js'
import { integerOption, sizeOption } from './option-values.js'

/** Exit codes of `verify`: every check held; something broken; bad usage or no service to check. */
export const VERIFY_EXIT = { held: 0, broken: 1, usage: 2 } as const

const FORMATS: Readonly<Record<string, VerifyReportFormat>> = { '.xml': 'junit', '.json': 'json' }

export function verifyOptions(cli: Argv) {
  return cli
    .positional('base-url', { type: 'string', demandOption: true, describe: "The interface's base URL, ending in /v1 (http://127.0.0.1:4010/v1)" })
    .option('api-key', { type: 'string', demandOption: true, describe: 'A key the service accepts' })
    .option('wrong-key', { type: 'string', describe: 'A key the service rejects, for the 401 checks (default: verify-wrong-key- and random hex)' })
    .option('read-only', { type: 'boolean', default: false, describe: 'Send no POST: the checks that create are reported as not applicable' })
    .option('report', { type: 'string', describe: 'Also write the results to this file: JUnit XML (.xml) or JSON (.json)' })
    .option('report-format', { type: 'string', coerce: reportFormat, describe: 'junit or json, for a --report file of another extension' })
    .option('pet-id', { type: 'string', default: '1', describe: 'The pet the deprecated GET /pets/{petId} is asked for (200 or 404 alike: its headers are checked)' })
    .option('name-max-length', { ...integerOption('name-max-length', 1, 1_000_000), default: DEFAULT_NAME_MAX_LENGTH, describe: 'The longest name the service accepts' })
    .option('description-max-length', { ...integerOption('description-max-length', 1, 1_000_000), default: DEFAULT_DESCRIPTION_MAX_LENGTH, describe: 'The longest description the service accepts' })
    .option('timeout', { ...integerOption('timeout', 1, 600_000), default: 10000, describe: 'Milliseconds each request may take, its whole answer included' })
    .option('max-answer-bytes', { ...sizeOption('max-answer-bytes', DEFAULT_MAX_ANSWER_BYTES), describe: 'The most bytes of one answer read, a size (65536, 64MiB); a larger one stops the run' })
    .check((argv) => {
      if (argv['api-key'].trim() === '') throw new UsageError('--api-key must not be empty')
      if (argv.report === undefined && argv['report-format'] !== undefined) throw new UsageError('--report-format needs --report <file>')
      if (argv.report !== undefined && argv['report-format'] === undefined && FORMATS[extname(argv.report).toLowerCase()] === undefined) {
        throw new UsageError(`--report ${argv.report}: name a .xml (JUnit) or .json file, or add --report-format junit|json`)
      }
      return true
    })
}

export type VerifyArgs = Awaited<ReturnType<typeof verifyOptions>['argv']>

/** Runs the checks, prints the table, writes the report file; resolves with the exit code. */
export async function verify(argv: VerifyArgs, io: CliIo): Promise<number> {
  let report
  try {
    report = await verifyService({
      baseUrl: argv['base-url'],
      apiKey: argv['api-key'],
      wrongKey: argv['wrong-key'],
      readOnly: argv['read-only'],
      petId: argv['pet-id'],
      nameMaxLength: argv['name-max-length'],
      descriptionMaxLength: argv['description-max-length'],
      timeoutMs: argv.timeout,
      maxAnswerBytes: argv['max-answer-bytes'],
    })
  } catch (error) {
    // @note The library's option names (baseUrl, apiKey) become the flags a CLI user typed.
    if (error instanceof PetstoreError && (error.code === 'invalid_option' || error.code === 'upstream_unreachable' || error.code === 'upstream_nonconformant')) {
      throw new UsageError(
        error.message
          .replace(/\bbaseUrl\b/g, '<base-url>')
          .replace(/\bapiKey\b/g, '--api-key')
          .replace(/\bwrongKey\b/g, '--wrong-key')
          .replace(/\bmaxAnswerBytes\b/g, '--max-answer-bytes'),
      )
    }
    throw error
  }
  io.stdout(formatVerifyTable(report))
  if (argv.report !== undefined) {
    const format = argv['report-format'] ?? FORMATS[extname(argv.report).toLowerCase()]!
    try {
      await writeFile(argv.report, formatVerifyReport(report, format))
    } catch (error) {
      throw new UsageError(`Cannot write --report ${argv.report}: ${(error as Error).message}`)
    }
    io.stdout(`report: ${argv.report} (${format === 'junit' ? 'JUnit XML' : 'JSON'})\n`)
  }
  return report.summary.broken > 0 ? VERIFY_EXIT.broken : VERIFY_EXIT.held
}

/** `--report-format`: said in one line like the other flags. */
function reportFormat(value: unknown): VerifyReportFormat | undefined {
  if (value === undefined) return undefined
  if (value === 'junit' || value === 'json') return value
  throw new UsageError(`--report-format must be junit or json, got ${JSON.stringify(value)}`)
}
