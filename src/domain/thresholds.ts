/**
 * Usage alerts (decisions.md §11, `usage.threshold_reached`): the levels of a granted limit a draw crosses. Decided on
 * the balance before and after one draw, in the step that serialises the balance's draws, so that one draw and only
 * one crosses each level in a reset window; the outbox's dedupe key makes the event once per level per window even if
 * usage falls back under a level (a larger limit) and crosses it again.
 */
export const LEVELS = [80, 100] as const
export type Level = (typeof LEVELS)[number]

/** Whether `used` is at or past `level` percent of `limit` (exact: micro-units as bigints). */
const reached = (used: bigint, limit: bigint, level: Level) => used * 100n >= limit * BigInt(level)

/**
 * The levels `after` reaches that `before` did not, lowest first. A limit of zero or less has no levels (nothing is
 * granted to alert on); a draw crossing both levels returns both.
 */
export const crossed = (limit: bigint | null, before: bigint, after: bigint): ReadonlyArray<Level> =>
  limit === null || limit <= 0n || after <= before
    ? []
    : LEVELS.filter((level) => !reached(before, limit, level) && reached(after, limit, level))
