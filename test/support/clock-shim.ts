/**
 * A clock off by a fixed offset for a child process (attack9 R5: a Redis Cluster master whose
 * NTP is off; R1: a clock stepped back): an LD_PRELOAD library adding {@link CLOCK_OFFSET_VARIABLE} ms
 * (or what {@link CLOCK_OFFSET_FILE_VARIABLE}'s file holds) to the wall clock
 * (`clock_gettime` of the real-time clocks, `gettimeofday`, `time`), the monotonic clock untouched.
 * Compiled with gcc once per test process; where gcc (or Linux) is missing, `clockShim()` is
 * undefined and the tests that need it leave it out.
 */
import { preloadShim } from './preload-shim.js'

/** The variable holding the offset, in ms (may be negative). */
export const CLOCK_OFFSET_VARIABLE = 'PETSTORE_TEST_CLOCK_OFFSET_MS'
/** The variable naming a file holding the offset in ms, read at every call (a clock stepped while the child runs); over {@link CLOCK_OFFSET_VARIABLE}. */
export const CLOCK_OFFSET_FILE_VARIABLE = 'PETSTORE_TEST_CLOCK_OFFSET_FILE'

const SOURCE = `#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>
#include <time.h>
static long long offset_ns(void) {
  const char *file = getenv("${CLOCK_OFFSET_FILE_VARIABLE}");
  if (file != NULL) {
    FILE *f = fopen(file, "r");
    long long ms = 0;
    if (f != NULL) { if (fscanf(f, "%lld", &ms) != 1) ms = 0; fclose(f); }
    return ms * 1000000LL;
  }
  const char *v = getenv("${CLOCK_OFFSET_VARIABLE}");
  return v ? atoll(v) * 1000000LL : 0;
}
static void shift(struct timespec *ts) {
  long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset_ns();
  ts->tv_sec = ns / 1000000000LL; ts->tv_nsec = ns % 1000000000LL;
}
int clock_gettime(clockid_t id, struct timespec *ts) {
  int (*real)(clockid_t, struct timespec *) = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  int result = real(id, ts);
  if (result == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) shift(ts);
  return result;
}
int gettimeofday(struct timeval *tv, void *tz) {
  struct timespec ts;
  int result = clock_gettime(CLOCK_REALTIME, &ts);
  if (result == 0 && tv != NULL) { tv->tv_sec = ts.tv_sec; tv->tv_usec = ts.tv_nsec / 1000; }
  (void)tz;
  return result;
}
time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t != NULL) *t = ts.tv_sec;
  return ts.tv_sec;
}
`

/** The shim's path (built on first use, deleted when the process exits), or undefined where it cannot be built. */
export function clockShim(): string | undefined {
  return preloadShim('clock', SOURCE)
}
