/** How the command line reads option values (integers, sizes, latencies, lists, booleans) and its environment. */
import { availableParallelism } from 'node:os'
import { Latency } from '../contract/scenario-format.js'
import { UsageError } from './cli-io.js'

/** Repeated flags and comma-separated environment values alike: `--api-key a --api-key b`, `…_API_KEY=a,b`. */
export function list(values: unknown): string[] {
  const items = (Array.isArray(values) ? values : [values]).flatMap((value) => String(value).split(','))
  return items.map((item) => item.trim()).filter((item) => item !== '')
}

/** An integer from `min` to `max`, or a usage error naming `--<name>` (and what else it takes, `otherwise`). */
export function integer(name: string, min: number, max: number, otherwise = '') {
  return (value: unknown): number => {
    const text = String(value)
    const number = /^\d+$/.test(text) ? Number(text) : Number.NaN
    if (!(number >= min && number <= max)) {
      throw new UsageError(`--${name} must be an integer from ${min} to ${max}${otherwise}, got "${text}"`)
    }
    return number
  }
}

/**
 * yargs settings of an option holding a whole number from `min` to `max`: `--help` shows it as
 * `[number]`, and {@link integer} judges it.
 * @note `string` too, so that the parser hands over the text as typed: as a `number` alone, yargs
 * would read `1e3` and `0x10` as numbers and `abc` as NaN before {@link integer} could name them.
 */
export function integerOption(name: string, min: number, max: number) {
  return { type: 'number', string: true, coerce: integer(name, min, max) } as const
}

/**
 * yargs settings of an option holding a size (see {@link bytes}): a string as typed, the default
 * shown with its unit (`[default: 1 MiB]`).
 */
export function sizeOption(name: string): { type: 'string'; coerce: (value: unknown) => number }
export function sizeOption(name: string, defaultBytes: number): { type: 'string'; coerce: (value: unknown) => number; default: string; defaultDescription: string }
export function sizeOption(name: string, defaultBytes?: number) {
  const option = { type: 'string', coerce: bytes(name) } as const
  return defaultBytes === undefined ? option : { ...option, default: String(defaultBytes), defaultDescription: showBytes(defaultBytes) }
}

const UNITS: Readonly<Record<string, number>> = { '': 1, b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }

/** A size in bytes: `1048576`, `512KiB`, `64MiB`, `2GiB`. */
export function bytes(name: string) {
  return (value: unknown): number => {
    const text = String(value)
    const match = /^(\d+)\s*(b|kib|mib|gib)?$/i.exec(text.trim())
    const number = match ? Number(match[1]) * UNITS[(match[2] ?? '').toLowerCase()]! : Number.NaN
    if (!Number.isSafeInteger(number)) {
      throw new UsageError(`--${name} must be a size in bytes (1048576) or with a unit (512KiB, 64MiB, 2GiB), got "${text}"`)
    }
    return number
  }
}

/** `1048576` → `1 MiB`, for the start banner. */
export function showBytes(size: number): string {
  for (const [unit, factor] of [['GiB', 1024 ** 3], ['MiB', 1024 ** 2], ['KiB', 1024]] as const) {
    if (size >= factor) return `${Math.round((size / factor) * 10) / 10} ${unit}`
  }
  return `${size} bytes`
}

/** `--workers`: a count, or `auto` for one per core. */
export function workers(value: unknown): number {
  return String(value).trim().toLowerCase() === 'auto' ? availableParallelism() : integer('workers', 1, 1024, ', or auto (one per core)')(value)
}

/**
 * yargs settings of `--workers`: `--help` shows it as `[number]` (its description names `auto`),
 * and {@link workers} judges it.
 * @note `string` too, as in {@link integerOption}: `auto` reaches {@link workers} as typed.
 */
export function workersOption() {
  return { type: 'number', string: true, coerce: workers } as const
}

/** `250` (fixed) or `50-400` (a range drawn from per request), in milliseconds. */
export function latency(value: unknown): Latency {
  const text = String(value)
  const match = /^(\d+)(?:-(\d+))?$/.exec(text)
  const parsed = match && Latency.safeParse(match[2] === undefined ? Number(match[1]) : { min: Number(match[1]), max: Number(match[2]) })
  if (!parsed?.success) {
    throw new UsageError(`--latency must be milliseconds (250) or a range (50-400) within 0-60000, got "${text}"`)
  }
  return parsed.data
}

/** Every option may be set as `PETSTORE_SANDBOX_<OPTION>`: `PETSTORE_SANDBOX_MAX_TENANTS` is `--max-tenants`. */
export const ENV_PREFIX = 'PETSTORE_SANDBOX_'

/**
 * yargs' own `--help` and `--version` are actions, not settings: no variable runs them, nor is
 * refused for naming them (`PETSTORE_SANDBOX_VERSION` may well hold an image's version).
 */
const ACTIONS = new Set(['help', 'version'])

/** What a command's builder defined, as yargs records it (`getOptions()`): every option's name, and the booleans. */
export interface DefinedOptions {
  readonly key: Readonly<Record<string, unknown>>
  readonly boolean: readonly string[]
}

/**
 * The options a command's `PETSTORE_SANDBOX_*` variables set, by option name (`max-tenants: '5'`),
 * from the options its builder defined. A variable naming another command's option
 * (`elsewhere(name)` is true) is left to that command: a shell that exports `serve`'s
 * configuration runs `verify` too. One naming no option of any command is refused, naming it.
 * Reads booleans as containers write them (`1`, `yes`, `on`, `true`; `0`, `no`, `off`, `false`)
 * and refuses anything else, where yargs alone would quietly read `1` as false.
 */
export function environmentOptions(
  env: Readonly<Record<string, string | undefined>>,
  defined: DefinedOptions,
  elsewhere: (name: string) => boolean,
): { values: Record<string, string>; variables: Record<string, string> } {
  const options: Record<string, string> = {}
  const variables: Record<string, string> = {}
  for (const [variable, value] of Object.entries(env)) {
    if (!variable.startsWith(ENV_PREFIX) || value === undefined) continue
    const name = variable.slice(ENV_PREFIX.length).toLowerCase().split('_').filter((part) => part !== '').join('-')
    if (ACTIONS.has(name)) continue
    // @note Only names the builder defined reach yargs: it would read a configuration object's
    // `extends` as a file to load, and `.strict()` refuses the rest with no word of the variable.
    if (!Object.hasOwn(defined.key, name)) {
      if (elsewhere(name)) continue
      throw new UsageError(`${variable} names no option of any petstore-sandbox command: unset it or correct its name`)
    }
    if (!defined.boolean.includes(name)) options[name] = value
    else if (/^(1|true|yes|on)$/i.test(value.trim())) options[name] = 'true'
    else if (/^(0|false|no|off|)$/i.test(value.trim())) options[name] = 'false'
    else throw new UsageError(`${variable} must be true or false (1/0, yes/no, on/off), got "${value}"`)
    variables[name] = variable
  }
  return { values: options, variables }
}

/**
 * Whether `args` set option `name` with a flag (`--max-tenants 5`, `--max-tenants=5`,
 * `--maxTenants 5`, `--no-quiet`), which wins over its variable. Arguments after `--` set none.
 */
export function givenAsFlag(args: readonly string[], name: string): boolean {
  const camel = name.replace(/-([a-z])/g, (_, letter: string) => letter.toUpperCase())
  const flags = new Set([name, camel].flatMap((spelling) => [`--${spelling}`, `--no-${spelling}`]))
  const end = args.indexOf('--')
  return (end === -1 ? args : args.slice(0, end)).some((arg) => flags.has(arg.split('=', 1)[0]!))
}

/**
 * `message` (one that names options as `--<name>`, as every judgement here does) with each option
 * whose value a variable gave (`variables`: option name → variable) named by that variable too,
 * where the message first names it: `--port must be…` → `PETSTORE_SANDBOX_PORT (--port) must be…`.
 * The one place a refusal learns where a value came from, whichever judgement (a flag's own, a
 * rule between flags, the sandbox's options) wrote it.
 */
export function nameVariables(message: string, variables: ReadonlyMap<string, string>): string {
  let named = message
  for (const [name, variable] of variables) {
    named = named.replace(new RegExp(`(?<![\\w-])--${name}(?![\\w-])`), () => `${variable} (--${name})`)
  }
  return named
}

/** One of `choices`, or a usage error naming `--<name>` and them, in one line (yargs' own `choices` refusal takes three). */
export function oneOf<const T extends string>(name: string, choices: readonly T[]) {
  return (value: unknown): T => {
    const found = choices.find((choice) => choice === value)
    if (found === undefined) throw new UsageError(`--${name} must be ${choices.slice(0, -1).join(', ')} or ${choices.at(-1)}, got ${JSON.stringify(value)}`)
    return found
  }
}
