/**
 * `petstore-sandbox/jest`: the journal matchers for Jest, registered on Jest's global `expect`
 * (CommonJS and ESM alike). One line in a file of `setupFilesAfterEnv` (or at the top of a test
 * file) registers them and their types (`@types/jest`'s `jest.Matchers`):
 *
 * @example
 * // jest.config.js: setupFilesAfterEnv: ['<rootDir>/jest.setup.ts']
 * // jest.setup.ts:
 * import 'petstore-sandbox/jest'
 * // a test:
 * expect(petstore).toHaveReceivedTimes(1, { operation: 'createCategory' })
 */
import { journalMatchers, type JournalMatchers } from './matchers/journal-matchers.js'
import type { JournalMatch } from './core/journal-match.js'

/** Jest's global `expect`, the one its tests use. */
const jestExpect = (globalThis as { expect?: { extend?: (matchers: object) => void } }).expect
if (typeof jestExpect?.extend !== 'function') {
  throw new Error(
    "petstore-sandbox/jest: no global expect to extend. With Vitest, import 'petstore-sandbox/vitest' instead. With Jest, import it from a file of setupFilesAfterEnv (not setupFiles), or from a test file.",
  )
}
jestExpect.extend(journalMatchers)

declare global {
  namespace jest {
    // eslint-disable-next-line @typescript-eslint/no-unused-vars -- T is in @types/jest's declaration, which this merges with
    interface Matchers<R, T = {}> {
      /** See {@link JournalMatchers.toHaveReceived}. */
      toHaveReceived(match?: JournalMatch): R
      /** See {@link JournalMatchers.toHaveReceivedTimes}. */
      toHaveReceivedTimes(times: number, match?: JournalMatch): R
    }
  }
}

export type { JournalMatchers, JournalMatch }
