/**
 * The entitlement answer of spec §2.2, built from what the engine decided: pure.
 */
import { pricingOf } from "../catalog/pricing.ts"
import { BigDecimal } from "effect"
import type { EntitlementCode, EntitlementState } from "../api/entitlements.ts"
import type { PlanFeature } from "../catalog/model.ts"
import { type Decimal, max, toDecimal, toNumber, ZERO } from "../domain/money.ts"
import type { Window } from "../domain/periods.ts"
import { FACTOR_BIGINT, fromMicro } from "../domain/quantity.ts"
import { rate } from "../domain/rating.ts"
import type { Grant } from "./grants.ts"
import type { BalanceRow } from "./records.ts"

const iso = (ms: number | null | undefined) => (ms === null || ms === undefined ? null : new Date(ms).toISOString())

export const denial = (code: EntitlementCode, message: string): EntitlementState => ({
  allowed: false,
  code,
  usage: 0,
  limit: null,
  balance: null,
  resetsAt: null,
  resetInterval: null,
  credits: null,
  details: { message, tierBreakdown: [] }
})

/**
 * An answer stored under an Idempotency-Key before `pricing` and `currentTier` became absent instead of null
 * (decisions.md §1): replayed in today's form, since the answer's schema no longer encodes a null there.
 */
export const storedState = (stored: EntitlementState): EntitlementState => {
  type Shown = NonNullable<EntitlementState["details"]["pricing"]>
  type Old = Omit<EntitlementState["details"], "pricing"> & {
    readonly pricing?: (Omit<Shown, "currentTier"> & { readonly currentTier?: Shown["currentTier"] | null }) | null
  }
  const { pricing, ...details } = stored.details as Old
  if (pricing === undefined || pricing === null) return { ...stored, details }
  const { currentTier, ...rest } = pricing
  const shown: Shown = currentTier === undefined || currentTier === null ? rest : { ...rest, currentTier }
  return { ...stored, details: { ...details, pricing: shown } }
}

/** Billable units of the window: all usage for usage-based pricing, the overage otherwise. */
export const billableInWindow = (terms: PlanFeature | null, row: BalanceRow): Decimal =>
  terms?.usageModel === "usage_based" ? fromMicro(row.used) : fromMicro(row.overage)

/** Nothing billable yet (most answers): the same details for every answer under the same terms, built once. */
const unbilled = new WeakMap<PlanFeature, ReturnType<typeof ratedDetails>>()

const pricingDetails = (terms: PlanFeature | null, billable: Decimal) => {
  // decisions.md §1: what does not apply is absent, never null.
  if (terms === null) return { tierBreakdown: [] }
  if (!BigDecimal.isZero(billable)) return ratedDetails(terms, billable)
  let details = unbilled.get(terms)
  if (details === undefined) {
    details = ratedDetails(terms, billable)
    unbilled.set(terms, details)
  }
  return details
}

const ratedDetails = (terms: PlanFeature, billable: Decimal) => {
  const pricing = pricingOf(terms)
  const rating = rate(billable, pricing)
  return {
    pricing: {
      usageModel: terms.usageModel,
      ratingModel: pricing.ratingModel ?? "package",
      pricePerUnit: toNumber(toDecimal(pricing.pricePerUnit ?? 0)),
      billingUnits: terms.billingUnits,
      ...(rating.currentTier === null
        ? {}
        : {
            currentTier: {
              index: rating.currentTier.index,
              startsAt: rating.currentTier.startsAt,
              endsAt: rating.currentTier.endsAt,
              unitPrice: toNumber(rating.currentTier.unitPrice),
              flatFee: toNumber(rating.currentTier.flatFee)
            }
          })
    },
    tierBreakdown: rating.tierBreakdown.map((line) => ({
      tier: line.tier,
      units: line.units,
      unitPrice: toNumber(line.unitPrice),
      flatFee: toNumber(line.flatFee),
      amount: toNumber(line.amount)
    }))
  }
}

/**
 * A plan change waiting for the period end (decisions.md §14) is said in the answer: from then on the new plan's
 * limits apply, and its features only.
 */
const withScheduledChange = (message: string, grant: Grant): string => {
  const waiting = grant.sources.find(
    (s) => s.subscription.scheduledPlanId != null && s.subscription.scheduledAt != null
  )
  return waiting === undefined
    ? message
    : `${message}. A plan change is scheduled for ${iso(waiting.subscription.scheduledAt!)}`
}

export interface MeteredAnswer {
  readonly allowed: boolean
  readonly code: EntitlementCode
  readonly message: string
  readonly grant: Grant
  readonly row: BalanceRow
  readonly window: Window | null
}

/** A consumable feature or credit system: usage and balance of the current window, credits when credit-backed. */
export const meteredState = (a: MeteredAnswer): EntitlementState => {
  const used = fromMicro(a.row.used)
  const usage = BigDecimal.sum(used, fromMicro(a.row.overage))
  const limit = a.grant.limit
  const planBalance = a.grant.limitMicro === null ? null : BigDecimal.subtract(fromMicro(a.grant.limitMicro), usage)
  const resetsAt = iso(a.window?.end)
  const subject = a.grant.subject
  const credits =
    subject.kind === "credit_system"
      ? {
          source: "credit_system",
          systemSlug: subject.system.slug,
          costPerUnit: subject.costPerUnit,
          bonusBalance: toNumber(fromMicro(a.row.bonus)),
          addonBalance: toNumber(fromMicro(a.row.addon)),
          totalBalance: toNumber(
            BigDecimal.sum(
              BigDecimal.sum(planBalance === null ? ZERO : max(ZERO, planBalance), fromMicro(a.row.bonus)),
              fromMicro(a.row.addon)
            )
          ),
          plan: {
            used: toNumber(usage),
            limit,
            balance: planBalance === null ? null : toNumber(planBalance),
            resetsAt
          }
        }
      : null
  return {
    allowed: a.allowed,
    code: a.code,
    usage: toNumber(usage),
    limit,
    balance: planBalance === null ? null : toNumber(planBalance),
    resetsAt,
    resetInterval: a.grant.reset === "none" ? null : a.grant.reset,
    credits,
    details: {
      message: withScheduledChange(a.message, a.grant),
      ...pricingDetails(a.grant.terms, billableInWindow(a.grant.terms, a.row))
    }
  }
}

/** A boolean feature, or a non-consumable one whose usage is a live count. */
export const countedState = (a: {
  readonly allowed: boolean
  readonly code: EntitlementCode
  readonly message: string
  readonly grant: Grant
  readonly count: number
}): EntitlementState => {
  const boolean = a.grant.subject.feature.type === "boolean"
  const limit = boolean ? null : a.grant.limit
  const limitMicro = boolean ? null : a.grant.limitMicro
  return {
    allowed: a.allowed,
    code: a.code,
    usage: a.count,
    limit,
    balance: limitMicro === null ? null : toNumber(fromMicro(limitMicro - BigInt(a.count) * FACTOR_BIGINT)),
    resetsAt: null,
    resetInterval: null,
    credits: null,
    details: {
      message: withScheduledChange(a.message, a.grant),
      ...(a.grant.subject.feature.type === "boolean" ? { tierBreakdown: [] } : pricingDetails(a.grant.terms, ZERO))
    }
  }
}
