/**
 * Plan changes (decisions.md §14): which way a change goes by default, and what it prorates. Pure.
 *
 * Prices are in minor units already (decisions.md §1), so "rounded to the currency's minor unit" is rounding to a
 * whole number of minor units whatever the currency's exponent (a yen, a fils). Every proration amount is one exact
 * rational (price × seconds / seconds) rounded once, half-up: no intermediate rounding, no floating point.
 */
import { BigDecimal } from "effect"
import type { Decimal } from "./money.ts"
import type { BillingInterval } from "./periods.ts"

export type ChangeWhen = "now" | "period_end"

/**
 * Periods of each interval in a year, by the §13 normalisation (daily × 30 per month, weekly × 52/12, quarterly / 3,
 * yearly / 12): a monthly equivalent is `price × PER_YEAR / 12`, so comparing `price × PER_YEAR` compares monthly
 * equivalents exactly, in integers.
 */
const PER_YEAR: Record<BillingInterval, bigint> = { daily: 360n, weekly: 52n, monthly: 12n, quarterly: 4n, yearly: 1n }

/** A price's monthly equivalent as an exact fraction `{ numerator, denominator }` of minor units. */
export const monthlyEquivalent = (
  price: Decimal,
  interval: BillingInterval | null
): { readonly numerator: bigint; readonly denominator: bigint } => {
  const n = BigDecimal.normalize(price)
  const scale = 10n ** BigInt(Math.max(0, n.scale))
  const value = n.scale < 0 ? n.value * 10n ** BigInt(-n.scale) : n.value
  // A price with no interval (one-time, or free without one) is compared as it is.
  const perYear = interval === null ? 12n : PER_YEAR[interval]
  return { numerator: value * perYear, denominator: scale * 12n }
}

/** −1, 0 or 1 as `a`'s monthly equivalent is below, equal to or above `b`'s. */
export const compareMonthly = (
  a: { readonly price: Decimal; readonly interval: BillingInterval | null },
  b: { readonly price: Decimal; readonly interval: BillingInterval | null }
): -1 | 0 | 1 => {
  const x = monthlyEquivalent(a.price, a.interval)
  const y = monthlyEquivalent(b.price, b.interval)
  const left = x.numerator * y.denominator
  const right = y.numerator * x.denominator
  return left < right ? -1 : left > right ? 1 : 0
}

export interface ChangeSide {
  readonly price: Decimal
  readonly interval: BillingInterval | null
}

/**
 * The default `when` of §14: from a trial, or a change of interval, or to a higher (or equal) monthly-equivalent
 * price: `now`; to a lower one or to a free plan: `period_end`. A period that never ends has no end to wait for:
 * `now`. Equal prices change `now`: the credit and the charge are then the same rounded amount, so nothing moves.
 */
export const defaultWhen = (input: {
  readonly from: ChangeSide
  readonly to: ChangeSide
  readonly trialing: boolean
  readonly periodEnds: boolean
}): ChangeWhen => {
  if (input.trialing || !input.periodEnds) return "now"
  if (BigDecimal.isZero(input.to.price)) return BigDecimal.isZero(input.from.price) ? "now" : "period_end"
  if (input.from.interval !== input.to.interval) return "now"
  return compareMonthly(input.to, input.from) >= 0 ? "now" : "period_end"
}

/** Whole seconds between two instants as a clock of seconds sees them (both floored), never negative. */
export const secondsBetween = (fromMs: number, toMs: number): bigint => {
  const d = BigInt(Math.floor(toMs / 1000)) - BigInt(Math.floor(fromMs / 1000))
  return d < 0n ? 0n : d
}

/** `price × numerator / denominator`, rounded once half-up to a whole minor unit (price and result ≥ 0). */
export const proratedAmount = (price: Decimal, numerator: bigint, denominator: bigint): bigint => {
  if (denominator <= 0n) throw new RangeError("proratedAmount: the period has no length")
  const n = BigDecimal.normalize(price)
  if (n.value < 0n || numerator < 0n) throw new RangeError("proratedAmount: negative price or seconds")
  // price = value / 10^scale (scale < 0 means value × 10^-scale)
  const num = n.scale < 0 ? n.value * 10n ** BigInt(-n.scale) * numerator : n.value * numerator
  const den = n.scale < 0 ? denominator : denominator * 10n ** BigInt(n.scale)
  const q = num / den
  return (num % den) * 2n >= den ? q + 1n : q
}

export interface Proration {
  /** What the old plan's unused time is worth: a positive number, shown as a negative line. */
  readonly credit: bigint
  /** What the new plan costs for the rest of the period. */
  readonly charge: bigint
  readonly periodSeconds: bigint
  readonly remainingSeconds: bigint
}

/**
 * Proration by the second of a change at `at` inside the period `[periodStart, periodEnd)` (Stripe's model):
 * credit = old price × unused seconds / period seconds, charge = new price × remaining seconds / period seconds.
 * The unused and the remaining seconds are the same span, from the change to the period's end.
 */
export const prorate = (input: {
  readonly oldPrice: Decimal
  readonly newPrice: Decimal
  readonly periodStart: number
  readonly periodEnd: number
  readonly at: number
}): Proration => {
  const periodSeconds = secondsBetween(input.periodStart, input.periodEnd)
  if (periodSeconds === 0n) return { credit: 0n, charge: 0n, periodSeconds, remainingSeconds: 0n }
  const raw = secondsBetween(input.at, input.periodEnd)
  const remainingSeconds = raw > periodSeconds ? periodSeconds : raw
  return {
    credit: proratedAmount(input.oldPrice, remainingSeconds, periodSeconds),
    charge: proratedAmount(input.newPrice, remainingSeconds, periodSeconds),
    periodSeconds,
    remainingSeconds
  }
}

/**
 * What a change's invoice settles: its subtotal (charge − credit, may be negative), the total to collect (never below
 * zero), and the surplus of credit that goes to the customer's credit balance.
 */
export const settle = (
  credit: bigint,
  charge: bigint
): { readonly subtotal: bigint; readonly total: bigint; readonly surplus: bigint } => {
  const subtotal = charge - credit
  return subtotal >= 0n ? { subtotal, total: subtotal, surplus: 0n } : { subtotal, total: 0n, surplus: -subtotal }
}

/** Of a credit balance and an amount due, what the balance pays (never more than either). */
export const creditToApply = (balance: bigint, due: bigint): bigint =>
  balance <= 0n || due <= 0n ? 0n : balance < due ? balance : due
