/**
 * Which subscription discounts cover a usage invoice's lines (decisions.md §15 "plan fees and their usage lines";
 * docs/decisions.md "Subscription discounts on usage (h19)"): pure. A usage line belongs to the customer's live
 * subscription of its plan, or of a plan of the same group (usage recorded before a plan change is still that
 * subscription's); add-on lines only to a subscription of that very add-on. Each subscription's coupon covers only
 * its own lines (still limited by the coupon's `plans`), and only while it is in force for the subscription's current
 * period: invoices left, or spent by an invoice of that period (a `once` coupon covers the usage of the cycle its
 * plan fee was discounted in). A usage invoice never spends one of its cycles: cycles are counted by plan fees; an
 * amount off is one budget per period, shared by the period's fee and usage invoices.
 */
import { BigDecimal } from "effect"
import type { Plan } from "../catalog/model.ts"
import { couponTerms } from "../catalog/customerDiscounts.ts"
import type { BoundDiscount } from "../catalog/subscriptionDiscounts.ts"
import type { CouponTerms } from "../domain/discounts.ts"
import { sumAll, toDecimal, ZERO } from "../domain/money.ts"
import type { InvoiceRecord } from "./InvoicesRepo.ts"

export interface UsageLineRef {
  readonly planId: string | null
  readonly plan?: string | undefined
}

const ofSubscription = (line: UsageLineRef, bound: BoundDiscount, plansById: ReadonlyMap<string, Plan>): boolean => {
  if (line.planId === null) return false
  if (line.planId === bound.planId) return true
  const linePlan = plansById.get(line.planId)
  const subPlan = plansById.get(bound.planId)
  return (
    linePlan !== undefined &&
    subPlan !== undefined &&
    !linePlan.isAddon &&
    !subPlan.isAddon &&
    linePlan.planGroup === subPlan.planGroup
  )
}

/** Whether an invoice of the subscription billing its current period took this coupon since it was bound. */
export const spentOnCurrentPeriod = (bound: BoundDiscount, invoices: ReadonlyArray<InvoiceRecord>): boolean =>
  bound.currentPeriodEnd !== null &&
  invoices.some(
    (i) =>
      i.subscriptionId === bound.subscriptionId &&
      i.status !== "void" &&
      i.createdAt >= bound.boundAt &&
      i.periodEnd !== null &&
      i.periodEnd >= (bound.currentPeriodEnd ?? Infinity) &&
      i.lines.some((l) => (l.discounts ?? []).some((d) => d.coupon === bound.discount.coupon.slug))
  )

/**
 * What the coupon already took off the current period: the subscription's invoices of that period (its plan fee) and
 * the usage invoices made since the period started (or the coupon was bound). An amount off is one budget per
 * period, as it would be were the fee and the usage on one invoice: usage invoices share what the fee left.
 */
export const takenThisPeriod = (bound: BoundDiscount, invoices: ReadonlyArray<InvoiceRecord>) => {
  const since = Math.max(bound.currentPeriodStart, bound.boundAt)
  const ofPeriod = (i: InvoiceRecord) =>
    i.status !== "void" &&
    i.createdAt >= bound.boundAt &&
    (i.subscriptionId === bound.subscriptionId
      ? i.periodEnd !== null && bound.currentPeriodEnd !== null && i.periodEnd >= bound.currentPeriodEnd
      : i.subscriptionId === null && i.createdAt >= since)
  return sumAll(
    invoices
      .filter(ofPeriod)
      .flatMap((i) => i.lines.flatMap((l) => l.discounts ?? []))
      .filter((d) => d.coupon === bound.discount.coupon.slug)
      .map((d) => toDecimal(d.amount))
  )
}

export const inForce = (bound: BoundDiscount, invoices: ReadonlyArray<InvoiceRecord>): boolean =>
  bound.discount.invoicesLeft === null || bound.discount.invoicesLeft > 0 || spentOnCurrentPeriod(bound, invoices)

/**
 * The coupon terms, in the subscriptions' order, each narrowed to the plans of the lines its subscription owns; the
 * customer's own discount comes after them (decisions.md §15 order, as h13 set for subscription invoices).
 */
export const usageDiscountTerms = (
  lines: ReadonlyArray<UsageLineRef>,
  bound: ReadonlyArray<BoundDiscount>,
  plansById: ReadonlyMap<string, Plan>,
  invoices: ReadonlyArray<InvoiceRecord>
): ReadonlyArray<CouponTerms> => {
  const owner = lines.map((line) => bound.findIndex((b) => ofSubscription(line, b, plansById)))
  return bound.flatMap((b, index) => {
    const plans = [...new Set(lines.flatMap((l, i) => (owner[i] === index && l.plan !== undefined ? [l.plan] : [])))]
    if (plans.length === 0 || !inForce(b, invoices)) return []
    const terms = couponTerms(b.discount.coupon)
    const covered = terms.plans === null ? plans : plans.filter((p) => terms.plans!.includes(p))
    if (covered.length === 0) return []
    if (terms.amountOff === null) return [{ ...terms, plans: covered }]
    const left = BigDecimal.subtract(terms.amountOff, takenThisPeriod(b, invoices))
    return BigDecimal.greaterThan(left, ZERO) ? [{ ...terms, amountOff: left, plans: covered }] : []
  })
}
