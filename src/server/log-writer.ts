/**
 * The request log's output: lines gathered during one turn of the event loop and written
 * together, rather than one write per request.
 * @note `process.stdout` writes to a file or a pipe synchronously on Linux: one system call per
 * request line cost about a tenth of a request under load. Gathered, a turn that answers ten
 * requests makes one call. Lines still leave within the turn they were logged in, and whatever
 * is pending is written when the process exits.
 */

/** Something lines can be written to (`process.stdout`). */
export interface TextSink {
  write(text: string): unknown
}

/** Writes lines to `sink` once per turn of the event loop (see the note above). */
export function batchedLines(sink: TextSink): (line: string) => void {
  let pending = ''
  let scheduled = false
  const flush = () => {
    scheduled = false
    if (pending === '') return
    const text = pending
    pending = ''
    sink.write(text)
  }
  process.once('exit', flush)
  return (line) => {
    pending += `${line}\n`
    if (!scheduled) {
      scheduled = true
      setImmediate(flush)
    }
  }
}
