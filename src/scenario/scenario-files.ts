/**
 * The file system, as the scenario loader needs it: Node.js only. The browser build replaces
 * this module with `scenario-files.browser.ts` (see `scripts/build.mjs`), so no bundler ever
 * meets a `node:` import in the browser entry.
 */
import { statSync } from 'node:fs'
import { constants } from 'node:fs'
import { open, readdir, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { ScenarioFiles } from './scenario-files-api.js'

/** The largest scenario file or fixture read, in bytes (a 10,000-category fixture of the longest names and descriptions is about 22 MB, 90 MB of emoji). */
export const MAX_SCENARIO_FILE_BYTES = 128 * 1024 * 1024

/**
 * A regular file's text, opened without blocking and its kind and size checked before it is read.
 * @note Read as any path, a FIFO named as a fixture held a switch (and a thread of libuv's pool)
 * forever, the server deaf to its first SIGTERM; `/dev/zero` was read to 512 MB (attack40 F4).
 */
async function readRegularFile(file: string): Promise<string> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NONBLOCK)
  try {
    const found = await handle.stat()
    if (!found.isFile()) throw Object.assign(new Error(`${file} is not a regular file`), { code: found.isDirectory() ? 'EISDIR' : 'ENOTREG' })
    if (found.size > MAX_SCENARIO_FILE_BYTES) throw Object.assign(new Error(`${file} holds ${found.size} bytes`), { code: 'EFBIG' })
    return await handle.readFile('utf8')
  } finally {
    await handle.close()
  }
}

/** Reads scenario files and fixtures from the local file system. */
export const scenarioFiles: ScenarioFiles = {
  join,
  dirname,
  resolve,
  readText: readRegularFile,
  isFile: (file) =>
    stat(file).then(
      (found) => found.isFile(),
      () => false,
    ),
  directoryProblem: (dir) => {
    try {
      return statSync(dir).isDirectory() ? undefined : 'which is not a directory'
    } catch (error) {
      return `which cannot be read (${(error as NodeJS.ErrnoException).code ?? String(error)})`
    }
  },
  list: (dir) => readdir(dir).catch((): string[] => []),
}
