/**
 * A real small disk for storage-failure tests: a tmpfs mount of a few hundred KiB that can be
 * filled (ENOSPC) and remounted read-only (EROFS). Needs root and mount(8); where they are not
 * available, `smallDiskAvailable` is false and the tests that need it are skipped.
 */
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { onTestFinished } from 'vitest'

function canMount(): boolean {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return false
  const dir = mkdtempSync(join(tmpdir(), 'petstore-probe-'))
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir], { stdio: 'ignore' })
    execFileSync('umount', [dir], { stdio: 'ignore' })
    return true
  } catch {
    return false
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

export const smallDiskAvailable = canMount()

export interface SmallDisk {
  readonly dir: string
  /** Fills every free byte with a filler file (writes then fail with ENOSPC). */
  fill(): void
  /** Deletes the filler: the disk has room again. */
  free(): void
  readOnly(): void
  readWrite(): void
}

/** Mounts a tmpfs of `kib` KiB for this test; unmounted when it finishes. */
export function smallDisk(kib: number): SmallDisk {
  const dir = mkdtempSync(join(tmpdir(), 'petstore-disk-'))
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${kib}k`, 'tmpfs', dir])
  onTestFinished(() => {
    execFileSync('umount', ['-l', dir])
    rmSync(dir, { recursive: true, force: true })
  })
  const filler = join(dir, 'filler')
  return {
    dir,
    fill() {
      const chunk = Buffer.alloc(4096, 1)
      for (let i = 0; i < 1_000_000; i++) {
        try {
          writeFileSync(filler, chunk, { flag: 'a' })
        } catch {
          return
        }
      }
    },
    free: () => unlinkSync(filler),
    readOnly: () => execFileSync('mount', ['-o', 'remount,ro', dir]),
    readWrite: () => execFileSync('mount', ['-o', 'remount,rw', dir]),
  }
}
