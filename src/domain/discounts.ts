/**
 * Discounts on invoice lines (decisions.md §15): pure, exact, in whole minor units of the invoice's currency (whose
 * exponent the amounts already carry: 500 NGN is 50000 kobo, 500 JPY is 500 yen). A coupon covers the lines of the
 * plans it names (all plans when it names none); lines of zero or less (credits) are never discounted, and no line's
 * discount exceeds its amount, so a total never goes below zero.
 */
import { BigDecimal } from "effect"
import { type Decimal, min, roundHalfUp, sumAll, ZERO } from "./money.ts"

export interface CouponTerms {
  readonly slug: string
  /** 0 < p ≤ 100, up to 2 decimals; or null for an amount off. */
  readonly percentOff: Decimal | null
  /** Whole minor units of `currency`; or null for a percentage. */
  readonly amountOff: Decimal | null
  readonly currency: string | null
  /** Plan slugs it applies to; null: every plan. */
  readonly plans: ReadonlyArray<string> | null
}

export interface DiscountableLine {
  /** What the line still owes (its amount less any earlier discount). */
  readonly amount: Decimal
  /** The plan the line belongs to (its fee or its usage); null for a line of no plan. */
  readonly plan: string | null
}

const HUNDRED = BigDecimal.make(100n, 0)

/** Whether a coupon can discount an invoice in this currency at all (an amount off is in one currency only). */
export const couponFitsCurrency = (coupon: CouponTerms, currency: string): boolean =>
  coupon.amountOff === null || (coupon.currency ?? "").toUpperCase() === currency.toUpperCase()

/** Whether a line is one the coupon covers: a positive line of a plan it names (or of any plan, naming none). */
export const covers = (coupon: CouponTerms, line: DiscountableLine): boolean =>
  line.plan !== null &&
  BigDecimal.greaterThan(line.amount, ZERO) &&
  (coupon.plans === null || coupon.plans.includes(line.plan))

/** Exact a × b / c rounded half-up to a whole unit, on scaled bigints (every operand non-negative here). */
const shareOf = (a: Decimal, b: Decimal, c: Decimal): Decimal => {
  const product = BigDecimal.multiply(a, b)
  const scale = Math.max(product.scale, c.scale)
  const x = BigDecimal.scale(product, scale).value
  const y = BigDecimal.scale(c, scale).value
  return BigDecimal.make(x / y + ((x % y) * 2n >= y ? 1n : 0n), 0)
}

/**
 * The coupon's discount on each line, in the lines' order (zero on a line it does not cover). A percentage: each
 * covered line × p / 100, rounded half-up. An amount off: capped at the covered lines' sum, spread over them in
 * proportion to their amounts, each share rounded half-up and the last covered line taking the remainder; a share is
 * never more than what is left to spread nor than its line (only many tiny lines could round past either).
 */
export const lineDiscounts = (coupon: CouponTerms, lines: ReadonlyArray<DiscountableLine>): ReadonlyArray<Decimal> => {
  const covered = lines.map((l) => covers(coupon, l))
  if (coupon.percentOff !== null) {
    const p = coupon.percentOff
    return lines.map((l, i) => (covered[i] ? shareOf(l.amount, p, HUNDRED) : ZERO))
  }
  const base = sumAll(lines.filter((_, i) => covered[i]).map((l) => l.amount))
  if (coupon.amountOff === null || !BigDecimal.greaterThan(base, ZERO)) return lines.map(() => ZERO)
  const total = roundHalfUp(min(coupon.amountOff, base))
  const last = covered.lastIndexOf(true)
  let left = total
  return lines.map((l, i) => {
    if (!covered[i]) return ZERO
    const share = i === last ? left : min(shareOf(total, l.amount, base), left)
    const taken = min(share, roundHalfUp(l.amount))
    left = BigDecimal.subtract(left, taken)
    return taken
  })
}
