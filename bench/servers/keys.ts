/**
 * The bench's API keys: reads and writes go to different tenants, so that the creates of the
 * POST rounds never lengthen the list the GET rounds fetch.
 */
export const READ_KEY = 'bench-read'
export const WRITE_KEY = 'bench-write'
export const BENCH_KEYS = [READ_KEY, WRITE_KEY]
