/**
 * The order of drawing for one entitlement request (decisions.md §5): plan balance of the current window, then
 * bonus credits, then purchased (addon) credits, then billed overage behind its guards. Quantities can be
 * fractional (0.5 of a unit, credit costs like 0.1), so the arithmetic is exact decimal: 0.1 + 0.2 must use up a
 * balance of 0.3, not leave 0.00000000000000004 or overdraw it.
 */
import { BigDecimal } from "effect"
import { type Decimal, max, min, toDecimal, toNumber, ZERO } from "./money.ts"

/** Exact values may be passed as they are; plain numbers are read at their shortest decimal form. */
export type Quantity = Decimal | number

export interface SpendCap {
  /** Minor units, customer-wide (`maxOverageAmount`). */
  readonly max: Quantity
  readonly onLimitReached: "block" | "notify"
}

export interface OverageTerms {
  /** The plan feature says `overage: charge`. */
  readonly allowed: boolean
  /** Per-feature cap on overage units in the window; `null` = no cap. */
  readonly maxOverageUnits: Quantity | null
  readonly overageUsedUnits: Quantity
  readonly spendCap: SpendCap | null
  /** Overage spend already counted against the spend cap, minor units. */
  readonly spendSoFar: Quantity
  /** Minor units per overage unit; may be fractional. */
  readonly pricePerOverageUnit: Quantity
}

export interface DrawRequest {
  /** Units asked for; for a credit-system feature already multiplied by its creditCost. */
  readonly requested: Quantity
  /** What is left of the plan grant in the current window; `null` = unlimited. */
  readonly planRemaining: Quantity | null
  readonly bonus: Quantity
  readonly addon: Quantity
  readonly overage: OverageTerms
}

export type DrawReason = "within_plan" | "addon_credits" | "overage" | "limit_exceeded" | "overage_cap"

/** The parts of a draw as exact decimals: what is stored (micro-units) is taken from these, never from the numbers. */
export interface DrawnExactly {
  readonly fromPlan: Decimal
  readonly fromBonus: Decimal
  readonly fromAddon: Decimal
  readonly overageUnits: Decimal
}

export interface Draw {
  readonly allowed: boolean
  /** The parts as wire numbers: the nearest double, not exact past 2^53 micro-units (9e9 with six decimals). */
  readonly fromPlan: number
  readonly fromBonus: number
  readonly fromAddon: number
  readonly overageUnits: number
  readonly exact: DrawnExactly
  /** Exact, unrounded: what the overage adds to the customer's spend (rounding happens on the invoice line). */
  readonly overageCost: Decimal
  /** The spend cap was passed under `notify`: allow, and record a notification. */
  readonly notify: boolean
  readonly reason: DrawReason
  /** Which guard decided, when one did: denied by it, or (`spend_cap` with notify) allowed past it. */
  readonly cap: "max_overage_units" | "spend_cap" | null
}

const NOTHING: DrawnExactly = { fromPlan: ZERO, fromBonus: ZERO, fromAddon: ZERO, overageUnits: ZERO }

const denied = (reason: "limit_exceeded" | "overage_cap", cap: Draw["cap"]): Draw => ({
  allowed: false,
  fromPlan: 0,
  fromBonus: 0,
  fromAddon: 0,
  overageUnits: 0,
  exact: NOTHING,
  overageCost: ZERO,
  notify: false,
  reason,
  cap
})

/** Negative balances (a limit lowered below what was used) simply have nothing to give. */
const available = (n: Quantity): Decimal => max(ZERO, toDecimal(n))

/**
 * Decide how a request is drawn. A denied request draws nothing: all-or-nothing, never a partial grant. A request
 * of 0 is allowed and draws nothing (it asks whether zero more fits, which it always does).
 */
export const draw = (req: DrawRequest): Draw => {
  const requested = toDecimal(req.requested)
  if (BigDecimal.isNegative(requested))
    throw new RangeError(`requested must not be negative, got ${String(req.requested)}`)

  if (req.planRemaining === null) {
    return {
      allowed: true,
      fromPlan: toNumber(requested),
      fromBonus: 0,
      fromAddon: 0,
      overageUnits: 0,
      exact: { ...NOTHING, fromPlan: requested },
      overageCost: ZERO,
      notify: false,
      reason: "within_plan",
      cap: null
    }
  }

  let rest = requested
  const take = (pool: Quantity): Decimal => {
    const taken = min(rest, available(pool))
    rest = BigDecimal.subtract(rest, taken)
    return taken
  }
  const fromPlan = take(req.planRemaining)
  const fromBonus = take(req.bonus)
  const fromAddon = take(req.addon)
  const drawn = {
    fromPlan: toNumber(fromPlan),
    fromBonus: toNumber(fromBonus),
    fromAddon: toNumber(fromAddon)
  }

  if (BigDecimal.isZero(rest)) {
    const fromCredits = !BigDecimal.isZero(fromBonus) || !BigDecimal.isZero(fromAddon)
    return {
      allowed: true,
      ...drawn,
      overageUnits: 0,
      exact: { fromPlan, fromBonus, fromAddon, overageUnits: ZERO },
      overageCost: ZERO,
      notify: false,
      reason: fromCredits ? "addon_credits" : "within_plan",
      cap: null
    }
  }

  const o = req.overage
  if (!o.allowed) return denied("limit_exceeded", null)

  // Caps are inclusive: reaching a cap exactly is allowed; only going past it trips the guard.
  if (o.maxOverageUnits !== null) {
    const after = BigDecimal.sum(toDecimal(o.overageUsedUnits), rest)
    if (BigDecimal.greaterThan(after, toDecimal(o.maxOverageUnits))) return denied("overage_cap", "max_overage_units")
  }

  const overageCost = BigDecimal.multiply(rest, toDecimal(o.pricePerOverageUnit))
  let notify = false
  if (o.spendCap !== null) {
    const spendAfter = BigDecimal.sum(toDecimal(o.spendSoFar), overageCost)
    if (BigDecimal.greaterThan(spendAfter, toDecimal(o.spendCap.max))) {
      if (o.spendCap.onLimitReached === "block") return denied("overage_cap", "spend_cap")
      notify = true
    }
  }

  return {
    allowed: true,
    ...drawn,
    overageUnits: toNumber(rest),
    exact: { fromPlan, fromBonus, fromAddon, overageUnits: rest },
    overageCost,
    notify,
    reason: "overage",
    cap: notify ? "spend_cap" : null
  }
}
