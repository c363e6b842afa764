/**
 * What a plan change of a live subscription would do at an instant (decisions.md §14): when it takes effect, its
 * invoice lines and totals, what the credit balance pays and keeps, and the subscription's period afterwards. Pure:
 * the preview answers with it, and the change itself writes exactly it, inside the transaction that locked the
 * subscription and read the balance.
 */
import { BigDecimal } from "effect"
import type { LineInput, StoredLine } from "../billing/lines.ts"
import type { Plan } from "../catalog/model.ts"
import { roundHalfUp, toDecimal } from "../domain/money.ts"
import { addInterval } from "../domain/periods.ts"
import { type ChangeWhen, creditToApply, defaultWhen, prorate, settle } from "../domain/planChange.ts"
import type { SubscriptionRecord } from "./model.ts"

/** A change that was paid for by nobody lapses after this (§14), or at the period's end when that comes first. */
export const PENDING_CHANGE_MS = 23 * 3_600_000

/** The currency of a plan that names none (as invoices fall back). */
const FALLBACK_CURRENCY = "NGN"

export interface ChangeRequest {
  readonly when?: ChangeWhen | undefined
  readonly prorate?: boolean | undefined
}

export interface Proposal {
  readonly when: ChangeWhen
  readonly effectiveAt: number
  readonly currency: string
  readonly lines: ReadonlyArray<LineInput>
  /** Charge − credit, in minor units; negative when the credit is larger. */
  readonly subtotal: bigint
  /** Of the lines' discounts (§15) and taxes (§16, inclusive and exclusive): 0 until priced (`withPricing`). */
  readonly discount: bigint
  readonly tax: bigint
  /** The lines as the invoice stores them, with their discounts and taxes, once priced. */
  readonly pricedLines?: ReadonlyArray<StoredLine> | undefined
  /** What the invoice bills: never below zero. */
  readonly total: bigint
  /** Credit beyond the charge (less discounts, plus exclusive taxes, once priced), for the credit balance. */
  readonly surplus: bigint
  readonly creditApplied: bigint
  readonly amountDue: bigint
  readonly creditBalanceAfter: bigint
  /** The subscription's period once switched (an interval change restarts the anchor at the change). */
  readonly period: {
    readonly startedAt: number
    readonly currentPeriodStart: number
    readonly currentPeriodEnd: number | null
  }
}

export type Refusal = { readonly code: "subscription_past_due" | "change_not_possible"; readonly message: string }

const day = (ms: number) => new Date(ms).toISOString().slice(0, 10)

const isTrialing = (s: SubscriptionRecord, now: number) =>
  s.status === "trialing" && (s.trialEndsAt === null || now < s.trialEndsAt)

const priced = (plan: Plan) => !BigDecimal.isZero(toDecimal(plan.price))

/** The period a plan starts at `at` (a one-time or interval-less plan has no end). */
const freshPeriod = (plan: Plan, at: number) => ({
  startedAt: at,
  currentPeriodStart: at,
  currentPeriodEnd:
    plan.billingType === "recurring" && plan.interval !== null ? addInterval(at, plan.interval, 1) : null
})

/**
 * The proposal for changing `s` from `from` to `to` at `now`, with the customer's credit balance `balance` in the
 * change's currency; or why it cannot be made.
 */
export const propose = (input: {
  readonly subscription: SubscriptionRecord
  readonly from: Plan
  readonly to: Plan
  readonly request: ChangeRequest
  readonly now: number
  readonly balance: bigint
}): Proposal | Refusal => {
  const { balance, from, now, request, subscription: s, to } = input
  if (s.status === "past_due") {
    return {
      code: "subscription_past_due",
      message: "The subscription's renewal is unpaid: pay its open invoice before changing plans"
    }
  }
  if (priced(from) && priced(to) && (from.currency ?? "").toUpperCase() !== (to.currency ?? "").toUpperCase()) {
    return {
      code: "change_not_possible",
      message: `${from.slug} is billed in ${from.currency} and ${to.slug} in ${to.currency}: cancel and attach instead`
    }
  }
  const currency = ((priced(to) ? to.currency : (from.currency ?? to.currency)) ?? FALLBACK_CURRENCY).toUpperCase()
  const trialing = isTrialing(s, now)
  const periodEnd = s.currentPeriodEnd !== null && s.currentPeriodEnd > now ? s.currentPeriodEnd : null
  const intervalChange = from.interval !== to.interval || from.billingType !== to.billingType
  const when =
    request.when ??
    defaultWhen({
      from: { price: toDecimal(from.price), interval: from.interval },
      to: { price: toDecimal(to.price), interval: to.interval },
      trialing,
      periodEnds: periodEnd !== null
    })
  const nothing = {
    lines: [],
    subtotal: 0n,
    discount: 0n,
    tax: 0n,
    total: 0n,
    surplus: 0n,
    creditApplied: 0n,
    amountDue: 0n
  }
  const keep = {
    startedAt: s.startedAt,
    currentPeriodStart: s.currentPeriodStart,
    currentPeriodEnd: s.currentPeriodEnd
  }

  if (when === "period_end") {
    if (periodEnd === null) {
      return { code: "change_not_possible", message: "The subscription's period never ends: change it now instead" }
    }
    // At the switch, an interval change starts the new plan's own periods there (Renewals does it).
    return { when, effectiveAt: periodEnd, currency, ...nothing, creditBalanceAfter: balance, period: keep }
  }

  // A trial carries over as it is: nothing has been paid, so nothing is prorated.
  if (trialing) {
    const period = intervalChange ? { ...freshPeriod(to, now), startedAt: now } : keep
    return { when, effectiveAt: now, currency, ...nothing, creditBalanceAfter: balance, period }
  }

  // `prorate: false`: no lines now, the new price from the next renewal. An interval change then starts the new
  // plan's periods at the current period's end, as a scheduled switch would.
  if (request.prorate === false) {
    const period =
      intervalChange && periodEnd !== null
        ? { startedAt: periodEnd, currentPeriodStart: s.currentPeriodStart, currentPeriodEnd: periodEnd }
        : intervalChange
          ? freshPeriod(to, now)
          : keep
    return { when, effectiveAt: now, currency, ...nothing, creditBalanceAfter: balance, period }
  }

  const lines: Array<LineInput> = []
  let credit = 0n
  let charge = 0n
  let period = keep
  if (periodEnd !== null) {
    const p = prorate({
      oldPrice: toDecimal(from.price),
      newPrice: toDecimal(to.price),
      periodStart: s.currentPeriodStart,
      periodEnd,
      at: now
    })
    credit = p.credit
    if (credit > 0n) {
      lines.push({
        feature: from.slug,
        description: `Unused time on ${from.name} (${day(now)} to ${day(periodEnd)})`,
        quantity: 1,
        unitPrice: (-credit).toString(),
        amount: (-credit).toString(),
        periodStart: now,
        periodEnd
      })
    }
    if (!intervalChange) charge = p.charge
  }
  if (intervalChange || periodEnd === null) {
    // The new plan's own period starts at the change: its full price.
    period = freshPeriod(to, now)
    charge = BigDecimal.scale(roundHalfUp(toDecimal(to.price)), 0).value
    if (charge > 0n) {
      lines.push({
        feature: to.slug,
        // The charge line is the new plan's: a discount covering that plan covers it (§15); the credit line is not.
        plan: to.slug,
        description:
          period.currentPeriodEnd === null
            ? `${to.name} (from ${day(now)})`
            : `${to.name} (${day(now)} to ${day(period.currentPeriodEnd)})`,
        quantity: 1,
        unitPrice: to.price,
        amount: charge.toString(),
        periodStart: now,
        periodEnd: period.currentPeriodEnd ?? now
      })
    }
  } else if (charge > 0n) {
    lines.push({
      feature: to.slug,
      plan: to.slug,
      description: `Remaining time on ${to.name} (${day(now)} to ${day(periodEnd!)})`,
      quantity: 1,
      unitPrice: charge.toString(),
      amount: charge.toString(),
      periodStart: now,
      periodEnd: periodEnd!
    })
  }
  const settled = settle(credit, charge)
  const creditApplied = creditToApply(balance, settled.total)
  return {
    when,
    effectiveAt: now,
    currency,
    lines,
    subtotal: settled.subtotal,
    discount: 0n,
    tax: 0n,
    total: settled.total,
    surplus: settled.surplus,
    creditApplied,
    amountDue: settled.total - creditApplied,
    creditBalanceAfter: balance + settled.surplus - creditApplied,
    period
  }
}

export const isRefusal = (p: Proposal | Refusal): p is Refusal => "code" in p

/** A new subscription's first charge as a preview shows it: the plan's price for its first period (none in a trial). */
/** A plan fee line's description: the plan and, when the period ends, its days. */
export const planLineDescription = (plan: Plan, start: number, end: number | null) =>
  end === null ? plan.name : `${plan.name} (${day(start)} to ${day(end)})`

export const newAttachProposal = (plan: Plan, now: number): Proposal => {
  const period = freshPeriod(plan, now)
  const price = BigDecimal.scale(roundHalfUp(toDecimal(plan.price)), 0).value
  const charged = price > 0n && (plan.trialDays ?? 0) === 0
  const lines: Array<LineInput> = charged
    ? [
        {
          feature: plan.slug,
          plan: plan.slug,
          description: planLineDescription(plan, now, period.currentPeriodEnd),
          quantity: 1,
          unitPrice: plan.price,
          amount: price.toString(),
          periodStart: now,
          periodEnd: period.currentPeriodEnd ?? now
        }
      ]
    : []
  const total = charged ? price : 0n
  return {
    when: "now",
    effectiveAt: now,
    currency: (plan.currency ?? FALLBACK_CURRENCY).toUpperCase(),
    lines,
    subtotal: total,
    discount: 0n,
    tax: 0n,
    total,
    surplus: 0n,
    creditApplied: 0n,
    amountDue: total,
    creditBalanceAfter: 0n,
    period
  }
}

/** The sums of a priced invoice (src/billing/taxes.ts `priceLines`): whole minor units. */
export interface PricedSums {
  readonly lines: ReadonlyArray<StoredLine>
  readonly subtotal: BigDecimal.BigDecimal
  readonly discount: BigDecimal.BigDecimal
  readonly tax: BigDecimal.BigDecimal
  readonly total: BigDecimal.BigDecimal
}

const whole = (d: BigDecimal.BigDecimal) => BigDecimal.scale(d, 0).value

/**
 * The proposal with its lines priced as its invoice will be (discounts, then taxes): the invoice bills the priced
 * total (never below zero), what it would be below zero goes to the credit balance (a credit line's tax is credited
 * with it), and the balance pays first. `spendsBalance: false` for a new subscription's first charge, which is a
 * payment, not an invoice, and is not paid from the balance (docs/decisions.md "Plan changes").
 */
export const withPricing = (p: Proposal, priced: PricedSums, balance: bigint, spendsBalance = true): Proposal => {
  const net = whole(priced.total)
  const total = net > 0n ? net : 0n
  const surplus = net < 0n ? -net : 0n
  const creditApplied = spendsBalance ? creditToApply(balance, total) : 0n
  return {
    ...p,
    pricedLines: priced.lines,
    subtotal: whole(priced.subtotal),
    discount: whole(priced.discount),
    tax: whole(priced.tax),
    total,
    surplus,
    creditApplied,
    amountDue: total - creditApplied,
    creditBalanceAfter: balance + surplus - creditApplied
  }
}
