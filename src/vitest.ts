/**
 * `petstore-sandbox/vitest`: the journal matchers for Vitest. One line in a setup file (or at the
 * top of a test file) registers them and their types:
 *
 * @example
 * // vitest.config.ts: test: { setupFiles: ['./vitest.setup.ts'] }
 * // vitest.setup.ts:
 * import 'petstore-sandbox/vitest'
 * // a test:
 * expect(petstore).toHaveReceived({ operation: 'createCategory', body: { name: 'Ferrets' } })
 */
import { expect } from 'vitest'
import { journalMatchers, type JournalMatchers } from './matchers/journal-matchers.js'

expect.extend(journalMatchers)

// @note `Matchers`, as Vitest's documentation says (3.2 and later): augmenting `Assertion`, which
// vitest re-exports from @vitest/expect, type-checks here but adds nothing in a user's project.
declare module 'vitest' {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- Vitest's own augmentation pattern
  interface Matchers<T = any> extends JournalMatchers<T> {}
}

export type { JournalMatchers } from './matchers/journal-matchers.js'
export type { JournalMatch } from './core/journal-match.js'
