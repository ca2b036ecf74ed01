/** What a run of the command line reads and writes, so that it runs the same in a process of its own and in a test. */

/** Where a run of `petstore-sandbox` writes, and the environment it reads. */
export interface CliIo {
  /** Receives everything the command prints to standard output. */
  readonly stdout: (text: string) => void
  /** Receives errors and warnings. */
  readonly stderr: (text: string) => void
  /** The environment its `PETSTORE_SANDBOX_*` variables come from; never written to. */
  readonly env: Readonly<Record<string, string | undefined>>
  /** Color the error line red. @default false */
  readonly color?: boolean
  /** Width the help text wraps at. @default 110 */
  readonly columns?: number
}

/** A mistake of the caller's: reported as one line, without a stack trace. */
export class UsageError extends Error {
  override readonly name = 'UsageError'
}
