/**
 * Reset windows and billing periods (decisions.md §5, §7). Everything is UTC: a window boundary must not move
 * with the server's zone or with daylight saving, so "daily" is exactly 24 h and "monthly" is calendar months.
 */

export type ResetInterval =
  | "none"
  | "5min"
  | "15min"
  | "30min"
  | "hourly"
  | "daily"
  | "weekly"
  | "monthly"
  | "quarterly"
  | "semi_annual"
  | "yearly"

export type BillingInterval = "daily" | "weekly" | "monthly" | "quarterly" | "yearly"

/** An interval that actually steps: every reset interval except "none", which includes every billing interval. */
export type SteppingInterval = Exclude<ResetInterval, "none">

export interface Window {
  readonly start: number
  /** Exclusive: the instant `end` already belongs to the next window. */
  readonly end: number
}

export const DEFAULT_RESET: ResetInterval = "monthly"

export const RESET_INTERVALS: ReadonlyArray<ResetInterval> = [
  "none",
  "5min",
  "15min",
  "30min",
  "hourly",
  "daily",
  "weekly",
  "monthly",
  "quarterly",
  "semi_annual",
  "yearly"
]

export const BILLING_INTERVALS: ReadonlyArray<BillingInterval> = ["daily", "weekly", "monthly", "quarterly", "yearly"]

const MINUTE = 60_000
const HOUR = 60 * MINUTE
const DAY = 24 * HOUR

const FIXED_MS: Partial<Record<SteppingInterval, number>> = {
  "5min": 5 * MINUTE,
  "15min": 15 * MINUTE,
  "30min": 30 * MINUTE,
  hourly: HOUR,
  daily: DAY,
  weekly: 7 * DAY
}

const MONTHS: Partial<Record<SteppingInterval, number>> = {
  monthly: 1,
  quarterly: 3,
  semi_annual: 6,
  yearly: 12
}

export const isResetInterval = (s: string): s is ResetInterval => (RESET_INTERVALS as ReadonlyArray<string>).includes(s)

/**
 * Catalog input to a reset interval. "never" is the alias some catalogs-as-code use for "none"; `null` is how the
 * wire says "no reset" (decisions.md §1), so it means "none" too, while an absent field takes the documented
 * default. Unknown strings give `undefined` so the catalog can report them rather than guess.
 */
export const normalizeReset = (input: string | null | undefined): ResetInterval | undefined => {
  if (input === undefined) return DEFAULT_RESET
  if (input === null || input === "never") return "none"
  return isResetInterval(input) ? input : undefined
}

const daysInMonth = (year: number, month: number): number => new Date(Date.UTC(year, month + 1, 0)).getUTCDate()

/**
 * `months` calendar months after the anchor, day clamped to the target month's last day, time of day kept.
 * Always computed from the anchor: stepping Jan 31 → Feb 28 → Mar 28 would lose the 31st for good.
 */
const addMonths = (anchorMs: number, months: number): number => {
  const a = new Date(anchorMs)
  const total = a.getUTCMonth() + months
  const year = a.getUTCFullYear() + Math.floor(total / 12)
  const month = ((total % 12) + 12) % 12
  const day = Math.min(a.getUTCDate(), daysInMonth(year, month))
  const d = new Date(0)
  // setUTCFullYear rather than Date.UTC: Date.UTC maps years 0–99 to 1900–1999.
  d.setUTCFullYear(year, month, day)
  d.setUTCHours(a.getUTCHours(), a.getUTCMinutes(), a.getUTCSeconds(), a.getUTCMilliseconds())
  return d.getTime()
}

/** The n-th boundary after `anchorMs` (n = 0 is the anchor itself; negative n goes back). */
export const addInterval = (anchorMs: number, interval: SteppingInterval, n: number): number => {
  if (!Number.isInteger(n)) throw new RangeError(`addInterval: n must be an integer, got ${n}`)
  const fixed = FIXED_MS[interval]
  if (fixed !== undefined) return anchorMs + n * fixed
  const months = MONTHS[interval]
  if (months === undefined) throw new RangeError(`addInterval: unknown interval ${interval}`)
  return addMonths(anchorMs, n * months)
}

/**
 * The window containing `nowMs`, or `null` for "none" (a balance that never resets has no window).
 * Before the anchor the first window is returned: a subscription that starts in the future is still in its first
 * period as far as balances go.
 */
export const currentWindow = (anchorMs: number, interval: ResetInterval, nowMs: number): Window | null => {
  if (interval === "none") return null
  if (nowMs < anchorMs) return { start: anchorMs, end: addInterval(anchorMs, interval, 1) }

  const fixed = FIXED_MS[interval]
  if (fixed !== undefined) {
    const k = Math.floor((nowMs - anchorMs) / fixed)
    const start = anchorMs + k * fixed
    return { start, end: start + fixed }
  }

  const months = MONTHS[interval]
  if (months === undefined) throw new RangeError(`currentWindow: unknown interval ${interval}`)
  // Estimate from the calendar-month difference, then correct: day clamping and time of day can put the estimate
  // one step off either way, never more.
  const a = new Date(anchorMs)
  const now = new Date(nowMs)
  const monthDiff = (now.getUTCFullYear() - a.getUTCFullYear()) * 12 + (now.getUTCMonth() - a.getUTCMonth())
  let k = Math.max(0, Math.floor(monthDiff / months))
  while (k > 0 && addInterval(anchorMs, interval, k) > nowMs) k--
  while (addInterval(anchorMs, interval, k + 1) <= nowMs) k++
  return { start: addInterval(anchorMs, interval, k), end: addInterval(anchorMs, interval, k + 1) }
}
