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
 * database missing or empty beside a log that holds frames, a frame of the log's current generation that fails its
 * checksum (or names another generation) while a later frame of that generation ends a transaction (a transaction
 * committed after damage; a frame torn at the end, by a crash while it was written, belongs to a transaction never
 * answered, and is not damage), or a header SQLite cannot read, not zeroed (a power cut's), before anything written.
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

/** A file's size, or undefined when it cannot be read. */
export function fileSize(path: string): number | undefined {
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
  const bigEndian = magic === 0x377f0683
  const headerPageSize = header.readUInt32BE(8)
  let [s1, s2] = checksum(header.subarray(0, 24), bigEndian, 0, 0)
  const sound = (magic === 0x377f0682 || magic === 0x377f0683) && isPageSize(headerPageSize) && s1 === header.readUInt32BE(24) && s2 === header.readUInt32BE(28)
  // @note A header SQLite cannot read (its magic, page size or checksum failing) makes it ignore the whole log: taken
  // for a log never begun, a header damaged after a crash threw away every write since the last copy into the database
  // (attack68 F1: 61 of 300 creates, ids handed out again).
  if (!sound) return headerDamage(fd, size, logPath, header)
  const salt1 = header.readUInt32BE(16)
  const salt2 = header.readUInt32BE(20)
  const frameBytes = FRAME_HEADER_BYTES + headerPageSize
  let broken: number | undefined
  let brokenBy = ''
  for (let frame = 0, at = HEADER_BYTES; at + frameBytes <= size; frame++, at += frameBytes) {
    const frameHeader = readAt(fd, at, FRAME_HEADER_BYTES)
    const current = frameHeader.readUInt32BE(8) === salt1 && frameHeader.readUInt32BE(12) === salt2
    if (broken === undefined) {
      // SQLite's valid frames end at the first frame of another generation or failing its checksum (a frame torn by a
      // crash while written, or damage).
      if (!current) {
        // Another generation's frame: of an earlier one (the log reused from its start: they follow its frames, as they
        // should), or of the next one, begun once every frame of this one was in the database, whose header a power cut
        // kept from the disk: the log's end either way.
        // @note Taken for the log's end whatever its salts, a frame header damaged (salts zeroed, or random) hid the
        // transactions committed after it (attack68 F1: 8 of 8 started, up to 55 of 300 creates gone).
        // @note Zeroed too (salts 0): a block of the log never written, as a power cut leaves one of the last commit's,
        // never answered; refused, a healthy directory was refused after such a cut (review53 R4).
        // @note Not with this generation's second salt: SQLite draws a new one at random each time it begins the log
        // again, so a frame that keeps it while its first salt differs was damaged there (one bit flipped in its first
        // salt passed 10 times in 32 as an earlier generation's, attack71 F2).
        const sameSalt2 = frameHeader.readUInt32BE(12) === salt2
        if ((!sameSalt2 && generationOf(frameHeader.readUInt32BE(8), salt1)) || (frameHeader.readUInt32BE(8) === 0 && frameHeader.readUInt32BE(12) === 0)) return undefined
        broken = frame
        brokenBy = 'names no generation of the log (its header damaged),'
        continue
      }
      const page = readAt(fd, at + FRAME_HEADER_BYTES, headerPageSize)
      ;[s1, s2] = checksum(frameHeader.subarray(0, 8), bigEndian, s1, s2)
      ;[s1, s2] = checksum(page, bigEndian, s1, s2)
      if (s1 !== frameHeader.readUInt32BE(16) || s2 !== frameHeader.readUInt32BE(20)) {
        broken = frame
        brokenBy = 'fails its checksum,'
      }
      continue
    }
    // Past the end SQLite reads: a frame of this generation that ends a transaction says one was committed after the damage.
    if (current && frameHeader.readUInt32BE(4) !== 0) {
      return `its log ${logPath} is damaged: frame ${broken + 1} ${brokenBy} and a transaction committed after it (frame ${frame + 1}) would be thrown away with every write after the damage`
    }
  }
  return undefined
}

/**
 * Why a log whose header SQLite cannot read holds writes it would throw away, or undefined: a header that is not zeroed,
 * with anything but zeros behind it.
 * @note SQLite writes a log's 32-byte header whole, in one write within one sector, when it begins the log (the sandbox
 * empties the log after each copy into the database): a power cut leaves the header as it was (sound) or, the log
 * begun again and its header never on the disk while frames written with it are, zeroed. That transaction was never
 * answered (its fsync did not end) and SQLite rightly ignores it (test/server/sqlite-power-cut.test.ts); the same
 * picture made by damage after the fact (the log's first bytes zeroed) cannot be told from it, and is read as SQLite
 * reads it. Any other header that fails SQLite's checks is damage: refused whatever its frames say, since damage can
 * reach whatever would tell them as its own. Found by its salts, or by checksums chaining from the one it stores, a
 * header damaged in both (two bits, one in a salt and one in the checksum; the header random) hid its frames, and the
 * whole log was ignored (attack71 F1, attack74 F1: 150 of 150 creates gone, `tenants list` deleted the log).
 */
function headerDamage(fd: number, size: number, logPath: string, header: Buffer): string | undefined {
  if (header.every((byte) => byte === 0)) return undefined
  const written = firstWrittenByte(fd, HEADER_BYTES, size)
  if (written === undefined) return undefined
  return `its log ${logPath} is damaged: its header fails SQLite's checks (magic, page size, salts or checksum) and is not a power cut's (zeroed), with ${size - HEADER_BYTES} bytes of frames behind it: SQLite would ignore the whole log, throwing away every write in it`
}

/** Where the first byte other than zero lies from `from` to `size`, or undefined when there are only zeros. */
function firstWrittenByte(fd: number, from: number, size: number): number | undefined {
  for (let at = from; at < size; at += SCAN_BYTES) {
    const chunk = readAt(fd, at, Math.min(SCAN_BYTES, size - at))
    if (chunk.length === 0) return undefined
    const index = chunk.findIndex((byte) => byte !== 0)
    if (index >= 0) return at + index
  }
  return undefined
}

/** How many bytes {@link firstWrittenByte} reads at once. */
const SCAN_BYTES = 64 * 1024

/** Every page size SQLite may use: the powers of two from 512 to 65,536. */
const PAGE_SIZES = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536]

/**
 * Whether a frame's first salt is that of a generation of the log beside the one whose first salt is `salt1`: SQLite
 * adds one to it each time it begins the log again, so the next one's is one more, an earlier one's a little less
 * (many generations of it). Alone, one bit flipped in a frame's first salt often passes (attack71 F2): the caller also
 * asks for another second salt, which SQLite draws at random for each generation.
 */
function generationOf(frameSalt1: number, salt1: number): boolean {
  const ahead = (frameSalt1 - salt1) >>> 0
  return ahead === 1 || ahead >= 2 ** 32 - EARLIER_GENERATIONS
}

/** How many generations back a frame left in the log may come from (see {@link generationOf}). */
const EARLIER_GENERATIONS = 2 ** 24

/** Whether `size` is a page size SQLite may use: a power of two from 512 to 65,536. */
function isPageSize(size: number): boolean {
  return PAGE_SIZES.includes(size)
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
