/** `petstore-sandbox scenarios list|validate`: the scenarios `serve --scenario` accepts, and a check of scenario files. */
import { PetstoreError } from '../core/petstore-error.js'
import { fileScenarioName, listScenarioNames, loadScenario, loadScenarioFile } from '../scenario/scenario-loader.js'
import type { CliIo } from './cli-io.js'

/** Prints one line per scenario: name, version, description (or why it is broken). */
export async function listScenarios(scenariosDir: string | undefined, io: CliIo): Promise<void> {
  for (const name of await listScenarioNames({ scenariosDir })) {
    try {
      const scenario = await loadScenario(name, { scenariosDir })
      io.stdout(`${name.padEnd(16)} ${scenario.version.padEnd(8)} ${scenario.description}\n`)
    } catch (error) {
      io.stdout(`${name.padEnd(16)} broken   ${(error as Error).message}\n`)
    }
  }
}

/** Checks each file; resolves with the exit code: 1 when any is broken. */
export async function validateScenarios(files: readonly string[], io: CliIo, red: (text: string) => string): Promise<number> {
  let failed = 0
  for (const file of files) {
    try {
      const scenario = await loadScenarioFile(file)
      io.stdout(`ok   ${file}: ${scenario.name} ${scenario.version}\n`)
      const own = fileScenarioName(file)
      // A file given by path may carry any name; a scenarios directory serves only the one named as its file.
      if (scenario.name !== own) io.stderr(`note ${file} is named "${scenario.name}": given by path (--scenario ${file}) it serves as "${scenario.name}", but a --scenarios-dir refuses it (a file there holds the scenario of its own name, "${own}")\n`)
    } catch (error) {
      if (!(error instanceof PetstoreError)) throw error
      failed++
      io.stderr(`${red(`fail ${error.message}`)}\n`)
    }
  }
  return failed > 0 ? 1 : 0
}
