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
  /** Bytes written and not yet taken by the stream's reader (a pipe's, a socket's): Node queues them. */
  readonly writableLength?: number
}

/**
 * The most bytes a server's console stream holds queued for a reader that does not read (see {@link consoleWriters}):
 * past it, lines are dropped (counted) until the reader has taken what was queued.
 * @note Unbounded, a request log piped to a reader alive but not reading (a pager left open, a stalled log shipper:
 * `serve | sleep 300`) queued every request's line in the process: 104 MB to 602 MB of memory over 280,000 requests,
 * outside every budget, nothing said (attack67 F3).
 */
export const MAX_QUEUED_CONSOLE_BYTES = 1024 * 1024

/** Writers of text to `stdout` and `stderr` that never throw nor end the process (see the module's note). */
export function consoleWriters(
  streams: { readonly stdout: ConsoleStream; readonly stderr: ConsoleStream },
  /** Whether the command serves (`serve`): its standard output is the request log, and it serves on. A one-shot command's reader that left (`scenarios list | head`) is not told of. */
  serving = true,
): { readonly stdout: (text: string) => void; readonly stderr: (text: string) => void } {
  const broken = { stdout: false, stderr: false }
  const writer = (name: 'stdout' | 'stderr', other: 'stdout' | 'stderr') => {
    const stream = streams[name]
    const fail = (error: unknown) => {
      if (broken[name]) return
      broken[name] = true
      const code = (error as { code?: unknown } | null)?.code
      const why = typeof code === 'string' ? code : error instanceof Error ? error.message : String(error)
      // @note `scenarios list | head -1` said "the request log … the sandbox serves on" of a command
      // that has neither (trial41 R6): a reader that left is what `head` does.
      if (!serving && why === 'EPIPE') return
      writers[other](`petstore-sandbox: ${label(name)} can no longer be written (${why}): its lines are dropped from now on${serving ? '; the sandbox serves on' : ''}\n`)
    }
    stream.on('error', fail)
    // Lines dropped while the reader does not read (see MAX_QUEUED_CONSOLE_BYTES), said once it reads again.
    let dropped = 0
    return (text: string) => {
      if (broken[name]) return
      // A one-shot command writes everything, its output drained before it exits: a long list piped (`tenants list | cat`)
      // queues past the bound within one turn, its reader reading (review53 R2: half of 20,000 lines dropped).
      const queued = serving ? (stream.writableLength ?? 0) : 0
      if (queued > MAX_QUEUED_CONSOLE_BYTES) {
        if (dropped === 0) writers[other](`petstore-sandbox: ${label(name)} is not being read (${queued} bytes waiting for its reader): its lines are dropped until it is${serving ? '; the sandbox serves on' : ''}\n`)
        dropped += countLines(text)
        return
      }
      try {
        if (dropped > 0 && queued === 0) {
          stream.write(`petstore-sandbox: ${dropped} line${dropped === 1 ? '' : 's'} of ${label(name)} dropped while it was not read\n`)
          dropped = 0
        }
        stream.write(text)
      } catch (error) {
        fail(error)
      }
    }
  }
  const label = (name: 'stdout' | 'stderr') => (name === 'stdout' ? (serving ? 'standard output (the request log)' : 'standard output') : 'standard error (warnings)')
  const writers: { stdout: (text: string) => void; stderr: (text: string) => void } = { stdout: () => undefined, stderr: () => undefined }
  writers.stdout = writer('stdout', 'stderr')
  writers.stderr = writer('stderr', 'stdout')
  return writers
}

/** How many lines `text` holds (each ends with a line break; a last one without counts too). */
function countLines(text: string): number {
  let lines = 0
  for (let at = text.indexOf('\n'); at !== -1; at = text.indexOf('\n', at + 1)) lines++
  return text.endsWith('\n') || text === '' ? lines : lines + 1
}
