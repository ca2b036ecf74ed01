/**
 * The process's console streams as the CLI writes to them: a stream that can no longer be written
 * (a full disk or a file-size limit under `serve > sandbox.log`, a log pipe whose reader left:
 * `serve | head`, a log shipper restarting) costs its lines, never the process. Its lines are
 * dropped from then on (the stream is done: Node ends it at its first error), said once on the
 * other stream while that one can be written.
 * @note Nothing listened for the stream's 'error': the first request line past a full disk, or
 * once a pipe's reader left, ended the server with exit code 1, and every worker of `--workers`
 * in turn, the primary replacing them until it gave up (attack33 F2).
 */

/** A console stream as {@link consoleWriters} uses it (`process.stdout`, `process.stderr`). */
export interface ConsoleStream {
  write(text: string): unknown
  on(event: 'error', listener: (error: Error) => void): unknown
}

/** Writers of text to `stdout` and `stderr` that never throw nor end the process (see the module's note). */
export function consoleWriters(streams: { readonly stdout: ConsoleStream; readonly stderr: ConsoleStream }): { readonly stdout: (text: string) => void; readonly stderr: (text: string) => void } {
  const broken = { stdout: false, stderr: false }
  const writer = (name: 'stdout' | 'stderr', other: 'stdout' | 'stderr') => {
    const stream = streams[name]
    const fail = (error: unknown) => {
      if (broken[name]) return
      broken[name] = true
      const code = (error as { code?: unknown } | null)?.code
      const why = typeof code === 'string' ? code : error instanceof Error ? error.message : String(error)
      const what = name === 'stdout' ? 'standard output (the request log)' : 'standard error (warnings)'
      writers[other](`petstore-sandbox: ${what} can no longer be written (${why}): its lines are dropped from now on; the sandbox serves on\n`)
    }
    stream.on('error', fail)
    return (text: string) => {
      if (broken[name]) return
      try {
        stream.write(text)
      } catch (error) {
        fail(error)
      }
    }
  }
  const writers: { stdout: (text: string) => void; stderr: (text: string) => void } = { stdout: () => undefined, stderr: () => undefined }
  writers.stdout = writer('stdout', 'stderr')
  writers.stderr = writer('stderr', 'stdout')
  return writers
}
