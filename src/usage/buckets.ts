/**
 * Calendar buckets of usage history (interface spec 4.12, decisions.md §9), pure: given the range, the granularity,
 * an IANA time zone and `now`, the resolved local dates and each bucket's exact UTC interval.
 *
 * Local dates are handled as day numbers (days since 1970-01-01, the local calendar read as if it were UTC), so date
 * arithmetic never touches a zone. Only a day's start instant depends on the zone: it is found from the zone's
 * offsets as `Intl.DateTimeFormat` reports them, exactly, whatever the offset (+05:45, −03:30, +14) and across
 * daylight-saving changes (a 23- or 25-hour day is one bucket of 23 or 25 hours). A day whose midnight does not
 * exist (a transition at 00:00) starts at the transition.
 *
 * Labels: every bucket is labelled by its first day **within the range**: the first week or month of a range that
 * starts mid-week or mid-month is labelled by the range's `from`, not by its Monday or its 1st (so `series[0]` is
 * always `from`, and no label lies outside the range). Every later bucket starts on its calendar boundary.
 */

export type UsageRangeName = "7d" | "30d" | "90d" | "custom"
export type Granularity = "day" | "week" | "month"

export interface BucketQuery {
  readonly range: UsageRangeName
  readonly granularity: Granularity
  readonly timezone: string
  /** `YYYY-MM-DD`, inclusive; read only for `custom`. */
  readonly from?: string | undefined
  readonly to?: string | undefined
  /** Epoch milliseconds. */
  readonly now: number
}

export interface Bucket {
  /** Its first local day in the range, `YYYY-MM-DD`. */
  readonly label: string
  /** UTC instants, [startMs, endMs). */
  readonly startMs: number
  readonly endMs: number
}

export interface BucketPlan {
  /** The zone's canonical spelling. */
  readonly timezone: string
  /** The resolved inclusive local dates. */
  readonly from: string
  readonly to: string
  /** The whole range as UTC instants, [startMs, endMs): the first bucket's start, the last one's end. */
  readonly startMs: number
  readonly endMs: number
  readonly buckets: ReadonlyArray<Bucket>
}

export interface BucketIssue {
  readonly path: string
  readonly message: string
}

export type PlanResult =
  | { readonly _tag: "Ok"; readonly plan: BucketPlan }
  | { readonly _tag: "Invalid"; readonly issues: ReadonlyArray<BucketIssue> }

export const DAY_MS = 86_400_000
export const MAX_CUSTOM_DAYS = 366
const PRESET_DAYS = { "7d": 7, "30d": 30, "90d": 90 } as const
/** 1970-01-01 (day 0) to 9999-12-31. */
const MIN_DAY = 0
const MAX_DAY = 2_932_896

// ---------------------------------------------------------------------------------------------------------------
// Time zones

const formatters = new Map<string, Intl.DateTimeFormat>()

/**
 * The canonical name of an IANA time zone (any case, aliases and `UTC` accepted), or undefined when unknown.
 * Offset strings (`+05:30`), which newer engines also accept, are not zone names and are refused.
 */
export const resolveTimeZone = (name: string): string | undefined => {
  if (name.length === 0 || name.length > 64 || !/^[A-Za-z]/.test(name)) return undefined
  const known = resolvedZones.get(name)
  if (known !== undefined) return known
  try {
    const resolved = new Intl.DateTimeFormat("en-US", { timeZone: name }).resolvedOptions().timeZone
    if (resolved === undefined) return undefined
    // Only names the engine accepted are kept: a few hundred zones, in the spellings callers use.
    if (resolvedZones.size < 4096) resolvedZones.set(name, resolved)
    return resolved
  } catch {
    return undefined
  }
}
const resolvedZones = new Map<string, string>()

const formatterOf = (timeZone: string): Intl.DateTimeFormat => {
  let f = formatters.get(timeZone)
  if (f === undefined) {
    f = new Intl.DateTimeFormat("en-US", {
      timeZone,
      hourCycle: "h23",
      year: "numeric",
      month: "numeric",
      day: "numeric",
      hour: "numeric",
      minute: "numeric",
      second: "numeric"
    })
    formatters.set(timeZone, f)
  }
  return f
}

/** en-US numeric: "3/29/2026, 01:00:00" (month, day, year, hour, minute, second). */
const WALL = /^(\d+)\D+(\d+)\D+(\d+)\D+(\d+)\D+(\d+)\D+(\d+)$/

/**
 * The local wall-clock time of an instant, as epoch milliseconds of that wall time read as UTC (whole seconds).
 * Instants from 1970 on (local years 1969 to 10000): no era to read.
 */
export const wallClock = (timeZone: string, instant: number): number => {
  const f = formatterOf(timeZone)
  const m = WALL.exec(f.format(instant))
  if (m !== null) {
    return Date.UTC(Number(m[3]), Number(m[1]) - 1, Number(m[2]), Number(m[4]), Number(m[5]), Number(m[6]))
  }
  // Whatever the engine's layout, the parts are authoritative (slower).
  const p: Record<string, number> = {}
  for (const part of f.formatToParts(instant)) p[part.type] = Number(part.value)
  return Date.UTC(p.year!, p.month! - 1, p.day!, p.hour!, p.minute!, p.second!)
}

/** The zone's offset from UTC at an instant, in milliseconds (Kathmandu: +20,700,000). */
export const offsetAt = (timeZone: string, instant: number): number =>
  wallClock(timeZone, instant) - Math.floor(instant / 1000) * 1000

/** The local date (day number) of an instant. */
export const localDayOf = (timeZone: string, instant: number): number =>
  Math.floor(wallClock(timeZone, instant) / DAY_MS)

/**
 * The first instant of a local day: local midnight, or the transition when midnight is skipped. Exact: the offsets
 * in force a day before and a day after give the candidates, a candidate is kept only if it reads as 00:00:00 locally,
 * and the earliest such wins (a repeated midnight); with none (a gap), the transition is found by bisection.
 */
export const startOfLocalDay = (timeZone: string, day: number, offsets?: Map<number, number>): number => {
  const wall = day * DAY_MS
  // Consecutive days share their probes (day d's "after" is day d+2's "before"): an optional cache.
  const offset = (t: number) => {
    let o = offsets?.get(t)
    if (o === undefined) {
      o = offsetAt(timeZone, t)
      offsets?.set(t, o)
    }
    return o
  }
  const before = wall - offset(wall - DAY_MS)
  const after = wall - offset(wall + DAY_MS)
  const valid = (before === after ? [before] : [before, after]).filter((t) => wallClock(timeZone, t) === wall)
  if (valid.length > 0) return Math.min(...valid)
  // A gap: the day begins at the first instant whose wall clock is at or past its midnight.
  let lo = Math.min(before, after) // wall clock before midnight
  let hi = Math.max(before, after) // wall clock past midnight
  while (hi - lo > 1000) {
    const mid = lo + Math.floor((hi - lo) / 2000) * 1000
    if (wallClock(timeZone, mid) >= wall) hi = mid
    else lo = mid
  }
  return hi
}

// ---------------------------------------------------------------------------------------------------------------
// Calendar dates

/** A valid calendar date `YYYY-MM-DD` from 1970-01-01 to 9999-12-31 as a day number, else undefined. */
export const parseDate = (text: string): number | undefined => {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text)
  if (m === null) return undefined
  const [year, month, day] = [Number(m[1]), Number(m[2]), Number(m[3])]
  if (month < 1 || month > 12 || day < 1 || day > daysInMonth(year, month)) return undefined
  const n = Date.UTC(year, month - 1, day) / DAY_MS
  return n >= MIN_DAY && n <= MAX_DAY ? n : undefined
}

export const formatDate = (day: number): string => new Date(day * DAY_MS).toISOString().slice(0, 10)

const daysInMonth = (year: number, month: number): number => new Date(Date.UTC(year, month, 0)).getUTCDate()

/** The Monday on or before a day (1970-01-01, day 0, was a Thursday). */
export const mondayOf = (day: number): number => day - ((((day + 3) % 7) + 7) % 7)

/** The first day of the month after the one holding `day`. */
export const nextMonthStart = (day: number): number => {
  const d = new Date(day * DAY_MS)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) / DAY_MS
}

/** The day after the last of the bucket that starts on `day`, by granularity (before clipping to the range). */
const nextBoundary = (granularity: Granularity, day: number): number =>
  granularity === "day" ? day + 1 : granularity === "week" ? mondayOf(day) + 7 : nextMonthStart(day)

// ---------------------------------------------------------------------------------------------------------------
// The plan

/**
 * The resolved range and its buckets, or every problem of the query (paths `timezone`, `range`, `from`, `to`).
 * Presets end today in the zone, today included. `custom` needs both bounds, from ≤ to, at most 366 days.
 */
export const planBuckets = (query: BucketQuery): PlanResult => {
  const issues: Array<BucketIssue> = []
  const timezone = resolveTimeZone(query.timezone)
  if (timezone === undefined) {
    issues.push({
      path: "timezone",
      message: `'${query.timezone}' is not a known IANA time zone (e.g. Africa/Lagos, UTC)`
    })
  }
  let first: number | undefined
  let last: number | undefined
  if (query.range === "custom") {
    const bound = (path: "from" | "to", value: string | undefined) => {
      if (value === undefined) {
        issues.push({ path, message: "is required when range is custom" })
        return undefined
      }
      const day = parseDate(value)
      if (day === undefined)
        issues.push({ path, message: `'${value}' is not a calendar date YYYY-MM-DD from 1970 to 9999` })
      return day
    }
    first = bound("from", query.from)
    last = bound("to", query.to)
    if (first !== undefined && last !== undefined) {
      if (first > last) issues.push({ path: "from", message: "must not be after to" })
      else if (last - first + 1 > MAX_CUSTOM_DAYS) {
        issues.push({
          path: "to",
          message: `the range covers ${last - first + 1} days; at most ${MAX_CUSTOM_DAYS} are allowed`
        })
      }
    }
  } else {
    for (const path of ["from", "to"] as const) {
      if (query[path] !== undefined) issues.push({ path, message: "applies only to range=custom" })
    }
  }
  if (issues.length > 0 || timezone === undefined) return { _tag: "Invalid", issues }
  if (query.range !== "custom") {
    last = localDayOf(timezone, query.now)
    first = last - PRESET_DAYS[query.range] + 1
  }
  const from = first!
  const to = last!

  // Boundaries in local days, then each boundary's instant once (a bucket's end is the next one's start).
  const days: Array<number> = [from]
  while (days[days.length - 1]! <= to) {
    days.push(Math.min(nextBoundary(query.granularity, days[days.length - 1]!), to + 1))
  }
  const offsets = new Map<number, number>()
  const instants = days.map((day) => startOfLocalDay(timezone, day, offsets))
  const buckets: Array<Bucket> = []
  for (let i = 0; i < days.length - 1; i++) {
    buckets.push({ label: formatDate(days[i]!), startMs: instants[i]!, endMs: instants[i + 1]! })
  }
  return {
    _tag: "Ok",
    plan: {
      timezone,
      from: formatDate(from),
      to: formatDate(to),
      startMs: instants[0]!,
      endMs: instants[instants.length - 1]!,
      buckets
    }
  }
}

/** The index of the bucket holding an instant, or -1 outside the range (binary search over the sorted buckets). */
export const bucketIndexOf = (
  buckets: ReadonlyArray<{ readonly startMs: number; readonly endMs: number }>,
  instant: number
): number => {
  let lo = 0
  let hi = buckets.length - 1
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const b = buckets[mid]!
    if (instant < b.startMs) hi = mid - 1
    else if (instant >= b.endMs) lo = mid + 1
    else return mid
  }
  return -1
}
