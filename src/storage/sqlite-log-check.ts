/**
 * What a data directory's files say before SQLite opens them: whether its log (`sandbox.db-wal`) holds writes SQLite
 * would throw away at open. SQLite takes a missing or empty database file for a new one and deletes its log, and stops
 * reading a log at its first frame whose checksum fails: after a crash, every write since the last copy into the
 * database lives in the log only (up to about 4 MiB), so either loses acknowledged writes for good, silently, their
 * ids handed out again (attack65 F1: 300 of 300 creates gone after `: > sandbox.db`; 148 of 300 after 3,000 bytes
 * of the log overwritten; `tenants list` alone did it). Read-only: nothing is changed.
 * @see https://www.sqlite.org/fileformat.html#the_write_ahead_log (the log's header, frames and checksum)
 */
import { closeSync, openSync, readSync, statSync } from 'node:fs'

const HEADER_BYTES = 32
const FRAME_HEADER_BYTES = 24

/**
 * Why the log at `logPath` holds writes SQLite would throw away opening the database at `path`, or undefined: the
 * database missing or empty beside a log that holds frames, or a frame of the log's current generation that fails its
 * checksum while a later frame of that generation ends a transaction (a transaction committed after damage; a frame
 * torn at the end, by a crash while it was written, belongs to a transaction never answered, and is not damage).
 */
export function logDamage(path: string, logPath: string): string | undefined {
  const size = fileSize(logPath)
  if (size === undefined || size < HEADER_BYTES + FRAME_HEADER_BYTES) return undefined
  const database = fileSize(path)
  if (database === undefined || database === 0) {
    return `the database file is ${database === undefined ? 'missing' : 'empty'} beside its log ${logPath} of ${size} bytes, which holds the writes not yet copied into it: SQLite would take it for a new database and delete that log`
  }
  // A log that cannot be read, or shrinks while read (another server holding the directory copies it in): SQLite meets
  // it as it is; refusing here would say so with a raw error (review52 F4).
  let fd: number | undefined
  try {
    fd = openSync(logPath, 'r')
    return framesDamage(fd, size, logPath)
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
}

function fileSize(path: string): number | undefined {
  try {
    return statSync(path).size
  } catch {
    return undefined
  }
}

/** Reads `length` bytes at `position` (fewer at the end of the file). */
function readAt(fd: number, position: number, length: number): Buffer {
  const buffer = Buffer.alloc(length)
  const read = readSync(fd, buffer, 0, length, position)
  return buffer.subarray(0, read)
}

function framesDamage(fd: number, size: number, logPath: string): string | undefined {
  const header = readAt(fd, 0, HEADER_BYTES)
  const magic = header.readUInt32BE(0)
  // Not a log SQLite would read (no magic): it resets it without reading any frame, and nothing in it was ever valid.
  if (magic !== 0x377f0682 && magic !== 0x377f0683) return undefined
  const bigEndian = magic === 0x377f0683
  const pageSize = header.readUInt32BE(8)
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) return undefined
  let [s1, s2] = checksum(header.subarray(0, 24), bigEndian, 0, 0)
  // A header whose checksum fails: SQLite ignores the whole log (a log never begun); its frames were never valid.
  if (s1 !== header.readUInt32BE(24) || s2 !== header.readUInt32BE(28)) return undefined
  const salt1 = header.readUInt32BE(16)
  const salt2 = header.readUInt32BE(20)
  const frameBytes = FRAME_HEADER_BYTES + pageSize
  let broken: number | undefined
  for (let frame = 0, at = HEADER_BYTES; at + frameBytes <= size; frame++, at += frameBytes) {
    const frameHeader = readAt(fd, at, FRAME_HEADER_BYTES)
    const current = frameHeader.readUInt32BE(8) === salt1 && frameHeader.readUInt32BE(12) === salt2
    if (broken === undefined) {
      // Frames of an earlier generation (the log is reused from its start): SQLite's valid frames end here, as they should.
      if (!current) return undefined
      const page = readAt(fd, at + FRAME_HEADER_BYTES, pageSize)
      ;[s1, s2] = checksum(frameHeader.subarray(0, 8), bigEndian, s1, s2)
      ;[s1, s2] = checksum(page, bigEndian, s1, s2)
      if (s1 !== frameHeader.readUInt32BE(16) || s2 !== frameHeader.readUInt32BE(20)) broken = frame
      continue
    }
    // Past a broken frame: one of the same generation that ends a transaction says one was committed after the damage.
    if (current && frameHeader.readUInt32BE(4) !== 0) {
      return `its log ${logPath} is damaged: frame ${broken + 1} fails its checksum, and a transaction committed after it (frame ${frame + 1}) would be thrown away with every write after the damage`
    }
  }
  return undefined
}

/** SQLite's log checksum of `data` (a multiple of 8 bytes) from `s1`, `s2`: pairs of 32-bit words, each sum mod 2^32. */
function checksum(data: Buffer, bigEndian: boolean, s1: number, s2: number): [number, number] {
  for (let at = 0; at + 8 <= data.length; at += 8) {
    const x0 = bigEndian ? data.readUInt32BE(at) : data.readUInt32LE(at)
    const x1 = bigEndian ? data.readUInt32BE(at + 4) : data.readUInt32LE(at + 4)
    s1 = (s1 + x0 + s2) >>> 0
    s2 = (s2 + x1 + s1) >>> 0
  }
  return [s1, s2]
}
