/**
 * The prototype every `FileHandle` shares, and one of its methods as Node made it: tests spy on
 * it to make the storage's fsyncs fail, stall or be watched, and call the real one through.
 */
import { open, type FileHandle } from 'node:fs/promises'
import { onTestFinished, vi } from 'vitest'
import { join } from 'node:path'

/** A `FileHandle` method that takes no argument and settles when done (`datasync`, `sync`). */
export type HandleMethod = (this: FileHandle) => Promise<void>

/** The `FileHandle` prototype (found by opening a file `probe` in `dir`), and its own `method`. */
export async function fileHandleMethod(dir: string, method: 'datasync' | 'sync'): Promise<{ prototype: FileHandle; real: HandleMethod }> {
  const probe = await open(join(dir, 'probe'), 'w')
  const prototype = Object.getPrototypeOf(probe) as FileHandle
  await probe.close()
  return { prototype, real: (Object.getOwnPropertyDescriptor(prototype, method) as { value: HandleMethod }).value }
}

/**
 * Holds every fsync of the log (`FileHandle.datasync()`) until the function returned is called (a slow disk, or writes
 * waiting their turn); let go when the test ends too.
 */
export async function heldFsyncs(dir: string): Promise<() => void> {
  const { prototype, real } = await fileHandleMethod(dir, 'datasync')
  let release = () => {}
  const held = new Promise<void>((resolve) => (release = resolve))
  const spy = vi.spyOn(prototype, 'datasync').mockImplementation(function (this: FileHandle) {
    return held.then(() => real.call(this))
  })
  onTestFinished(() => {
    release()
    spy.mockRestore()
  })
  return release
}
