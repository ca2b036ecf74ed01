/** What the scenario loader needs from a file system; Node.js has one, the browser none. */
export interface ScenarioFiles {
  join(...parts: string[]): string
  dirname(file: string): string
  resolve(...parts: string[]): string
  /** The file's text; rejects with the system error (its `code` is shown). */
  readText(file: string): Promise<string>
  /** Whether a regular file exists at this path. */
  isFile(file: string): Promise<boolean>
  /** Undefined when `dir` is a directory; else why not (`ENOENT`, `a file`). Synchronous, for option checks. */
  directoryProblem(dir: string): string | undefined
  /** The names in a directory, or none when it cannot be read. */
  list(dir: string): Promise<string[]>
}
