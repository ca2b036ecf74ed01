/**
 * Failing fsyncs for a child server (attack6 S1, S2): an LD_PRELOAD library whose `fsync` and
 * `fdatasync` fail with EIO while a flag file exists, as a disk whose writeback fails does.
 * Compiled with gcc once per test process; where gcc (or Linux) is missing, `failingFsyncShim()`
 * is undefined and the tests that need it leave it out.
 */
import { preloadShim } from './preload-shim.js'

/** The variable naming the flag file: while it exists, every fsync of the child fails. */
export const FAILSYNC_FLAG_VARIABLE = 'PETSTORE_TEST_FAILSYNC_FLAG'
/** The variable naming the stall file: while it exists, every fsync of the child waits (a stalled disk; attack8 A1). */
export const STALLSYNC_FLAG_VARIABLE = 'PETSTORE_TEST_STALLSYNC_FLAG'

const SOURCE = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
static void stall(void) { const char *flag = getenv("${STALLSYNC_FLAG_VARIABLE}"); while (flag != NULL && access(flag, F_OK) == 0) usleep(20000); }
static int failing(void) { const char *flag = getenv("${FAILSYNC_FLAG_VARIABLE}"); return flag != NULL && access(flag, F_OK) == 0; }
int fdatasync(int fd) { stall(); if (failing()) { errno = EIO; return -1; } int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync"); return real(fd); }
int fsync(int fd) { stall(); if (failing()) { errno = EIO; return -1; } int (*real)(int) = (int (*)(int))dlsym(RTLD_NEXT, "fsync"); return real(fd); }
`

/** The shim's path (built on first use, deleted when the process exits), or undefined where it cannot be built. */
export function failingFsyncShim(): string | undefined {
  return preloadShim('failsync', SOURCE)
}
