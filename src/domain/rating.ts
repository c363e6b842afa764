/**
 * Pricing of billable units (decisions.md §1, §3). Amounts are minor units; unit prices may be fractional, so every
 * priced line is rounded half-up to a whole minor unit and the total is the sum of the rounded lines, which is what
 * an invoice showing those lines must add up to.
 */
import { BigDecimal, Option } from "effect"
import {
  ceilDiv,
  type Decimal,
  max,
  min,
  parseDecimal,
  roundHalfUp,
  sumAll,
  toDecimal,
  toNumber,
  ZERO
} from "./money.ts"

export type RatingModel = "package" | "graduated" | "volume"

export const RATING_MODELS: ReadonlyArray<RatingModel> = ["package", "graduated", "volume"]

/** Money may arrive already exact, or as the decimal string / JSON number the catalog held. */
export type DecimalLike = Decimal | string | number

export interface Tier {
  /** Inclusive upper bound in units; `null` = unbounded (only the last tier). */
  readonly upTo: number | null
  /** Price per package of `billingUnits` units. */
  readonly unitPrice: DecimalLike
  /** Charged once when any unit falls into the tier. */
  readonly flatFee?: DecimalLike | undefined
}

export interface Pricing {
  readonly ratingModel?: RatingModel | undefined
  readonly pricePerUnit?: DecimalLike | undefined
  readonly billingUnits?: number | undefined
  readonly tiers?: ReadonlyArray<Tier> | undefined
}

export interface TierLine {
  /** 0-based index into the plan feature's `tiers`. */
  readonly tier: number
  readonly units: number
  /** Packages of `billingUnits` billed in this tier (rounded up). */
  readonly packages: number
  readonly unitPrice: Decimal
  readonly flatFee: Decimal
  /** Rounded half-up to a whole minor unit. */
  readonly amount: Decimal
}

export interface CurrentTier {
  readonly index: number
  readonly startsAt: number
  /** `null` = unbounded. */
  readonly endsAt: number | null
  readonly unitPrice: Decimal
  readonly flatFee: Decimal
}

export interface Rating {
  readonly amount: Decimal
  readonly tierBreakdown: ReadonlyArray<TierLine>
  /** The tier the next unit falls into; `null` for package pricing, which has no tiers. */
  readonly currentTier: CurrentTier | null
}

interface ResolvedTier {
  readonly index: number
  readonly startsAt: Decimal
  /** `null` = unbounded. */
  readonly upTo: Decimal | null
  readonly unitPrice: Decimal
  readonly flatFee: Decimal
}

/**
 * Exact tier bounds. The last tier is treated as unbounded even if stored otherwise: validation rejects such
 * catalogs, and if one slipped through, billing past its end at the last price beats billing those units at zero.
 * No tiers at all means one unbounded tier at `pricePerUnit`, so a graduated plan feature without tiers still
 * prices like the flat rate it was given.
 */
const resolveTiers = (pricing: Pricing): ReadonlyArray<ResolvedTier> => {
  const tiers = pricing.tiers ?? []
  if (tiers.length === 0) {
    return [{ index: 0, startsAt: ZERO, upTo: null, unitPrice: toDecimal(pricing.pricePerUnit ?? 0), flatFee: ZERO }]
  }
  // Likewise an unbounded tier ends the list, and a bound that does not ascend makes an empty tier rather than
  // one that overlaps its predecessor.
  const end = tiers.findIndex((t) => t.upTo === null)
  const usable = end === -1 ? tiers : tiers.slice(0, end + 1)
  let startsAt = ZERO
  return usable.map((t, index) => {
    const upTo = index === usable.length - 1 || t.upTo === null ? null : max(startsAt, toDecimal(t.upTo))
    const resolved = { index, startsAt, upTo, unitPrice: toDecimal(t.unitPrice), flatFee: toDecimal(t.flatFee ?? 0) }
    if (upTo !== null) startsAt = upTo
    return resolved
  })
}

const billingUnitsOf = (pricing: Pricing): Decimal => {
  const bu = pricing.billingUnits ?? 1
  if (!Number.isFinite(bu) || bu <= 0) throw new RangeError(`billingUnits must be positive, got ${bu}`)
  return toDecimal(bu)
}

const priceLine = (tier: ResolvedTier, units: Decimal, billingUnits: Decimal): TierLine => {
  const packages = ceilDiv(units, billingUnits)
  const amount = roundHalfUp(BigDecimal.sum(BigDecimal.multiply(packages, tier.unitPrice), tier.flatFee))
  return {
    tier: tier.index,
    units: toNumber(units),
    packages: toNumber(packages),
    unitPrice: tier.unitPrice,
    flatFee: tier.flatFee,
    amount
  }
}

const currentTierOf = (tiers: ReadonlyArray<ResolvedTier>, units: Decimal): CurrentTier => {
  // The next unit goes to the first tier whose bound the total has not reached: at exactly upTo it is the next one.
  const t = tiers.find((t) => t.upTo === null || BigDecimal.lessThan(units, t.upTo)) ?? tiers[tiers.length - 1]!
  return {
    index: t.index,
    startsAt: toNumber(t.startsAt),
    endsAt: t.upTo === null ? null : toNumber(t.upTo),
    unitPrice: t.unitPrice,
    flatFee: t.flatFee
  }
}

const rateGraduated = (tiers: ReadonlyArray<ResolvedTier>, units: Decimal, bu: Decimal): ReadonlyArray<TierLine> => {
  const lines: Array<TierLine> = []
  for (const t of tiers) {
    if (!BigDecimal.greaterThan(units, t.startsAt)) break
    const upper = t.upTo === null ? units : min(units, t.upTo)
    if (BigDecimal.greaterThan(upper, t.startsAt)) lines.push(priceLine(t, BigDecimal.subtract(upper, t.startsAt), bu))
  }
  return lines
}

const rateVolume = (tiers: ReadonlyArray<ResolvedTier>, units: Decimal, bu: Decimal): ReadonlyArray<TierLine> => {
  if (BigDecimal.isZero(units)) return []
  // Unlike currentTier, exactly upTo units still belong to the tier: upTo is inclusive.
  const t =
    tiers.find((t) => t.upTo === null || BigDecimal.lessThanOrEqualTo(units, t.upTo)) ?? tiers[tiers.length - 1]!
  return [priceLine(t, units, bu)]
}

/**
 * Price `units` billable units. Zero units cost nothing under every model, flat fees included: a tier's flat fee
 * is for using the tier, and an invoice for no usage would be a surprise.
 */
export const rate = (units: Decimal | number, pricing: Pricing): Rating => {
  const u = toDecimal(units)
  if (BigDecimal.isNegative(u)) throw new RangeError(`units must not be negative, got ${BigDecimal.format(u)}`)
  const bu = billingUnitsOf(pricing)
  const model = pricing.ratingModel ?? "package"

  if (model === "package") {
    const amount = roundHalfUp(BigDecimal.multiply(ceilDiv(u, bu), toDecimal(pricing.pricePerUnit ?? 0)))
    return { amount, tierBreakdown: [], currentTier: null }
  }

  const tiers = resolveTiers(pricing)
  const tierBreakdown = model === "graduated" ? rateGraduated(tiers, u, bu) : rateVolume(tiers, u, bu)
  return { amount: sumAll(tierBreakdown.map((l) => l.amount)), tierBreakdown, currentTier: currentTierOf(tiers, u) }
}

const decimalProblem = (path: string, value: DecimalLike | undefined): string | undefined => {
  if (value === undefined) return undefined
  const d = BigDecimal.isBigDecimal(value) ? Option.some(value) : parseDecimal(value)
  if (Option.isNone(d)) return `${path}: must be a decimal number`
  return BigDecimal.isNegative(d.value) ? `${path}: must not be negative` : undefined
}

/**
 * Every problem with a tier list, each prefixed with its path under `tiers` so the catalog can nest it under the
 * plan feature and report all of them at once (decisions.md §3).
 */
export const validateTiers = (tiers: ReadonlyArray<Tier>): ReadonlyArray<string> => {
  if (tiers.length === 0) return ["tiers: must have at least one tier"]
  const problems: Array<string> = []
  const last = tiers.length - 1
  let previous: { readonly index: number; readonly upTo: number } | undefined
  tiers.forEach((t, i) => {
    if (t.upTo === null) {
      if (i !== last) problems.push(`tiers[${i}].upTo: only the last tier may be unbounded (null)`)
    } else if (!Number.isFinite(t.upTo) || t.upTo <= 0) {
      problems.push(`tiers[${i}].upTo: must be a positive number`)
    } else {
      // Compared with the highest bound so far, so [100, 50, 80] reports both 50 and 80, not just 50.
      if (previous !== undefined && t.upTo <= previous.upTo) {
        problems.push(
          `tiers[${i}].upTo: tiers must be ascending; ${t.upTo} is not greater than tiers[${previous.index}].upTo ${previous.upTo}`
        )
      } else {
        previous = { index: i, upTo: t.upTo }
      }
    }
    if (i === last && t.upTo !== null) problems.push(`tiers[${i}].upTo: the last tier must be unbounded (null)`)
    const price = decimalProblem(`tiers[${i}].unitPrice`, t.unitPrice)
    if (price !== undefined) problems.push(price)
    const fee = decimalProblem(`tiers[${i}].flatFee`, t.flatFee)
    if (fee !== undefined) problems.push(fee)
  })
  return problems
}

/** `validateTiers` plus the plan feature's other pricing fields. */
export const validatePricing = (pricing: Pricing): ReadonlyArray<string> => {
  const problems: Array<string> = []
  if (pricing.ratingModel !== undefined && !RATING_MODELS.includes(pricing.ratingModel)) {
    problems.push(`ratingModel: must be one of ${RATING_MODELS.join(", ")}`)
  }
  const price = decimalProblem("pricePerUnit", pricing.pricePerUnit)
  if (price !== undefined) problems.push(price)
  const bu = pricing.billingUnits
  if (bu !== undefined && (!Number.isFinite(bu) || bu <= 0)) problems.push("billingUnits: must be a positive number")
  if (pricing.tiers !== undefined && pricing.tiers.length > 0) problems.push(...validateTiers(pricing.tiers))
  return problems
}
