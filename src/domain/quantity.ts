/**
 * Quantities (usage, balances, credits, limits) are stored as whole micro-units: value × 10^6 in a BIGINT.
 * That keeps them exact on both databases and summable in SQL; six decimal places is finer than any meter a
 * vendor reports (a request for more precision is rejected at the edge, not rounded silently).
 */
import { BigDecimal } from "effect"
import { VALUE_MAX } from "../api/numbers.ts"
import { type Decimal, toDecimal, toNumber } from "./money.ts"

export const MICRO_SCALE = 6
const FACTOR = 1_000_000n
const POWERS = Array.from({ length: MICRO_SCALE + 1 }, (_, i) => 10n ** BigInt(i))

/** Whether a number can be held exactly as micro-units. */
export const fitsMicro = (value: number): boolean =>
  Number.isFinite(value) &&
  Math.abs(value) <= VALUE_MAX &&
  (Number.isInteger(value) || BigDecimal.normalize(toDecimal(value)).scale <= MICRO_SCALE)

/** An exact decimal to micro-units, rounding any finer fraction up (never under-count consumption). */
export const toMicro = (value: Decimal | number | string): bigint => {
  if (typeof value === "number" && Number.isSafeInteger(value)) return BigInt(value) * FACTOR
  const d = toDecimal(value)
  // Six decimal places or fewer (every stored quantity and most sums of them): exact by a power of ten, without the
  // general path's rescaling (a tenth of a batch's CPU went to it).
  if (d.scale >= 0 && d.scale <= MICRO_SCALE) return d.value * POWERS[MICRO_SCALE - d.scale]!
  const scaled = BigDecimal.scale(d, MICRO_SCALE + 12).value
  const divisor = 10n ** 12n
  const q = scaled / divisor
  return scaled % divisor > 0n ? q + 1n : q
}

/** Micro-units as the database returns them (number, or bigint past 2^53) to an exact decimal. */
export const fromMicro = (micro: number | bigint | string): Decimal => BigDecimal.make(BigInt(micro), MICRO_SCALE)

/** Micro-units to a wire number (exact for any value that fits a JSON number's integer range). */
export const microToNumber = (micro: number | bigint | string): number => toNumber(fromMicro(micro))

/** A database parameter: a number while exact, else the decimal string of the bigint. */
export const microParam = (micro: bigint): number | string =>
  micro <= BigInt(Number.MAX_SAFE_INTEGER) && micro >= -BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(micro)
    : micro.toString()

export const FACTOR_BIGINT = FACTOR
