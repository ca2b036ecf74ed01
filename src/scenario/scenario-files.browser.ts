/**
 * The browser's stand-in for `scenario-files.ts`: there is no file system, so every use says
 * what to pass instead. Swapped in by the browser build (`scripts/build.mjs`).
 */
import { PetstoreError } from '../core/petstore-error.js'
import type { ScenarioFiles } from './scenario-files-api.js'

const unavailable = (): never => {
  throw new PetstoreError(
    'scenario_not_readable',
    'Scenario files can only be read in Node.js; in the browser pass a built-in name or a scenario object.',
  )
}

/** Every member throws `scenario_not_readable`. */
export const scenarioFiles: ScenarioFiles = {
  join: unavailable,
  dirname: unavailable,
  resolve: unavailable,
  readText: unavailable,
  isFile: unavailable,
  directoryProblem: unavailable,
  list: unavailable,
}
