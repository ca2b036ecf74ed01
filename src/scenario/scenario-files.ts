/**
 * The file system, as the scenario loader needs it: Node.js only. The browser build replaces
 * this module with `scenario-files.browser.ts` (see `scripts/build.mjs`), so no bundler ever
 * meets a `node:` import in the browser entry.
 */
import { statSync } from 'node:fs'
import { readdir, readFile, stat } from 'node:fs/promises'
import { dirname, join, resolve } from 'node:path'
import type { ScenarioFiles } from './scenario-files-api.js'

/** Reads scenario files and fixtures from the local file system. */
export const scenarioFiles: ScenarioFiles = {
  join,
  dirname,
  resolve,
  readText: (file) => readFile(file, 'utf8'),
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
