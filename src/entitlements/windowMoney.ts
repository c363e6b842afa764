/**
 * A reset window's billable usage in money, held to what a JSON number carries (issue 37 item 5): under tiered
 * pricing, check and track answer with the window's tier amounts, so a draw that would make them inexact is refused,
 * like one past a counter's bound. Package pricing's answers carry no amount: its usage is recorded, and refused where
 * it would be billed (the unbilled view, invoice generation). Pure.
 */
import type { PlanFeature } from "../catalog/model.ts"
import { pricingOf } from "../catalog/pricing.ts"
import { type Decimal, moneyFitsJson, toDecimal, toNumber } from "../domain/money.ts"
import { rate } from "../domain/rating.ts"
import type { BalanceRow } from "./records.ts"
import { billableInWindow } from "./state.ts"

interface Ceiling {
  /** Whether answers show amounts (tiered pricing). */
  readonly shown: boolean
  /** The highest price of one package, and packages' size. */
  readonly perPackage: number
  readonly billingUnits: number
  /** Every tier's flat fee, and how many tiers may each round one package up. */
  readonly fees: number
  readonly tiers: number
}

const ceilings = new WeakMap<PlanFeature, Ceiling>()
const ceilingOf = (terms: PlanFeature): Ceiling => {
  const kept = ceilings.get(terms)
  if (kept !== undefined) return kept
  const pricing = pricingOf(terms)
  const tiers = pricing.tiers ?? []
  const prices = [pricing.pricePerUnit ?? 0, ...tiers.map((t) => t.unitPrice)].map((p) => toNumber(toDecimal(p)))
  const ceiling = {
    shown: (pricing.ratingModel ?? "package") !== "package",
    perPackage: Math.max(...prices),
    billingUnits: pricing.billingUnits ?? 1,
    fees: tiers.reduce((sum, t) => sum + toNumber(toDecimal(t.flatFee ?? 0)), 0),
    tiers: Math.max(1, tiers.length)
  }
  ceilings.set(terms, ceiling)
  return ceiling
}

/** Half the bound: the doubles' estimate is off by far less than that, so below it the exact amount surely fits. */
const SURELY_FITS = 2 ** 52

/**
 * The window's billable amount in minor units when it is past Number.MAX_SAFE_INTEGER, else `undefined`. An estimate
 * in doubles first (packages rounded up in every tier, the highest price, every fee): every real catalog is orders of
 * magnitude below it, so the exact rating runs only near the bound.
 */
export const windowAmountPast = (terms: PlanFeature | null, row: BalanceRow): Decimal | undefined => {
  if (terms === null) return undefined
  const micro = terms.usageModel === "usage_based" ? row.used : row.overage
  if (micro <= 0n) return undefined
  const c = ceilingOf(terms)
  if (!c.shown) return undefined
  const estimate = (Number(micro) / 1e6 / c.billingUnits + c.tiers) * c.perPackage + c.fees + c.tiers
  if (estimate < SURELY_FITS) return undefined
  const amount = rate(billableInWindow(terms, row), pricingOf(terms)).amount
  return moneyFitsJson(amount) ? undefined : amount
}
