/**
 * Exact decimal helpers (decisions.md §1: minor units, no binary floating point in money paths).
 */
import { BigDecimal, Either, Option } from "effect"
import { AmountTooLarge } from "./errors.ts"

export type Decimal = BigDecimal.BigDecimal

export const ZERO: Decimal = BigDecimal.make(0n, 0)
/** Plain decimal, optionally with an exponent; no spaces, no empty string, no "1.", no ".5" without a digit before. */
const DECIMAL_RE = /^[+-]?\d+(\.\d+)?([eE][+-]?\d+)?$/

/**
 * Bigger exponents are almost surely hostile ("1e999999999" would allocate a billion-digit bigint the first time
 * it is normalised); nothing the service prices needs more than a few dozen digits either side of the point.
 */
const MAX_ABS_SCALE = 64

/**
 * A decimal string or a number as an exact `BigDecimal`. A number is taken at its shortest round-trip string
 * (`0.1` is 0.1, not 0.1000000000000000055…), which is what the sender meant. NaN and ±Infinity are `None`.
 */
export const parseDecimal = (input: string | number): Option.Option<Decimal> => {
  if (typeof input === "number") {
    // Whole numbers (most quantities and prices) need no string round trip: exact, and far below the scale bounds.
    if (Number.isSafeInteger(input)) return Option.some(BigDecimal.make(BigInt(input), 0))
    if (!Number.isFinite(input)) return Option.none()
    return parseDecimal(String(input))
  }
  if (!DECIMAL_RE.test(input)) return Option.none()
  return Option.filter(
    BigDecimal.fromString(input),
    (d) => Math.abs(d.scale) <= MAX_ABS_SCALE && Math.abs(BigDecimal.normalize(d).scale) <= MAX_ABS_SCALE
  )
}

/** `parseDecimal` for values the program itself vouches for (constants, already-validated input). */
export const unsafeDecimal = (input: string | number): Decimal =>
  Option.getOrThrowWith(parseDecimal(input), () => new RangeError(`not a finite decimal: ${String(input)}`))

/** Accepts either form so callers holding an already-exact value do not round-trip it through a string. */
export const toDecimal = (input: Decimal | string | number): Decimal =>
  BigDecimal.isBigDecimal(input) ? input : unsafeDecimal(input)

/**
 * To a whole minor unit, ties away from zero (1.5 → 2, 2.5 → 3, −1.5 → −2): "half-up" as invoices mean it, so a
 * refund line rounds to the same magnitude as the charge it reverses.
 */
export const roundHalfUp = (d: Decimal): Decimal => BigDecimal.round(d, { scale: 0, mode: "half-from-zero" })

/**
 * For the wire and for quantities; exact for whole minor units up to 2^53. Digits within 2^53 and a scale of 0–22
 * are divided as doubles: both operands are exact, and IEEE division rounds the quotient to the nearest double, which
 * is what parsing its decimal text gives (the text's round trip was ~4% of a batch's CPU).
 */
export const toNumber = (d: Decimal): number => {
  if (d.value <= 9007199254740991n && d.value >= -9007199254740991n && d.scale >= 0 && d.scale <= 22) {
    return d.scale === 0 ? Number(d.value) : Number(d.value) / POWERS_OF_TEN[d.scale]!
  }
  return Number(format(d))
}
const POWERS_OF_TEN = Array.from({ length: 23 }, (_, i) => Number(`1e${i}`))

/**
 * Plain decimal string, never an exponent (BigDecimal.format switches to exponent form at 16 digits of scale,
 * which a `numeric` column or a strict client would not accept). Trailing zeros are dropped: "1.50" → "1.5".
 */
export const format = (d: Decimal): string => {
  const n = BigDecimal.normalize(d)
  const negative = n.value < 0n
  const digits = (negative ? -n.value : n.value).toString()
  let out: string
  if (n.scale <= 0) {
    out = n.value === 0n ? "0" : digits + "0".repeat(-n.scale)
  } else if (n.scale >= digits.length) {
    out = "0." + "0".repeat(n.scale - digits.length) + digits
  } else {
    out = digits.slice(0, digits.length - n.scale) + "." + digits.slice(digits.length - n.scale)
  }
  return negative ? "-" + out : out
}

/** Sum of many, exactly. */
export const sumAll = (ds: Iterable<Decimal>): Decimal => {
  let acc = ZERO
  for (const d of ds) acc = BigDecimal.sum(acc, d)
  return acc
}

export const min = (a: Decimal, b: Decimal): Decimal => (BigDecimal.lessThan(a, b) ? a : b)

export const max = (a: Decimal, b: Decimal): Decimal => (BigDecimal.greaterThan(a, b) ? a : b)

/**
 * Smallest integer ≥ a / b for positive b; used to count billing packages. Done on scaled bigints because
 * BigDecimal division stops at a fixed precision, and ceil of a truncated 5.000…0001 would be 5.
 */
export const ceilDiv = (a: Decimal, b: Decimal): Decimal => {
  if (!BigDecimal.isPositive(b)) throw new RangeError("ceilDiv: divisor must be positive")
  const scale = Math.max(a.scale, b.scale)
  const x = BigDecimal.scale(a, scale).value
  const y = BigDecimal.scale(b, scale).value
  const q = x / y // truncates towards zero
  return BigDecimal.make(x % y !== 0n && x > 0n ? q + 1n : q, 0)
}

// ---- money on the wire ----

/**
 * The most minor units an amount may hold anywhere money leaves the service (API answers, outbound events, provider
 * requests, the dashboard): `Number.MAX_SAFE_INTEGER`, the largest whole number every JSON reader (JavaScript's
 * included) carries exactly. Past it a JSON number is rounded to the nearest double (issue 37 item 5).
 */
export const JSON_MONEY_MAX = 9_007_199_254_740_991n
const JSON_MONEY_MAX_DECIMAL: Decimal = BigDecimal.make(JSON_MONEY_MAX, 0)

/** Whether an amount of minor units is within ±`JSON_MONEY_MAX` (so its whole part leaves as a JSON number exactly). */
export const moneyFitsJson = (amount: Decimal): boolean =>
  BigDecimal.lessThanOrEqualTo(BigDecimal.abs(amount), JSON_MONEY_MAX_DECIMAL)

/**
 * The one check before money is billed or shown: the amount, or `AmountTooLarge` naming `what` it is, its exact
 * amount and the bound. Yield it in an `Effect.gen` (an Either is an effect), or match it.
 */
export const assertMoneyFitsJson = (
  amount: Decimal,
  what: string,
  currency?: string
): Either.Either<Decimal, AmountTooLarge> =>
  moneyFitsJson(amount)
    ? Either.right(amount)
    : Either.left(
        new AmountTooLarge({
          message:
            `${what} would be ${format(amount)} minor units${currency === undefined ? "" : ` of ${currency}`}, past ` +
            `${JSON_MONEY_MAX} (Number.MAX_SAFE_INTEGER), the most a JSON number carries exactly; nothing was changed`
        })
      )
