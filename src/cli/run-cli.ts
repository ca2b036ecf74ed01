/**
 * The `petstore-sandbox` command line as a function: it parses `args`, runs the command, writes
 * through `io`, and resolves with the exit code, never exiting the process itself; `src/cli.ts`
 * (the installed binary) owns the process: signals and exit.
 */
import yargs, { type Argv } from 'yargs'
import { PACKAGE } from '../server/package-info.js'
import { type CliIo, UsageError } from './cli-io.js'
import { type DefinedOptions, environmentOptions, givenAsFlag, nameVariables } from './option-values.js'
import { recordCommand, recordOptions } from './record-command.js'
import { listScenarios, validateScenarios } from './scenarios-command.js'
import { type RunningSandbox, serve, serveOptions } from './serve-command.js'
import { tenantsCommand } from './tenants-command.js'
import { VERIFY_EXIT, verify, verifyOptions } from './verify-command.js'
import { isWorker } from './serve-workers.js'

export type { CliIo } from './cli-io.js'
export type { RunningSandbox } from './serve-command.js'

/** How a run ended, or, for `serve`, the sandbox it left running. */
export interface CliResult {
  /**
   * 0 when the command succeeded, 1 for a usage error or a failure (reported on `io.stderr`);
   * 2 when the service a command was pointed at stopped it (`verify`: no service to check;
   * `scenarios record`: a refused key, no answer, an answer the contract refuses); `verify`: 1
   * when a check broke.
   */
  readonly exitCode: number
  /** `serve`, once it answers: stop it with `server.stop('SIGTERM')`. */
  readonly server?: RunningSandbox
  /**
   * `serve --workers N` (N > 1), options checked: the caller runs the node:cluster primary with N
   * workers (`runWorkers` in `serve-workers.ts`), each of which runs this command again as a worker.
   */
  readonly workers?: number
}

/** The option every command takes. */
function globalOptions(cli: Argv) {
  return cli.option('verbose', { type: 'boolean', default: false, describe: 'Print stack traces of errors' })
}

/** `scenarios list`. */
function listOptions(cli: Argv) {
  return cli.option('scenarios-dir', { type: 'string', describe: 'Directory of <name>.json scenarios' })
}

/** `scenarios validate <file...>`. */
function validateOptions(cli: Argv) {
  return cli.positional('file', { type: 'string', array: true, demandOption: true })
}

/** `tenants list|delete`. */
function tenantsOptions(cli: Argv) {
  return cli.option('data-dir', { type: 'string', demandOption: true, describe: 'The data directory the server uses' })
}

/** `tenants delete <id>`. */
function deleteOptions(cli: Argv) {
  return cli.positional('id', { type: 'string', demandOption: true })
}

/**
 * Every command's options, so that a command leaves alone the `PETSTORE_SANDBOX_*` variables of
 * the others' (a shell set up for `serve` runs `verify` too) and refuses only a variable that
 * names none. A command registered below without its options here would see them refused by
 * the others (test/cli/environment.test.ts sets a variable for every option every --help lists).
 */
const EVERY_COMMAND: readonly ((cli: Argv) => Argv<unknown>)[] = [globalOptions, serveOptions, listOptions, validateOptions, recordOptions, verifyOptions, tenantsOptions, deleteOptions]

/** What a builder defined, as yargs records it. */
function definedOptions(cli: Argv<unknown>): DefinedOptions {
  // @note yargs 18 has getOptions() (its own reading of its options); @types/yargs leaves it out.
  return (cli as Argv<unknown> & { getOptions(): DefinedOptions }).getOptions()
}

let everyOption: ReadonlySet<string> | undefined

/** Whether some command has an option `name`; its options are read once, when a variable is not the running command's. */
function isAnyCommandsOption(name: string): boolean {
  everyOption ??= new Set(EVERY_COMMAND.flatMap((builder) => Object.keys(definedOptions(builder(yargs([]))).key)))
  return everyOption.has(name)
}

/** Runs `petstore-sandbox <args>`; resolves when the command has finished or, for `serve`, once the server is up. */
export async function runCli(args: readonly string[], io: CliIo): Promise<CliResult> {
  const red = (text: string) => (io.color ? `\x1b[31m${text}\x1b[39m` : text)
  /** The options of the running command that a `PETSTORE_SANDBOX_*` variable set (no flag did), by name: their variables. */
  const fromEnvironment = new Map<string, string>()
  const fail = (error: unknown, verbose: boolean): CliResult => {
    const message = error instanceof Error ? error.message : String(error)
    // @note One line, whatever the message holds: yargs puts what it refused on the next lines
    // ("Invalid values:\n  Argument: log, Given: …, Choices: …").
    const line = nameVariables(message.split('\n').map((part) => part.trim()).filter((part) => part !== '').join(' '), fromEnvironment)
    io.stderr(`${red(`petstore-sandbox: ${line}`)}\n`)
    if (verbose && error instanceof Error && error.stack) io.stderr(`${error.stack}\n`)
    // @note `verify` keeps 1 for "the service broke a check", so that CI tells it from a mistyped command.
    return { exitCode: args.find((arg) => !arg.startsWith('-')) === 'verify' ? VERIFY_EXIT.usage : 1 }
  }

  let verbose = args.includes('--verbose')
  /**
   * A command's builder, then the variables of the options it defined, as a configuration object
   * rather than yargs' .env(), which reads process.env itself and every variable alike: same
   * precedence (a flag wins), from the environment given, and only the running command's options.
   */
  const withEnvironment =
    <T, U>(builder: (cli: Argv<T>) => Argv<U>) =>
    (cli: Argv<T>): Argv<U> => {
      const defined = builder(cli)
      const environment = environmentOptions(io.env, definedOptions(defined), isAnyCommandsOption)
      if (environment.values['verbose'] === 'true') verbose = true
      for (const [name, variable] of Object.entries(environment.variables)) {
        if (!givenAsFlag(args, name)) fromEnvironment.set(name, variable)
      }
      return defined.config(environment.values)
    }
  let exitCode = 0
  let server: RunningSandbox | undefined
  let workers: number | undefined
  let output = ''
  const cli = globalOptions(yargs([...args]).scriptName('petstore-sandbox').usage('$0 <command> [options]').exitProcess(false))
    .command('serve', 'Start the sandbox server', withEnvironment(serveOptions), async (argv) => {
      if (argv.workers > 1 && !isWorker()) workers = argv.workers
      else server = await serve(argv, io)
    })
    .command('scenarios', 'List, validate or record scenarios', (scenarios) =>
      scenarios
        .command(
          'list',
          'List the scenarios serve --scenario accepts',
          withEnvironment(listOptions),
          (argv) => listScenarios(argv['scenarios-dir'], io),
        )
        .command(
          'validate <file...>',
          'Check scenario files (and the fixtures they name); exit 1 if any is broken',
          withEnvironment(validateOptions),
          async (argv) => {
            exitCode = await validateScenarios(argv.file, io, red)
          },
        )
        .command(
          'record',
          "Record a live service's categories, orders and pets into a scenario file; exit 2 if the service refuses the key, cannot be reached or answers what the contract refuses",
          withEnvironment(recordOptions),
          async (argv) => {
            exitCode = await recordCommand(argv, io, red)
          },
        )
        .demandCommand(1, 'Name a scenarios command: list, validate or record'),
    )
    .command('verify <base-url>', 'Run the contract\'s conformance checks against a live deployment; exit 1 if any breaks', withEnvironment(verifyOptions), async (argv) => {
      exitCode = await verify(argv, io)
    })
    .command('tenants', 'List or delete the tenants a data directory keeps (the server must be stopped; while it runs, use DELETE /__sandbox/tenants/<id>)', (cmd) =>
      tenantsOptions(cmd)
        .command('list', 'List stored tenants: id, scenario, categories, last use', withEnvironment((sub) => sub), (argv) => tenantsCommand(String(argv['data-dir']), undefined, io))
        .command('delete <id>', "Delete a tenant's data (its full id, or a unique prefix of 12+ digits)", withEnvironment(deleteOptions), (argv) => tenantsCommand(String(argv['data-dir']), argv.id, io))
        .demandCommand(1, 'Name a tenants command: list or delete'),
    )
    .demandCommand(1, 'Name a command: serve, scenarios, tenants or verify')
    .strict()
    .version(PACKAGE.version)
    .help()
    // @note yargs renders the help text on every run of a command (to cache it); wrapping it to the
    // terminal is a sixth of a start's CPU, so only a run that prints it wraps it.
    .wrap(args.some((arg) => arg === '--help' || arg.startsWith('--help=')) ? Math.min(110, io.columns ?? 110) : null)
    .fail((message, error) => {
      // yargs' instance, set up for the command parsed (its types leave out getOptions, which it has): the options it knows.
      throw error ?? new UsageError(withSuggestion(message, Object.keys((cli as unknown as { getOptions(): { key: Record<string, unknown> } }).getOptions().key)))
    })
  try {
    // @note With a callback, yargs hands over the text of --help and --version instead of printing it.
    await cli.parseAsync([...args], {}, (_error, _argv, text) => {
      output = text
    })
  } catch (error) {
    return fail(error, verbose)
  }
  if (output !== '') io.stdout(`${output}\n`)
  return server ? { exitCode, server } : workers !== undefined ? { exitCode, workers } : { exitCode }
}

/**
 * yargs' "Unknown argument: apikey", with the option meant when one is near it (`--api-key`).
 * @note Said with no suggestion, `--apikey` left a new user to read the whole help (trial38).
 */
export function withSuggestion(message: string, known: readonly string[]): string {
  const unknown = /^Unknown arguments?: (.+)$/.exec(message)?.[1]
  if (unknown === undefined) return message
  // yargs names an unknown dashed option twice, as given and camel-cased: one suggestion for both.
  const meant = [...new Set(unknown.split(', ').map((name) => nearest(name, known)))].filter((name) => name !== undefined)
  return meant.length === 0 ? message : `${message} (did you mean ${meant.map((name) => `--${name}`).join(', ')}?)`
}

/** The known option nearest `name`: the same but for case, dashes and underscores, or within two edits of it; undefined when none is. */
function nearest(name: string, known: readonly string[]): string | undefined {
  const bare = (text: string) => text.toLowerCase().replace(/[-_]/g, '')
  const options = known.filter((option) => option.length > 1 && !/[A-Z]/.test(option))
  const same = options.find((option) => bare(option) === bare(name))
  if (same !== undefined) return same
  let best: { option: string; distance: number } | undefined
  for (const option of options) {
    const distance = editDistance(bare(name), bare(option))
    if (distance <= Math.min(2, Math.floor(bare(name).length / 3)) && (best === undefined || distance < best.distance)) best = { option, distance }
  }
  return best?.option
}

/** The edits (a character added, removed, changed, or two side by side swapped) from `a` to `b`. */
function editDistance(a: string, b: string): number {
  const d = Array.from({ length: a.length + 1 }, (_, i) => Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)))
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      d[i]![j] = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1))
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i]![j] = Math.min(d[i]![j]!, d[i - 2]![j - 2]! + 1)
    }
  }
  return d[a.length]![b.length]!
}
