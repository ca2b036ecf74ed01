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
 * answered, and is not damage), or a header SQLite cannot read before frames that end a transaction.
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
    return framesDamage(fd, size, logPath, databasePageSizeOf(path))
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

function framesDamage(fd: number, size: number, logPath: string, databasePageSize: number | undefined): string | undefined {
  const header = readAt(fd, 0, HEADER_BYTES)
  const magic = header.readUInt32BE(0)
  const bigEndian = magic === 0x377f0683
  const headerPageSize = header.readUInt32BE(8)
  let [s1, s2] = checksum(header.subarray(0, 24), bigEndian, 0, 0)
  const sound = (magic === 0x377f0682 || magic === 0x377f0683) && isPageSize(headerPageSize) && s1 === header.readUInt32BE(24) && s2 === header.readUInt32BE(28)
  // @note A header SQLite cannot read (its magic, page size or checksum failing) makes it ignore the whole log: taken
  // for a log never begun, a header damaged after a crash threw away every write since the last copy into the database
  // (attack68 F1: 61 of 300 creates, ids handed out again). SQLite writes a log's header with its first frames, so
  // frames of the header's own salts that end a transaction behind it are damage, not a log never begun.
  if (!sound) return headerDamage(fd, size, logPath, header, isPageSize(headerPageSize) ? headerPageSize : (databasePageSize ?? DEFAULT_PAGE_SIZE))
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
 * Why a log whose header SQLite cannot read holds transactions it would throw away, or undefined: frames carrying the
 * header's own salts (the header was written for them, then damaged) of which one ends a transaction.
 * @note A header that does not name the frames' salts (zeroed, or another generation's) is what a power cut leaves when
 * the log was begun again and its header never reached the disk, the frames written with it did: that transaction was
 * never answered (its fsync did not end), and SQLite rightly ignores it (test/server/sqlite-power-cut.test.ts). The
 * same picture made by damage after the fact (the log's first bytes zeroed) cannot be told from it, and is read as
 * SQLite reads it.
 */
function headerDamage(fd: number, size: number, logPath: string, header: Buffer, pageSize: number): string | undefined {
  const damaged = (frame: number) =>
    `its log ${logPath} is damaged: its header fails SQLite's checks (magic, page size, salts or checksum), and it holds a transaction committed after it (frame ${frame + 1}): SQLite would ignore the whole log, throwing away every write in it`
  const salts = header.toString('hex', 16, 24)
  const frameBytes = FRAME_HEADER_BYTES + pageSize
  for (let frame = 0, at = HEADER_BYTES; at + frameBytes <= size; frame++, at += frameBytes) {
    const frameHeader = readAt(fd, at, FRAME_HEADER_BYTES)
    if (frameHeader.toString('hex', 8, 16) === salts && frameHeader.readUInt32BE(4) !== 0) return damaged(frame)
  }
  // @note Frames written for this header whatever its salts and page size say: their checksums chain from the one it
  // stores (bytes 24-31), which a power cut's header (zeroed, or an earlier generation's, sound) never seeds. Found by
  // its salts and page size alone, a header damaged in either (one bit of a salt; the page size another valid one) hid
  // its frames, and the whole log was ignored (attack71 F1: 61 of 300 creates, 150 of 150 on a log never copied).
  const seed1 = header.readUInt32BE(24)
  const seed2 = header.readUInt32BE(28)
  if (seed1 === 0 && seed2 === 0) return undefined
  for (const candidate of new Set([pageSize, ...PAGE_SIZES])) {
    for (const bigEndian of [false, true]) {
      const frame = chainedCommit(fd, size, candidate, bigEndian, seed1, seed2)
      if (frame !== undefined) return damaged(frame)
    }
  }
  return undefined
}

/**
 * The first frame that ends a transaction among the log's frames of `pageSize` whose checksums chain, in the byte
 * order `bigEndian` says, from `s1`, `s2` (a header's stored checksum), their salts all the first one's; undefined when
 * the chain breaks first (the first frame's checksum failing: not this header's frames, or not of this page size).
 */
function chainedCommit(fd: number, size: number, pageSize: number, bigEndian: boolean, s1: number, s2: number): number | undefined {
  const frameBytes = FRAME_HEADER_BYTES + pageSize
  let salts: string | undefined
  for (let frame = 0, at = HEADER_BYTES; at + frameBytes <= size; frame++, at += frameBytes) {
    const frameHeader = readAt(fd, at, FRAME_HEADER_BYTES)
    const frameSalts = frameHeader.toString('hex', 8, 16)
    if (salts !== undefined && frameSalts !== salts) return undefined
    salts = frameSalts
    ;[s1, s2] = checksum(frameHeader.subarray(0, 8), bigEndian, s1, s2)
    ;[s1, s2] = checksum(readAt(fd, at + FRAME_HEADER_BYTES, pageSize), bigEndian, s1, s2)
    if (s1 !== frameHeader.readUInt32BE(16) || s2 !== frameHeader.readUInt32BE(20)) return undefined
    if (frameHeader.readUInt32BE(4) !== 0) return frame
  }
  return undefined
}

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

/** SQLite's page size when a database says none: the page size of a log whose header cannot be read is the database's. */
const DEFAULT_PAGE_SIZE = 4096

/** The page size the database file at `path` says it has (its header's), or undefined when it cannot be read. */
function databasePageSizeOf(path: string): number | undefined {
  let fd: number | undefined
  try {
    fd = openSync(path, 'r')
    const header = readAt(fd, 0, 100)
    if (header.length < 100 || header.toString('latin1', 0, 16) !== 'SQLite format 3\0') return undefined
    const field = header.readUInt16BE(16)
    const size = field === 1 ? 65536 : field
    return isPageSize(size) ? size : undefined
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
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
