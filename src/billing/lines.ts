/**
 * Invoice lines from unbilled usage (decisions.md §1, §7): pure. Events are grouped by customer and currency (one
 * invoice each), then by the plan whose terms priced them and the plan feature (a feature slug or a credit-system
 * slug); each line rates its billable units with `rate`, rounded half-up to a whole minor unit, and an invoice's
 * subtotal is the sum of its rounded lines.
 */
import { BigDecimal, Either } from "effect"
import type { InvoiceLine } from "../api/billing.ts"
import type { CatalogSnapshot, Plan, PlanFeature } from "../catalog/model.ts"
import type { AmountTooLarge } from "../domain/errors.ts"
import {
  assertMoneyFitsJson,
  type Decimal,
  format,
  roundHalfUp,
  sumAll,
  toDecimal,
  toNumber,
  ZERO
} from "../domain/money.ts"
import { fromMicro } from "../domain/quantity.ts"
import { type DecimalLike, type Pricing, rate, type TierLine } from "../domain/rating.ts"
import { pricingOf } from "../catalog/pricing.ts"

/** The currency of usage priced by a plan that names none (sync warns about such catalogs; this is the fallback). */
export const FALLBACK_CURRENCY = "NGN"

/** An unbilled usage event with something to bill, as the repository reads it. */
export interface UnbilledEvent {
  readonly id: string
  readonly customerId: string
  /** The feature, or the credit system the event drew from. */
  readonly subjectId: string
  readonly planId: string | null
  /** Micro-units of the subject the event recorded (credits for a credit system), what the plan covered included. */
  readonly cost: bigint
  /** Micro-units of `cost` beyond what the plan and any grants covered, > 0. */
  readonly billable: bigint
  readonly createdAt: number
}

export interface RatedLine {
  readonly planId: string | null
  /** The plan's slug, for the coupons that cover it. */
  readonly plan?: string | undefined
  readonly subjectId: string
  /** Slug of the plan feature: a feature or a credit system. */
  readonly feature: string
  readonly description: string
  readonly quantity: Decimal
  /** What the line's events recorded, billable or not (`quantity` and what the plan covered of those events). */
  readonly recorded: Decimal
  readonly unitPrice: Decimal
  readonly amount: Decimal
  readonly tierBreakdown: ReadonlyArray<TierLine>
  readonly periodStart: number
  readonly periodEnd: number
  readonly eventIds: ReadonlyArray<string>
}

/** One customer's lines in one currency: what one invoice holds. */
export interface RatedGroup {
  readonly customerId: string
  readonly currency: string
  readonly lines: ReadonlyArray<RatedLine>
  readonly subtotal: Decimal
  readonly periodStart: number
  readonly periodEnd: number
  readonly eventIds: ReadonlyArray<string>
}

type Catalog = Pick<CatalogSnapshot, "plansById" | "featuresById" | "creditSystemsById">

/** Half-up division to `scale` decimals, on scaled bigints (BigDecimal division stops at a fixed precision). */
export const divideHalfUp = (a: Decimal, b: Decimal, scale = 6): Decimal => {
  const s = Math.max(a.scale, b.scale)
  const x = BigDecimal.scale(a, s).value * 10n ** BigInt(scale)
  const y = BigDecimal.scale(b, s).value
  if (y === 0n) throw new RangeError("divideHalfUp: division by zero")
  const negative = x < 0n !== y < 0n
  const ax = x < 0n ? -x : x
  const ay = y < 0n ? -y : y
  const q = ax / ay + ((ax % ay) * 2n >= ay ? 1n : 0n)
  return BigDecimal.normalize(BigDecimal.make(negative ? -q : q, scale))
}

/**
 * Price per billable unit shown on a line. Package pricing: the list price per unit (`pricePerUnit / billingUnits`;
 * the amount bills whole packages). Tiered pricing has no single price: the line's average, `amount / quantity`,
 * to 6 decimals. Either way the amount, not `quantity × unitPrice`, is what is owed.
 */
const unitPriceOf = (pricing: Pricing, quantity: Decimal, amount: Decimal): Decimal => {
  if ((pricing.ratingModel ?? "package") === "package") {
    return divideHalfUp(toDecimal(pricing.pricePerUnit ?? 0), toDecimal(pricing.billingUnits ?? 1))
  }
  return BigDecimal.isZero(quantity) ? ZERO : divideHalfUp(amount, quantity)
}

const subjectOf = (catalog: Catalog, subjectId: string): { readonly slug: string; readonly name: string } => {
  const feature = catalog.featuresById.get(subjectId)
  if (feature !== undefined) return feature
  const system = catalog.creditSystemsById.get(subjectId)
  if (system !== undefined) return system
  return { slug: subjectId, name: subjectId }
}

/** The terms an event was priced under: its plan's feature of the event's subject (by slug). */
const termsOf = (plan: Plan | undefined, slug: string): PlanFeature | undefined =>
  plan?.features.find((pf) => pf.slug === slug)

const describe = (name: string, plan: Plan | undefined, terms: PlanFeature | undefined): string => {
  if (plan === undefined || terms === undefined) return `${name} (no longer priced by the catalog)`
  return `${name} ${terms.usageModel === "usage_based" ? "usage" : "overage"} (${plan.name})`
}

/**
 * Groups billable events by customer and currency, then by plan and plan feature, and rates each line. Events whose
 * plan or plan feature the catalog no longer has are kept on a zero-priced line (in the fallback currency when the
 * plan is gone), so they are still shown and billed once rather than left unbilled forever. Groups are ordered by
 * customer, then currency; lines by feature slug, then plan id.
 */
export const rateUnbilled = (catalog: Catalog, events: ReadonlyArray<UnbilledEvent>): ReadonlyArray<RatedGroup> => {
  interface Acc {
    readonly customerId: string
    readonly currency: string
    readonly planId: string | null
    readonly subjectId: string
    readonly events: Array<UnbilledEvent>
  }
  const lines = new Map<string, Acc>()
  for (const e of events) {
    if (e.billable <= 0n) continue
    const plan = e.planId === null ? undefined : catalog.plansById.get(e.planId)
    const currency = (plan?.currency ?? FALLBACK_CURRENCY).toUpperCase() || FALLBACK_CURRENCY
    const key = JSON.stringify([e.customerId, currency, e.planId, e.subjectId])
    const acc = lines.get(key)
    if (acc === undefined) {
      lines.set(key, { customerId: e.customerId, currency, planId: e.planId, subjectId: e.subjectId, events: [e] })
    } else {
      acc.events.push(e)
    }
  }

  const groups = new Map<string, { customerId: string; currency: string; lines: Array<RatedLine> }>()
  for (const acc of lines.values()) {
    const plan = acc.planId === null ? undefined : catalog.plansById.get(acc.planId)
    const subject = subjectOf(catalog, acc.subjectId)
    const terms = termsOf(plan, subject.slug)
    const pricing: Pricing = terms === undefined ? { ratingModel: "package", pricePerUnit: 0 } : pricingOf(terms)
    const quantity = fromMicro(acc.events.reduce((sum, e) => sum + e.billable, 0n))
    const rating = rate(quantity, pricing)
    const line: RatedLine = {
      planId: acc.planId,
      plan: plan?.slug,
      subjectId: acc.subjectId,
      feature: subject.slug,
      description: describe(subject.name, plan, terms),
      quantity,
      recorded: fromMicro(acc.events.reduce((sum, e) => sum + e.cost, 0n)),
      unitPrice: unitPriceOf(pricing, quantity, rating.amount),
      amount: rating.amount,
      tierBreakdown: rating.tierBreakdown,
      periodStart: acc.events.reduce((m, e) => Math.min(m, e.createdAt), Infinity),
      periodEnd: acc.events.reduce((m, e) => Math.max(m, e.createdAt), -Infinity),
      eventIds: acc.events.map((e) => e.id)
    }
    const key = JSON.stringify([acc.customerId, acc.currency])
    const group = groups.get(key) ?? { customerId: acc.customerId, currency: acc.currency, lines: [] }
    group.lines.push(line)
    groups.set(key, group)
  }

  const byText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)
  return [...groups.values()]
    .map((g): RatedGroup => {
      const sorted = [...g.lines].sort((a, b) => byText(a.feature, b.feature) || byText(a.planId ?? "", b.planId ?? ""))
      return {
        customerId: g.customerId,
        currency: g.currency,
        lines: sorted,
        subtotal: sumAll(sorted.map((l) => l.amount)),
        periodStart: sorted.reduce((m, l) => Math.min(m, l.periodStart), Infinity),
        periodEnd: sorted.reduce((m, l) => Math.max(m, l.periodEnd), -Infinity),
        eventIds: sorted.flatMap((l) => l.eventIds)
      }
    })
    .sort((a, b) => byText(a.customerId, b.customerId) || byText(a.currency, b.currency))
}

/**
 * A customer's unbilled group as an invoice could carry it: every line and the total within what a JSON number carries
 * exactly (a tier's amount is part of its line's, so within it too), else `AmountTooLarge` naming the first beyond.
 */
export const groupFitsJson = (group: RatedGroup): Either.Either<RatedGroup, AmountTooLarge> => {
  for (const line of group.lines) {
    const checked = assertMoneyFitsJson(
      line.amount,
      `Customer ${group.customerId}'s unbilled line '${line.description}'`,
      group.currency
    )
    if (Either.isLeft(checked)) return Either.left(checked.left)
  }
  const total = assertMoneyFitsJson(group.subtotal, `Customer ${group.customerId}'s unbilled total`, group.currency)
  return Either.map(total, () => group)
}

// ---- stored and wire forms of a line ----

/** A line as stored in `invoices.lines` (JSON): money as exact decimal strings, instants as ISO strings. */
export interface StoredLine {
  readonly feature: string
  readonly description: string
  readonly quantity: string
  readonly unitPrice: string
  readonly amount: string
  readonly tierBreakdown: ReadonlyArray<{
    readonly tier: number
    readonly units: number
    readonly unitPrice: string
    readonly flatFee: string
    readonly amount: string
  }>
  readonly periodStart: string
  readonly periodEnd: string
  /** The discounts taken off this line (decisions.md §15); absent on invoices from before discounts. */
  readonly discounts?: ReadonlyArray<StoredLineDiscount>
  /** Its taxes (decisions.md §16); absent on invoices from before taxes. */
  readonly taxes?: ReadonlyArray<StoredLineTax>
}

export interface StoredLineDiscount {
  readonly coupon: string
  readonly amount: string
}

export interface StoredLineTax {
  readonly rate: string
  readonly name: string
  readonly percentage: string
  readonly inclusive: boolean
  readonly amount: string
}

/** A line given to `Invoices.createInvoice` (e.g. a renewal's plan price). `amount` is rounded half-up. */
export interface LineInput {
  readonly feature: string
  /** Slug of the plan the line bills (its fee or its usage): what a coupon's `plans` cover (decisions.md §15). */
  readonly plan?: string | undefined
  readonly description: string
  readonly quantity: DecimalLike
  readonly unitPrice: DecimalLike
  readonly amount: DecimalLike
  readonly tierBreakdown?: ReadonlyArray<TierLine> | undefined
  /** Epoch milliseconds. */
  readonly periodStart: number
  readonly periodEnd: number
}

const iso = (ms: number) => new Date(ms).toISOString()

export const storedLine = (line: LineInput): StoredLine => ({
  feature: line.feature,
  description: line.description,
  quantity: format(toDecimal(line.quantity)),
  unitPrice: format(toDecimal(line.unitPrice)),
  amount: format(roundHalfUp(toDecimal(line.amount))),
  tierBreakdown: (line.tierBreakdown ?? []).map((t) => ({
    tier: t.tier,
    units: t.units,
    unitPrice: format(t.unitPrice),
    flatFee: format(t.flatFee),
    amount: format(t.amount)
  })),
  periodStart: iso(line.periodStart),
  periodEnd: iso(line.periodEnd)
})

export const wireLine = (line: StoredLine): InvoiceLine => ({
  feature: line.feature,
  description: line.description,
  quantity: Number(line.quantity),
  unitPrice: Number(line.unitPrice),
  amount: Number(line.amount),
  tierBreakdown: line.tierBreakdown.map((t) => ({
    tier: t.tier,
    units: t.units,
    unitPrice: Number(t.unitPrice),
    flatFee: Number(t.flatFee),
    amount: Number(t.amount)
  })),
  periodStart: line.periodStart,
  periodEnd: line.periodEnd,
  discounts: (line.discounts ?? []).map((d) => ({ coupon: d.coupon, amount: Number(d.amount) })),
  taxes: (line.taxes ?? []).map((t) => ({
    rate: t.rate,
    name: t.name,
    percentage: Number(t.percentage),
    inclusive: t.inclusive,
    amount: Number(t.amount)
  }))
})

/** A tier breakdown on the wire. */
export const wireTiers = (tiers: ReadonlyArray<TierLine>) =>
  tiers.map((t) => ({
    tier: t.tier,
    units: t.units,
    unitPrice: toNumber(t.unitPrice),
    flatFee: toNumber(t.flatFee),
    amount: toNumber(t.amount)
  }))
