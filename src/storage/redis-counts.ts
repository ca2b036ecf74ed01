/**
 * The counts the sandbox keeps in Redis, as its scripts (Lua) and its code (JS) both check them:
 * one rule each, written once here for both (a module of its own: redis-connection.ts, which
 * watches the epoch's beat, and redis-outcomes.ts, which imports it, both need them).
 */

/**
 * The largest count the scripts hold exactly: 2^53 (Lua's numbers are doubles; 2^53 itself is a
 * tenant's next id once its ids are used up, see the create's IDSPACE).
 */
export const COUNT_LIMIT = String(2 ** 53)

/**
 * Whether `text` is a count the sandbox's scripts can use: an integer as Redis's INCRBY and
 * HINCRBY take it (decimal digits, a `-` at most, no leading zero, no `-0`, no `+`), at most
 * {@link COUNT_LIMIT} either way (held exactly by Lua). `typesBeforeWriting`'s Lua (redis-outcomes.ts) is the same rule.
 * @note `^-?\d+$` let through `007`, `-0` and counts past 2^63 that HINCRBY refuses, after the
 * script had written (a create stored, answered unknown, every tenant's: attack28 F2), and counts
 * past 2^53 that Lua rounds (a budget total read as full on an empty store).
 */
export function usableCount(text: string): boolean {
  const digits = /^(?:0|-?([1-9]\d*))$/.exec(text)
  if (digits === null) return false
  const magnitude = digits[1] ?? '0'
  return magnitude.length < COUNT_LIMIT.length || (magnitude.length === COUNT_LIMIT.length && magnitude <= COUNT_LIMIT)
}

/**
 * The most bytes one tenant's own count may hold (its field in the usage hash, its journal weight):
 * 2^40, a terabyte, far past what the limits let a tenant store, so that the sweep's sum of 8,192
 * tenants' counts stays a count the scripts hold exactly (one of 2^53 each wrapped it: attack30 F1).
 */
export const TENANT_BYTES_LIMIT = 2 ** 40

/**
 * The epoch's beat (see `RedisLink.watchEpoch`): a count from 0 below 2^53 (at 2^53 the beat is
 * refused: its next would not be told apart). Lua `usable_beat(value)` in {@link USABLE_COUNT}.
 */
export const BEAT_LIMIT = 2 ** 53

/**
 * Lua: `usable_count(value)`, the rule of {@link usableCount}; `usable_bytes(value)`, a tenant's own
 * byte count: a usable count from 0 to {@link TENANT_BYTES_LIMIT} (one of -5e9 added 5 GB to the
 * shared claims on the tenant's next write, every new tenant refused: attack30 F4); `usable_beat(value)`,
 * the rule of {@link usableBeatText}; and
 * `count_of(value)`: the bytes a tenant's count holds (a reply: a string, or false when absent), 0
 * when absent or of no use (a count given back by a delete or an expiry, or summed by the sweep:
 * one of `inf` wrapped the shared total past 2^63, every tenant's writes refused: attack29 F3, F4,
 * attack30 F1).
 */
export const USABLE_COUNT = `local function usable_count(value)
  if value == '0' then return true end
  local magnitude = string.match(value, '^%-?([1-9]%d*)$')
  return magnitude ~= nil and (#magnitude < ${COUNT_LIMIT.length} or (#magnitude == ${COUNT_LIMIT.length} and magnitude <= '${COUNT_LIMIT}'))
end
local function usable_bytes(value)
  return usable_count(value) and string.sub(value, 1, 1) ~= '-' and tonumber(value) <= ${TENANT_BYTES_LIMIT}
end
local function usable_beat(value)
  return usable_count(value) and string.sub(value, 1, 1) ~= '-' and tonumber(value) < ${BEAT_LIMIT}
end
local function count_of(value)
  if value and usable_bytes(value) then return tonumber(value) end
  return 0
end`

/** Whether `text` (a reply) is a beat: a {@link usableCount} from 0 below {@link BEAT_LIMIT}. */
export function usableBeatText(text: unknown): text is string {
  return typeof text === 'string' && usableCount(text) && !text.startsWith('-') && Number(text) < BEAT_LIMIT
}
