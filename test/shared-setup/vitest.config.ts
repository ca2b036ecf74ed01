/**
 * A project as a user's suite is often set up: one shared setup file resetting the petstore after
 * each test, and (`isolate: false`) test files sharing one petstore module, run one after another
 * in name order. `test/shared-setup.test.ts` runs it in a vitest of its own.
 */
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
import { BaseSequencer, type TestSpecification } from 'vitest/node'

/** Files in name order, so that a file with a baseline runs before one without. */
class ByName extends BaseSequencer {
  override sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return Promise.resolve([...files].sort((a, b) => a.moduleId.localeCompare(b.moduleId)))
  }
}

export default defineConfig({
  test: {
    root: fileURLToPath(new URL('.', import.meta.url)),
    include: ['*.test.ts'],
    setupFiles: ['./setup.ts'],
    isolate: false,
    fileParallelism: false,
    sequence: { sequencer: ByName },
  },
})
