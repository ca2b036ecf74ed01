/**
 * Live reload for scenario authors (`serve --watch`): the start scenario's file, every fixture it
 * names, and the files of `--scenarios-dir` are watched; an edit is validated by the same loader
 * as at start and, when whole, handed to {@link ScenarioWatcherOptions.apply}. A broken edit
 * (invalid JSON, a schema error, a fixture gone) changes nothing: the last good version keeps
 * serving, and the reason is reported (one log line) and kept for `GET /__sandbox/health`.
 *
 * @note fs.watch on the files' directories, not on the files: an editor saving through a
 * temporary file and a rename replaces the file, which a watch on the file itself would lose
 * (inotify follows the inode). A directory watch sees every later save; events are filtered by
 * name and debounced, since one save is several events (truncate, write, rename).
 */
import { statSync, watch, type FSWatcher } from 'node:fs'
import { readdir, stat } from 'node:fs/promises'
import { basename, dirname, join, resolve } from 'node:path'
import { PetstoreError } from '../core/petstore-error.js'
import { ScenarioName, type Scenario } from '../contract/scenario-format.js'
import { checkOwnName, loadScenarioFile, looksLikePath, withoutPaths, type ScenarioInput } from '../scenario/scenario-loader.js'

/** How long after a file's last event it is read: one save is several events. */
const DEBOUNCE_MS = 50

/**
 * How often the watched directories are checked to be the ones watched: a directory deleted and
 * made again is another directory, and the watch on the old one hears nothing (attack5 W2).
 */
const DIRECTORY_CHECK_MS = 1000

/**
 * A directory's identity (device, inode and birth time: a directory made again at once often gets
 * the inode the deleted one had), or undefined when it is not there.
 */
function directoryIdentity(dir: string): string | undefined {
  try {
    const found = statSync(dir)
    return found.isDirectory() ? `${found.dev}:${found.ino}:${found.birthtimeMs}` : undefined
  } catch {
    return undefined
  }
}

/**
 * What one reload did (`onReload` of `createSandboxApp`): took up a new version, or refused a broken edit.
 * @example onReload: (reload) => console.log(reload.message)
 */
export interface ScenarioReload {
  /** The scenario file (also when the edit was to a fixture it names). */
  readonly file: string
  /** The scenario served from now on: the new version, or the last good one when `error` is set. */
  readonly scenario: Scenario | undefined
  /** Why the edit was refused (the loader's message, with paths). */
  readonly error?: string | undefined
  /** The one log line that says it. */
  readonly message: string
}

/**
 * What `GET /__sandbox/health` shows of the watch as `watch` (file names only, never directories).
 * @example { scenario: 'shop', version: '1.1.0', files: 2, reloadedAt: '2026-11-26T17:40:02.113Z', errors: [] }
 */
export interface WatchStatus {
  /** The start scenario as served now. */
  readonly scenario: string
  readonly version: string
  /** How many files are watched (scenario files and fixtures). */
  readonly files: number
  /** When an edit was last taken up (ISO 8601), or null before the first. */
  readonly reloadedAt: string | null
  /** Scenario files whose last edit was refused, and why: each keeps serving its last good version. */
  readonly errors: readonly { readonly file: string; readonly error: string }[]
}

export interface ScenarioWatcherOptions {
  /** The start scenario's file (undefined for a built-in), what was loaded from it, and the files read doing so. */
  readonly start: { readonly file: string; readonly scenario: Scenario; readonly files: Iterable<string> } | undefined
  /** The directory of switchable scenarios, watched for `<name>.json`. */
  readonly scenariosDir: string | undefined
  /** The start scenario's name (a built-in's too): no file of `scenariosDir` but the start file may replace it. */
  readonly startName: string
  /** Takes up a new version of a scenario (same name as before). */
  readonly apply: (scenario: Scenario) => void
  /** Told of every reload, good or refused. */
  readonly report: (reload: ScenarioReload) => void
}

/** One scenario file and the fixtures its last load read. */
interface Source {
  readonly file: string
  readonly start: boolean
  files: Set<string>
  current: Scenario | undefined
  error: string | undefined
  timer: NodeJS.Timeout | undefined
  running: Promise<void> | undefined
  again: boolean
}

/**
 * The file the start scenario was read from, when it is one: a path, or a name found in
 * `scenariosDir`; undefined for a built-in or a scenario object (nothing to watch).
 */
export async function startScenarioFile(input: ScenarioInput, scenariosDir: string | undefined): Promise<string | undefined> {
  if (typeof input !== 'string') return undefined
  if (looksLikePath(input)) return resolve(input)
  if (scenariosDir === undefined) return undefined
  const file = resolve(scenariosDir, `${input}.json`)
  return (await isFile(file)) ? file : undefined
}

function isFile(file: string): Promise<boolean> {
  return stat(file).then(
    (found) => found.isFile(),
    () => false,
  )
}

export class ScenarioWatcher {
  readonly #options: ScenarioWatcherOptions
  readonly #sources = new Map<string, Source>()
  readonly #watchers = new Map<string, FSWatcher>()
  /** The identity of each directory when its watch began. */
  readonly #identities = new Map<string, string | undefined>()
  #checker: NodeJS.Timeout | undefined
  readonly #dir: string | undefined
  #reloadedAt: string | null = null
  #closed = false

  constructor(options: ScenarioWatcherOptions) {
    this.#options = options
    this.#dir = options.scenariosDir === undefined ? undefined : resolve(options.scenariosDir)
    const { start } = options
    if (start) this.#sources.set(start.file, this.#source(start.file, true, start.scenario, new Set(start.files)))
  }

  /** Reads the directory's scenarios (to learn their fixtures and report broken ones), then starts watching. */
  async start(): Promise<void> {
    if (this.#dir !== undefined) {
      for (const entry of await readdir(this.#dir).catch((): string[] => [])) {
        const file = join(this.#dir, entry)
        if (this.#sources.has(file) || !isScenarioFileName(entry)) continue
        const source = this.#source(file, false, undefined, new Set([file]))
        this.#sources.set(file, source)
        await this.#load(source, false)
      }
    }
    this.#arm()
    this.#checker = setInterval(() => this.#checkDirectories(), DIRECTORY_CHECK_MS)
    this.#checker.unref()
  }

  /**
   * Watches again a directory deleted and made again (or made at last), and reads again the
   * sources with files in it: what was saved there meanwhile is taken up.
   */
  #checkDirectories(): void {
    if (this.#closed) return
    let changed = false
    for (const dir of this.#wantedDirectories()) {
      const identity = directoryIdentity(dir)
      if (identity === this.#identities.get(dir) && (identity === undefined || this.#watchers.has(dir))) continue
      changed = true
      this.#watchers.get(dir)?.close()
      this.#watchers.delete(dir)
      this.#identities.delete(dir)
      for (const source of this.#sources.values()) if ([...source.files].some((file) => dirname(file) === dir)) this.#schedule(source)
    }
    if (changed) this.#arm()
  }

  /** Every directory holding a watched file, and the scenarios directory. */
  #wantedDirectories(): Set<string> {
    const dirs = new Set<string>()
    if (this.#dir !== undefined) dirs.add(this.#dir)
    for (const source of this.#sources.values()) for (const file of source.files) dirs.add(dirname(file))
    return dirs
  }

  /** The watch as health shows it. */
  status(): WatchStatus {
    const start = [...this.#sources.values()].find((source) => source.start)?.current
    const files = new Set<string>()
    for (const source of this.#sources.values()) for (const file of source.files) files.add(file)
    return {
      scenario: start?.name ?? '',
      version: start?.version ?? '',
      files: files.size,
      reloadedAt: this.#reloadedAt,
      // Health is read without a key: every path cut to its last part (the operator's log has them).
      errors: [...this.#sources.values()].flatMap((source) => (source.error === undefined ? [] : [{ file: basename(source.file), error: withoutPaths(source.error, [...source.files]) }])),
    }
  }

  /**
   * The last good version of the `--scenarios-dir` scenario `name` this watch read (not the start scenario's), or
   * undefined when it read none: what a switch or reset serves while the file is broken (a save under way).
   */
  lastGood(name: string): Scenario | undefined {
    if (this.#dir === undefined || this.#closed) return undefined
    const source = this.#sources.get(join(this.#dir, `${name}.json`))
    return source === undefined || source.start ? undefined : source.current
  }

  /** How many files are watched (the banner says it). */
  get fileCount(): number {
    return this.status().files
  }

  /** Stops every watch and pending reload. */
  close(): void {
    this.#closed = true
    clearInterval(this.#checker)
    for (const watcher of this.#watchers.values()) watcher.close()
    this.#watchers.clear()
    for (const source of this.#sources.values()) clearTimeout(source.timer)
  }

  #source(file: string, start: boolean, current: Scenario | undefined, files: Set<string>): Source {
    return { file, start, files, current, error: undefined, timer: undefined, running: undefined, again: false }
  }

  /** Watches every directory holding a watched file (and the scenarios directory); lets go of the others. */
  #arm(): void {
    if (this.#closed) return
    const dirs = this.#wantedDirectories()
    for (const [dir, watcher] of this.#watchers) {
      if (!dirs.has(dir)) {
        watcher.close()
        this.#watchers.delete(dir)
      }
    }
    for (const dir of dirs) {
      if (this.#watchers.has(dir)) continue
      this.#identities.set(dir, directoryIdentity(dir))
      try {
        const watcher = watch(dir, { persistent: false }, (_event, name) => this.#changed(dir, name === null ? undefined : String(name)))
        // A directory removed under the watch: it is watched again once a reload reads from it.
        watcher.on('error', () => {
          watcher.close()
          if (this.#watchers.get(dir) === watcher) this.#watchers.delete(dir)
        })
        this.#watchers.set(dir, watcher)
      } catch {
        // A directory that does not exist (a fixture's, mistyped): the error is the source's to report.
      }
    }
  }

  /** A file changed in `dir` (`name` unknown on some systems: every source there is read again). */
  #changed(dir: string, name: string | undefined): void {
    const path = name === undefined ? undefined : join(dir, name)
    let matched = false
    for (const source of this.#sources.values()) {
      const hit = path === undefined ? [...source.files].some((file) => dirname(file) === dir) : source.files.has(path)
      if (hit) {
        matched = true
        this.#schedule(source)
      }
    }
    // A new scenario file in the directory: read, so a broken one is reported (a switch reads it anyway).
    if (!matched && path !== undefined && dir === this.#dir && name !== undefined && isScenarioFileName(name)) {
      const source = this.#source(path, false, undefined, new Set([path]))
      this.#sources.set(path, source)
      this.#schedule(source)
    }
  }

  #schedule(source: Source): void {
    clearTimeout(source.timer)
    source.timer = setTimeout(() => this.#run(source), DEBOUNCE_MS)
    source.timer.unref()
  }

  /** Reloads one source; an event during a reload reads the files once more after it. */
  #run(source: Source): void {
    if (this.#closed) return
    if (source.running) {
      source.again = true
      return
    }
    source.running = this.#load(source, true).finally(() => {
      source.running = undefined
      this.#arm()
      if (source.again) {
        source.again = false
        this.#run(source)
      }
    })
  }

  /** Loads a source's file whole; on success takes it up (`apply`), else keeps the last good version. */
  async #load(source: Source, reload: boolean): Promise<void> {
    const files = new Set<string>()
    let scenario: Scenario
    try {
      if (!source.start && !(await isFile(source.file))) {
        // A switchable scenario deleted: tenants on it keep the version they have.
        this.#sources.delete(source.file)
        return
      }
      scenario = await loadScenarioFile(source.file, (path) => files.add(resolve(path)))
      const previous = source.current
      // @note A file of the scenarios directory is its own scenario only (attack5 W1: a backup
      // `shop-backup.json` named "shop", or a `mine.json` named "default", replaced the start seed).
      if (!source.start) checkOwnName(scenario, source.file)
      if (!source.start && scenario.name === this.#options.startName) {
        throw new PetstoreError('invalid_scenario', `Invalid scenario ${source.file}: "${scenario.name}" is the start scenario, served from ${this.#options.start === undefined ? 'the package' : 'its own file'}; this file cannot replace it`)
      }
      if (previous !== undefined && scenario.name !== previous.name) {
        throw new PetstoreError(
          'invalid_scenario',
          `Invalid scenario ${source.file}: its name changed from "${previous.name}" to "${scenario.name}"; saved tenants name it, so a rename needs a restart`,
        )
      }
    } catch (error) {
      if (!(error instanceof PetstoreError)) throw error
      // The last good version's files stay watched beside those this read reached (a fixture missing).
      source.files = new Set([source.file, ...source.files, ...files])
      source.error = error.message
      const kept = source.current === undefined ? 'not served' : `still serving ${source.current.name} ${source.current.version}`
      this.#options.report({ file: source.file, scenario: source.current, error: error.message, message: `scenario not reloaded: ${error.message} (${kept})` })
      return
    }
    source.files = files
    source.error = undefined
    source.current = scenario
    if (!reload || this.#closed) return
    this.#options.apply(scenario)
    this.#reloadedAt = new Date().toISOString()
    this.#options.report({ file: source.file, scenario, message: `scenario reloaded: ${scenario.name} ${scenario.version} from ${source.file}` })
  }
}

function isScenarioFileName(name: string): boolean {
  return name.endsWith('.json') && ScenarioName.safeParse(name.slice(0, -'.json'.length)).success
}
