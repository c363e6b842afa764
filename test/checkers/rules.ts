/**
 * §15–§16 of the contract decisions, recomputed independently of the service's code: exact rationals over BigInt,
 * never binary floating point. Every helper here reads only what a vendor sent (the catalog, the customer) and what
 * the API answered (line amounts), so the checker judges the service's numbers from the rules alone.
 */

/** An exact rational number: `num / den`, `den > 0`. */
export interface Q {
  readonly num: bigint
  readonly den: bigint
}

/** A decimal as the vendor wrote it (a JSON number or string such as 0.333 or "7.5"), exactly. */
export const q = (value: number | string | bigint): Q => {
  if (typeof value === "bigint") return { num: value, den: 1n }
  const text = String(value)
  const match = /^(-?)(\d+)(?:\.(\d+))?$/.exec(text)
  if (match === null) throw new Error(`not a plain decimal: ${text}`)
  const fraction = match[3] ?? ""
  const num = BigInt(match[2]! + fraction) * (match[1] === "-" ? -1n : 1n)
  return { num, den: 10n ** BigInt(fraction.length) }
}

export const add = (a: Q, b: Q): Q => ({ num: a.num * b.den + b.num * a.den, den: a.den * b.den })
export const mul = (a: Q, b: Q): Q => ({ num: a.num * b.num, den: a.den * b.den })
export const div = (a: Q, b: Q): Q => {
  if (b.num === 0n) throw new Error("division by zero")
  const sign = b.num < 0n ? -1n : 1n
  return { num: a.num * b.den * sign, den: a.den * b.num * sign }
}

/** Rounded half-up (half away from zero) to a whole minor unit, as §1 says every computed amount is. */
export const halfUp = (x: Q): bigint => {
  const negative = x.num < 0n
  const n = negative ? -x.num : x.num
  const whole = n / x.den
  const rounded = (n % x.den) * 2n >= x.den ? whole + 1n : whole
  return negative ? -rounded : rounded
}

export const sub = (a: Q, b: Q): Q => add(a, { num: -b.num, den: b.den })
/** Negative, zero or positive as `a` is below, at or above `b`. */
export const cmp = (a: Q, b: Q): number => {
  const d = a.num * b.den - b.num * a.den
  return d < 0n ? -1 : d > 0n ? 1 : 0
}
const minQ = (a: Q, b: Q): Q => (cmp(a, b) <= 0 ? a : b)
/** A rational as a plain decimal when it is one (units of usage have at most 6 places). */
export const show = (x: Q): string => {
  for (let places = 0; places <= 12; places++) {
    const scale = 10n ** BigInt(places)
    if ((x.num * scale) % x.den === 0n) {
      const v = (x.num * scale) / x.den
      const neg = v < 0n
      const digits = (neg ? -v : v).toString().padStart(places + 1, "0")
      return (neg ? "-" : "") + (places === 0 ? digits : `${digits.slice(0, -places)}.${digits.slice(-places)}`)
    }
  }
  return `${x.num}/${x.den}`
}

export const sum = (values: ReadonlyArray<bigint>): bigint => values.reduce((s, v) => s + v, 0n)
export const min = (a: bigint, b: bigint): bigint => (a < b ? a : b)
export const max = (a: bigint, b: bigint): bigint => (a > b ? a : b)

// --- Usage rating (§1): one line's amount, rounded half-up once ---------------------------------------------------

export interface Tier {
  readonly upTo: number | null
  readonly unitPrice: number
  readonly flatFee: number
}

/**
 * A usage feature's pricing. `billingUnits` (default 1) is the package size: the catalog's `package` model bills whole
 * packages, so units are rounded up to whole packages (per tier for tiered pricing) before they are priced. This is the
 * service's rating (the peer API's package semantics, §3), not a rule of §15–§16; the checker follows it to reach the
 * line amounts that discounts and taxes start from.
 */
export type Pricing =
  | { readonly kind: "flat"; readonly pricePerUnit: number; readonly billingUnits?: number }
  | { readonly kind: "graduated" | "volume"; readonly tiers: ReadonlyArray<Tier>; readonly billingUnits?: number }

/** Whole packages of `size` units in `units`, rounded up. */
export const packages = (units: Q, size: number): Q => {
  const per = div(units, q(size))
  const whole = per.num / per.den
  return q(per.num % per.den === 0n ? whole : whole + 1n)
}

/** One tier's share of a quantity: its units and amount, the amount rounded half-up (§1 rounds each tier amount). */
export interface TierShare {
  readonly tier: number
  readonly units: Q
  readonly amount: bigint
}

/**
 * The tiers `units` fall into: graduated, each tier's units at its price and its flat fee once the quantity reaches
 * into it; volume, every unit at the price of the tier the whole quantity falls in. §1 lists the tier amount among the
 * computed amounts rounded half-up, so the line is the sum of its rounded tier amounts.
 */
export const tierShares = (pricing: Exclude<Pricing, { kind: "flat" }>, units: Q): ReadonlyArray<TierShare> => {
  const tiers = pricing.tiers
  const size = pricing.billingUnits ?? 1
  const amount = (tier: Tier, n: Q) => halfUp(add(mul(packages(n, size), q(tier.unitPrice)), q(tier.flatFee)))
  if (pricing.kind === "volume") {
    const index = tiers.findIndex((t) => t.upTo === null || cmp(units, q(t.upTo)) <= 0)
    const at = index === -1 ? tiers.length - 1 : index
    return [{ tier: at, units, amount: amount(tiers[at]!, units) }]
  }
  const shares: Array<TierShare> = []
  let from = q(0)
  for (const [index, tier] of tiers.entries()) {
    if (cmp(units, from) <= 0) break
    const to = tier.upTo === null ? units : minQ(units, q(tier.upTo))
    shares.push({ tier: index, units: sub(to, from), amount: amount(tier, sub(to, from)) })
    from = to
  }
  return shares
}

/** A usage line's amount: units × price half-up once, or the sum of its rounded tier amounts. */
export const ratedAmount = (pricing: Pricing, units: Q): bigint =>
  pricing.kind === "flat"
    ? halfUp(mul(packages(units, pricing.billingUnits ?? 1), q(pricing.pricePerUnit)))
    : sum(tierShares(pricing, units).map((t) => t.amount))

// --- Discounts (§15) ---------------------------------------------------------------------------------------------

export type CouponTerms =
  | { readonly slug: string; readonly percentOff: number; readonly plans?: ReadonlyArray<string> }
  | {
      readonly slug: string
      readonly amountOff: number
      readonly currency: string
      readonly plans?: ReadonlyArray<string>
    }

export interface LineFacts {
  /** The line's amount as the API gives it (minor units). */
  readonly amount: bigint
  /** The plan the line belongs to (its fee or its usage), from the catalog the checker synced. */
  readonly plan: string | undefined
}

/**
 * Each line's discount under a coupon (§15): the lines of the plans it covers; a percentage per line half-up; an
 * amount off spread in proportion to the covered lines' amounts, half-up, the last covered line the remainder, capped
 * at their sum. Lines of no plan and lines of zero or less are not covered (nothing to take a discount from).
 */
export const lineDiscounts = (
  coupon: CouponTerms,
  currency: string,
  lines: ReadonlyArray<LineFacts>
): ReadonlyArray<bigint> => {
  const covered = lines.map(
    (l) => l.plan !== undefined && l.amount > 0n && (coupon.plans === undefined || coupon.plans.includes(l.plan))
  )
  if ("percentOff" in coupon) {
    const p = q(coupon.percentOff)
    return lines.map((l, i) => (covered[i] ? halfUp(div(mul(q(l.amount), p), q(100))) : 0n))
  }
  if (coupon.currency.toUpperCase() !== currency.toUpperCase()) return lines.map(() => 0n)
  const base = sum(lines.filter((_, i) => covered[i]).map((l) => l.amount))
  const off = min(BigInt(coupon.amountOff), base)
  const last = covered.lastIndexOf(true)
  let left = off
  return lines.map((l, i) => {
    if (!covered[i]) return 0n
    // The last covered line takes the remainder; the others their proportional share, half-up (never past what is
    // left nor the line itself, so the remainder cannot go negative).
    const share = i === last ? left : min(min(halfUp(div(mul(q(off), q(l.amount)), q(base))), left), l.amount)
    left -= share
    return share
  })
}

// --- Taxes (§16) --------------------------------------------------------------------------------------------------

export interface TaxRate {
  readonly slug: string
  readonly name: string
  readonly percentage: number
  readonly inclusive: boolean
  readonly country: string
  readonly state?: string
}

export interface Buyer {
  readonly country?: string
  readonly state?: string
  readonly taxExempt: "none" | "exempt" | "reverse_charge"
}

/** The rates matching the buyer's country and, for a rate with a state, its state. */
export const matchingRates = (rates: ReadonlyArray<TaxRate>, buyer: Buyer): ReadonlyArray<TaxRate> =>
  buyer.country === undefined
    ? []
    : rates.filter(
        (r) =>
          r.country.toUpperCase() === buyer.country!.toUpperCase() &&
          (r.state === undefined || r.state.toUpperCase() === (buyer.state ?? "").toUpperCase())
      )

/** One line's tax by one rate on the amount after its discounts, half-up once; inclusive carved out. */
export const lineTax = (rate: TaxRate, net: bigint, buyer: Buyer): bigint => {
  if (buyer.taxExempt !== "none") return 0n
  const p = q(rate.percentage)
  return rate.inclusive ? halfUp(div(mul(q(net), p), add(q(100), p))) : halfUp(div(mul(q(net), p), q(100)))
}

// --- Documents (§13 money) ----------------------------------------------------------------------------------------

/** The exponents §13 names; every other currency of the checker's catalogs has 2. */
export const exponent = (currency: string): number => ({ JPY: 0, KWD: 3 })[currency.toUpperCase() as "JPY" | "KWD"] ?? 2

/** Minor units in major units by the currency's exponent, digits only (`1231` NGN → `12.31`, `7` JPY → `7`). */
export const majorDigits = (minor: bigint, currency: string): string => {
  const e = exponent(currency)
  const negative = minor < 0n
  const digits = (negative ? -minor : minor).toString().padStart(e + 1, "0")
  const major = e === 0 ? digits : `${digits.slice(0, digits.length - e)}.${digits.slice(digits.length - e)}`
  return (negative ? "-" : "") + major
}
