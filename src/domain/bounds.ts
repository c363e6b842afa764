/**
 * The bounds of stored numbers (decisions.md §1, docs/decisions.md "Numbers"): the wire ranges of src/api/numbers.ts
 * in the units the service computes with, the exact checks writes make, and how a value stored before the bounds
 * existed is read (never a defect: beyond its bound it is read as the bound).
 */
import { BigDecimal, Option } from "effect"
import { AMOUNT_MAX, COUNT_MAX, MONEY_MAX, TRIAL_DAYS_MAX, VALUE_MAX } from "../api/numbers.ts"
import { type Decimal, format, parseDecimal } from "./money.ts"
import { FACTOR_BIGINT } from "./quantity.ts"

export { AMOUNT_MAX, COUNT_MAX, MONEY_MAX, TRIAL_DAYS_MAX, VALUE_MAX }

/**
 * The most a credit balance (bonus, purchased) may hold and one request may cost (value × credit cost), in
 * micro-units: a credit amount's bound, 10^12.
 */
export const AMOUNT_MAX_MICRO = BigInt(AMOUNT_MAX) * FACTOR_BIGINT
/**
 * The most one reset window counts, as usage and as overage: 9,000,000,000,000 units, what a BIGINT of micro-units
 * holds (9.22e12) rounded down. Above a limit's 1e12 so that the exact sum of several subscriptions' limits can be
 * used in full (nine maximal plans).
 */
export const WINDOW_MAX = 9_000_000_000_000
export const WINDOW_MAX_MICRO = BigInt(WINDOW_MAX) * FACTOR_BIGINT
/** `maxOverageUnits` in micro-units. */
export const COUNT_MAX_MICRO = BigInt(COUNT_MAX) * FACTOR_BIGINT
/** What a BIGINT column holds. */
export const INT64_MAX = 9_223_372_036_854_775_807n

/** The bound in words, as messages and the OpenAPI document write it. */
export const AMOUNT_MAX_TEXT = String(AMOUNT_MAX)

// ---- reading values stored before the bounds ----

const clampNumber = (n: number, max: number): number => (n > max ? max : n < 0 ? 0 : n === 0 ? 0 : n)

/**
 * A stored catalog quantity (a limit, a credit cost, a pack's credits...): a finite number in [0, max]. Anything
 * else the service once accepted (1e100, 1e308) is read as the bound; something that is not a number at all is
 * read as 0. Decimals beyond six are kept (micro-units round them up where they are drawn).
 */
export const storedQuantity = (value: unknown, max: number): number => {
  const n = typeof value === "number" ? value : Number(value)
  if (Number.isNaN(n)) return 0
  return clampNumber(n, max)
}

export const storedNullableQuantity = (value: unknown, max: number): number | null =>
  value === null || value === undefined ? null : storedQuantity(value, max)

/** A stored whole number (trial days, a count): in [0, max], an integer. */
export const storedInteger = (value: unknown, max: number): number => Math.floor(storedQuantity(value, max))

const MAX_DECIMAL: Record<number, Decimal> = {}
const decimalOf = (max: number): Decimal => (MAX_DECIMAL[max] ??= BigDecimal.make(BigInt(max), 0))

/**
 * A stored decimal string of money (a price, a cap): exact when it parses and is within [0, max]; beyond the bound
 * (or an exponent too big to compute with, like "1e+100") it is read as the bound; unreadable text as 0.
 */
export const storedMoney = (text: string, max: number = MONEY_MAX): string => {
  const parsed = parseDecimal(text.trim())
  if (Option.isSome(parsed)) {
    const d = parsed.value
    if (BigDecimal.greaterThan(d, decimalOf(max))) return String(max)
    if (BigDecimal.isNegative(d)) return "0"
    return format(d)
  }
  // Not computable exactly: an exponent past what the service computes with either way.
  const n = Number(text)
  return n >= 1 ? String(max) : "0"
}

/**
 * A stored BIGINT of micro-units (a balance, a cap): exact when it is an integer that fits 64 bits. SQLite keeps a
 * number too big for its integers as a REAL (text "1.0e+22" once cast), which is not exact: such a value is read as
 * `beyond` (its bound), never as a defect.
 */
export const storedMicro = (value: unknown, beyond: bigint = AMOUNT_MAX_MICRO): bigint => {
  if (typeof value === "bigint") return value
  if (typeof value === "number") {
    if (Number.isSafeInteger(value)) return BigInt(value)
    if (Number.isNaN(value)) return 0n
    return value < 0 ? -beyond : beyond
  }
  const text = String(value ?? "0").trim()
  if (/^-?\d{1,19}$/.test(text)) {
    const big = BigInt(text)
    if (big <= INT64_MAX && big >= -INT64_MAX - 1n) return big
  }
  const n = Number(text)
  if (Number.isNaN(n)) return 0n
  return n < 0 ? -beyond : beyond
}

/** A stored cap in micro-units (`maxOverageUnits` of a customer's feature config): read as at most its bound. */
export const storedCapMicro = (value: unknown, max: bigint): bigint => {
  const micro = storedMicro(value, max)
  return micro > max ? max : micro < 0n ? 0n : micro
}
