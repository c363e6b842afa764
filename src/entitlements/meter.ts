import { BigDecimal, Effect, Option } from "effect"
import type { EntitlementCode, EntitlementState } from "../api/entitlements.ts"
import type { Feature } from "../catalog/model.ts"
import { pricingOf } from "../catalog/pricing.ts"
import { AMOUNT_MAX_MICRO, AMOUNT_MAX_TEXT, WINDOW_MAX, WINDOW_MAX_MICRO } from "../domain/bounds.ts"
import { type Draw, draw } from "../domain/drawing.ts"
import { InvalidInput } from "../domain/errors.ts"
import { format, JSON_MONEY_MAX, moneyFitsJson, toDecimal } from "../domain/money.ts"
import { currentWindow, type Window } from "../domain/periods.ts"
import { fromMicro, toMicro } from "../domain/quantity.ts"
import { crossed } from "../domain/thresholds.ts"
import type { OutboxShape } from "../events/Outbox.ts"
import type { BalanceRow, FeatureConfigRow, UsageEventRow } from "./records.ts"
import type { Grant } from "./grants.ts"
import type { HotCustomer } from "./hotStatements.ts"
import { meteredState } from "./state.ts"
import { windowAmountPast } from "./windowMoney.ts"

/** `check` asks; `check_send` and `track` also record what they allow, atomically with the decision. */
export type Mode = "check" | "check_send" | "track"

export interface EntitlementInput {
  readonly customer: string
  readonly feature: string
  readonly value: number
  readonly customerData?:
    | {
        readonly email?: string | undefined
        readonly name?: string | undefined
        readonly metadata?: Record<string, unknown> | undefined
      }
    | undefined
  readonly entity?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
  /** When the usage happened (decisions.md §12): ISO 8601 or Unix milliseconds, as sent; absent: at arrival. */
  readonly timestamp?: number | string | undefined
}

/**
 * What a request resolved to, and what a draw decides over: the request, the customer it names, the feature, the
 * grant that applies and the customer's override of its terms, the entity, the request's instant (arrival: its reset
 * window, spend month and thresholds), and whether it runs inside a transaction.
 */
export interface Resolved {
  readonly org: string
  readonly mode: Mode
  readonly input: EntitlementInput
  readonly customer: HotCustomer
  readonly feature: Feature
  readonly grant: Grant
  readonly config: Option.Option<FeatureConfigRow>
  readonly entityId: string | null
  readonly now: number
  /** When the usage happened (its event's instant): `now` unless the request gave a timestamp. */
  readonly at: number
  readonly inTransaction: boolean
}

/** One field's problem as the 400 of a request names it (decisions.md §1: the field and its bound). */
export const invalid = (path: string, problem: string) =>
  new InvalidInput({ message: `The request is invalid: ${path}: ${problem}`, issues: [{ path, message: problem }] })

/**
 * A draw that would store a window's usage or overage past its bound, or price the window's billable usage past what
 * a JSON number carries (`amount`: that price, exact): refused, nothing recorded.
 */
export interface PastBound {
  readonly _tag: "PastBound"
  readonly counter: "usage" | "overage" | "amount" | "spend"
  readonly amount?: string
}
export const isPastBound = (u: unknown): u is PastBound => (u as { _tag?: unknown })._tag === "PastBound"

export const pastBound = (p: PastBound, unit: string) =>
  p.counter === "amount" || p.counter === "spend"
    ? invalid(
        "value",
        `would bring ${p.counter === "amount" ? "this reset window's billable usage" : "the customer's overage spend this month"} ` +
          `to ${p.amount} minor units, past ${JSON_MONEY_MAX} (Number.MAX_SAFE_INTEGER, the most a JSON number ` +
          "carries exactly); nothing was recorded"
      )
    : invalid(
        "value",
        `would bring the ${p.counter} of this reset window past ${WINDOW_MAX} ${unit} (the most one window counts); ` +
          "nothing was recorded"
      )

const EVENT_TIME_AHEAD_MS = 5 * 60_000
const EVENT_TIME_BACK_MS = 35 * 86_400_000

/**
 * The instant a recording call's usage happened (decisions.md §12): its `timestamp` (ISO 8601 or Unix milliseconds)
 * within 5 minutes ahead and 35 days back of arrival, or arrival itself. A plain check records nothing: no timestamp.
 */
export const eventTime = (mode: Mode, timestamp: number | string | undefined, now: number): number | InvalidInput => {
  if (timestamp === undefined) return now
  if (mode === "check") return invalid("timestamp", "is only for recording calls: track, or check with sendEvent")
  const at = typeof timestamp === "number" ? timestamp : Date.parse(timestamp)
  if (!Number.isSafeInteger(at)) return invalid("timestamp", "must be an ISO 8601 date-time or Unix milliseconds")
  if (at > now + EVENT_TIME_AHEAD_MS) return invalid("timestamp", "must be at most 5 minutes in the future")
  if (at < now - EVENT_TIME_BACK_MS) return invalid("timestamp", "must be at most 35 days in the past")
  return at
}

/** The first instant of `now`'s UTC calendar month: the spend cap's period. */
export const monthStart = (now: number) => {
  const d = new Date(now)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)
}

/** A new reset window starts from zero; purchased and bonus credits carry over. */
const rolled = (row: BalanceRow, window: Window | null): BalanceRow =>
  window === null || row.windowStart === window.start
    ? row
    : { ...row, windowStart: window.start, windowEnd: window.end, used: 0n, overage: 0n }

const codeFor = (mode: Mode, d: Draw, credits: boolean): EntitlementCode => {
  if (!d.allowed) return credits ? "insufficient_credits" : "limit_exceeded"
  if (d.overageUnits > 0) return mode === "track" ? "tracked_overage" : "overage_allowed"
  if (d.fromBonus > 0 || d.fromAddon > 0) return "addon_credits_used"
  return mode === "track" ? "tracked" : "access_granted"
}

const messageFor = (d: Draw, grant: Grant, pastDue: boolean): string => {
  const unit = grant.subject.kind === "credit_system" ? "credits" : (grant.subject.feature.unit ?? "units")
  const base = !d.allowed
    ? d.reason === "overage_cap"
      ? d.cap === "spend_cap"
        ? "The customer's overage spend cap is reached"
        : "The overage limit for this feature is reached"
      : grant.subject.kind === "credit_system"
        ? "Not enough credits"
        : `The limit of ${grant.limit} ${unit} is reached`
    : d.overageUnits > 0
      ? `Beyond the included ${unit}: billed as overage${d.notify ? " (the spend cap is passed; the vendor is notified)" : ""}`
      : d.fromBonus > 0 || d.fromAddon > 0
        ? "Drawn from bonus or purchased credits"
        : "Within the plan's allowance"
  return pastDue ? `${base}. Payment is past due; access continues during the grace period` : base
}

/** The plan's overage terms, unless the customer has a per-feature override (which wins whole). */
export const overageTerms = (config: Option.Option<FeatureConfigRow>, grant: Grant) => {
  const terms = grant.terms
  const included = (terms?.usageModel ?? "included") === "included"
  return Option.match(config, {
    onNone: () => ({
      overageAllowed: included && terms?.overage === "charge",
      maxOverageUnits: terms?.maxOverageUnits ?? null
    }),
    onSome: (c) => ({
      overageAllowed: included && c.overage === "charge",
      maxOverageUnits: c.maxOverageUnits === null ? null : fromMicro(c.maxOverageUnits)
    })
  })
}

/** What a recording draw decided over a balance: the answer, and what it writes (nothing for a denial). */
export interface Outcome {
  readonly answer: EntitlementState | PastBound
  readonly write: {
    readonly next: BalanceRow
    readonly event: UsageEventRow
    /** Its outbound events (usage thresholds crossed, the spend cap passed), written with it or not at all. */
    readonly notices: ReadonlyArray<Effect.Effect<unknown>>
    /** The customer's overage spend this month after the draw; `null` without a spend cap. */
    readonly spentAfter: string | null
  } | null
  /** Written even though the draw records nothing: the spend cap reached by a denied draw (`block`). */
  readonly denialNotices: ReadonlyArray<Effect.Effect<unknown>>
}

/**
 * A consumable feature's or credit system's draw, decided over any state of its balance (decisions.md §5): the same
 * decision for the balance writer's batched step, the locked path of a spend cap or an idempotent request, and a
 * batch of tracks. Pure but for the outbound events it describes (effects, run by whoever writes the draw).
 */
export interface Meter {
  readonly subjectId: string
  readonly init: { readonly windowStart: number; readonly windowEnd: number | null }
  /** The customer has a spend cap on this draw's overage: the draw must be decided over the month's spend. */
  readonly capped: boolean
  /** The spend cap's month (by arrival). */
  readonly period: number
  readonly unit: string
  /** A plain check: the answer over the stored balance, recording nothing. */
  readonly check: (stored: BalanceRow | null) => EntitlementState | PastBound
  /** A recording draw over the balance as it is (`null`: no row) and the month's spend so far. */
  readonly over: (stored: BalanceRow | null, spent: string, eventId: string) => Outcome
}

/**
 * A grant's reset window at an instant and its price of one overage unit. The items of a batch that share a customer
 * and feature share one grant and one arrival: computed once for all of them (a window's calendar arithmetic and a
 * price's division were ~3% of a hot batch's CPU).
 */
const termsOfGrant = new WeakMap<
  Grant,
  { readonly now: number; readonly window: Window | null; readonly unitPrice: BigDecimal.BigDecimal }
>()
const grantTermsAt = (grant: Grant, now: number) => {
  const kept = termsOfGrant.get(grant)
  if (kept !== undefined && kept.now === now) return kept
  const pricing = grant.terms === null ? null : pricingOf(grant.terms)
  const terms = {
    now,
    window: currentWindow(grant.anchor, grant.reset, now),
    // Usage-based pricing bills every unit: the plan "allowance" is then only a cap when one is set.
    unitPrice:
      pricing === null
        ? toDecimal(0)
        : BigDecimal.unsafeDivide(
            toDecimal(pricing.pricePerUnit ?? pricing.tiers?.[0]?.unitPrice ?? 0),
            toDecimal(pricing.billingUnits ?? 1)
          )
  }
  termsOfGrant.set(grant, terms)
  return terms
}

/**
 * Whether two resolutions meter alike: one read (the same customer, feature, grant and config objects), the same
 * value, instant and metadata. The items of a batch that name one customer and feature share a read; those of them
 * that also agree here may share one meter (building one an item, and the decimals it makes, was about a tenth of
 * the service's CPU profile on one hot balance in batches of 1,000).
 */
export const drawsAlike = (a: Resolved, b: Resolved) =>
  a.org === b.org &&
  a.mode === b.mode &&
  a.customer === b.customer &&
  a.feature === b.feature &&
  a.grant === b.grant &&
  a.config === b.config &&
  a.entityId === b.entityId &&
  a.now === b.now &&
  a.at === b.at &&
  a.inTransaction === b.inTransaction &&
  a.input.value === b.input.value &&
  a.input.metadata === b.input.metadata

/** A meter, not the refusal `makeMeter` answers when a draw cannot be metered. */
export const isMeter = (m: Meter | InvalidInput): m is Meter => !(m instanceof InvalidInput)

export const makeMeter = (resolved: Resolved, outbox: OutboxShape): Meter | InvalidInput => {
  const { org, mode, customer, feature, grant, config, entityId, input, now } = resolved
  const subject = grant.subject
  const terms = grant.terms
  const usageModel = terms?.usageModel ?? "included"
  const { maxOverageUnits, overageAllowed } = overageTerms(config, grant)
  const costPerUnit = subject.kind === "credit_system" ? subject.costPerUnit : 1
  const cost = toMicro(BigDecimal.multiply(toDecimal(input.value), toDecimal(costPerUnit)))
  if (cost > AMOUNT_MAX_MICRO) {
    // value ≤ 9e9 and creditCost ≤ 1e12, but their product is a quantity of credits too (docs/decisions.md
    // "Numbers"): the most one request may cost is what one balance may hold.
    return invalid(
      "value",
      `costs ${format(fromMicro(cost))} credits (value × creditCost ${costPerUnit}); one request may cost at most ` +
        `${AMOUNT_MAX_TEXT} credits`
    )
  }
  const { window, unitPrice } = grantTermsAt(grant, now)
  const init = { windowStart: window?.start ?? grant.anchor, windowEnd: window?.end ?? null }
  const limit = grant.limitMicro
  const spendCap =
    overageAllowed && customer.overageMaxAmount !== null
      ? { max: toDecimal(customer.overageMaxAmount), onLimitReached: customer.overageOnLimit ?? ("block" as const) }
      : null
  const pastDue = grant.sources.some((s) => s.subscription.status === "past_due")
  const period = monthStart(now)
  const unit = subject.kind === "credit_system" ? "credits" : (subject.feature.unit ?? "units")

  const decide = (row: BalanceRow, spendSoFar: string) =>
    draw({
      requested: fromMicro(cost),
      planRemaining: limit === null ? null : fromMicro(limit - row.used),
      bonus: fromMicro(row.bonus),
      addon: fromMicro(row.addon),
      overage: {
        allowed: overageAllowed,
        maxOverageUnits,
        overageUsedUnits: fromMicro(row.overage),
        spendCap,
        spendSoFar: toDecimal(spendSoFar),
        pricePerOverageUnit: unitPrice
      }
    })

  const answer = (d: Draw, row: BalanceRow) =>
    meteredState({
      allowed: d.allowed,
      code: codeFor(mode, d, subject.kind === "credit_system"),
      message: messageFor(d, grant, pastDue),
      grant,
      row,
      window
    })

  // From the draw's exact parts: its numbers are the nearest doubles, short of a micro-unit past 2^53 of them.
  const drawn = (row: BalanceRow, d: Draw): BalanceRow => ({
    ...row,
    used: row.used + toMicro(d.exact.fromPlan),
    bonus: row.bonus - toMicro(d.exact.fromBonus),
    addon: row.addon - toMicro(d.exact.fromAddon),
    overage: row.overage + toMicro(d.exact.overageUnits)
  })
  /** Whether a balance after a draw holds a counter past its bound (what grew: usage or overage), or its price. */
  const beyond = (after: BalanceRow): PastBound | undefined => {
    if (after.used > WINDOW_MAX_MICRO) return { _tag: "PastBound", counter: "usage" }
    if (after.overage > WINDOW_MAX_MICRO) return { _tag: "PastBound", counter: "overage" }
    const amount = windowAmountPast(grant.terms, after)
    return amount === undefined ? undefined : { _tag: "PastBound", counter: "amount", amount: format(amount) }
  }

  const empty: BalanceRow = { ...init, used: 0n, overage: 0n, bonus: 0n, addon: 0n }
  const current = (stored: BalanceRow | null) => rolled(stored ?? empty, window)

  const event = (id: string, d: Draw): UsageEventRow => ({
    organizationId: org,
    id,
    customerId: customer.id,
    featureId: feature.id,
    subjectId: subject.id,
    entityId,
    value: toMicro(input.value),
    cost,
    fromPlan: toMicro(d.exact.fromPlan),
    fromBonus: toMicro(d.exact.fromBonus),
    fromAddon: toMicro(d.exact.fromAddon),
    overage: toMicro(d.exact.overageUnits),
    billable: usageModel === "usage_based" ? cost : toMicro(d.exact.overageUnits),
    planId: grant.sources[0]?.plan.id ?? null,
    metadata: input.metadata ?? {},
    // Placed at its own instant (decisions.md §12): usage history and invoice line periods by event time.
    createdAt: resolved.at
  })

  /**
   * The usage alerts a draw from `before` to `after` causes (decisions.md §11): each level of the granted limit it
   * crosses, once per reset window (the dedupe key).
   */
  const thresholds = (before: BalanceRow, after: BalanceRow, state: EntitlementState) =>
    crossed(limit, before.used, after.used).map((level) =>
      outbox.emit(org, {
        type: "usage.threshold_reached",
        customerId: customer.id,
        dedupeKey: `usage.threshold_reached:${customer.id}:${subject.id}:${after.windowStart}:${level}`,
        data: {
          customer: customer.id,
          feature: feature.slug,
          ...(subject.kind === "credit_system" ? { creditSystem: subject.system.slug } : {}),
          threshold: level,
          usage: state.usage,
          limit: state.limit,
          balance: state.balance,
          resetsAt: state.resetsAt
        }
      })
    )

  /** The spend cap reached (decisions.md §11): once per customer and calendar month, whether it blocks or not. */
  const capReached = (spent: BigDecimal.BigDecimal) =>
    outbox.emit(org, {
      type: "overage.spend_cap_reached",
      customerId: customer.id,
      dedupeKey: `overage.spend_cap_reached:${customer.id}:${new Date(period).toISOString().slice(0, 7)}`,
      data: {
        customer: customer.id,
        maxOverageAmount: Number(customer.overageMaxAmount),
        spent: Number(format(spent)),
        onLimitReached: spendCap?.onLimitReached ?? "block"
      }
    })

  return {
    subjectId: subject.id,
    init,
    capped: spendCap !== null,
    period,
    unit,
    check: (stored) => {
      const row = current(stored)
      // A read without the lock: the spend a concurrent request adds may not be visible; only writes must be exact.
      const d = decide(row, "0")
      // A check answers what the same track would: a draw the window could not count is refused alike.
      const refused = d.allowed ? beyond(drawn(row, d)) : undefined
      return refused ?? answer(d, row)
    },
    over: (stored, spent, eventId) => {
      const row = current(stored)
      const d = decide(row, spent)
      if (!d.allowed) {
        return {
          answer: answer(d, row),
          write: null,
          denialNotices: d.cap === "spend_cap" ? [capReached(toDecimal(spent))] : []
        }
      }
      const after = drawn(row, d)
      const refused = beyond(after)
      if (refused !== undefined) return { answer: refused, write: null, denialNotices: [] }
      const state = answer(d, after)
      const spentAfter = spendCap === null ? null : BigDecimal.sum(toDecimal(spent), d.overageCost)
      // The spend is announced (overage.spend_cap_reached, under notify past the cap): held to what it can carry.
      if (spentAfter !== null && !moneyFitsJson(spentAfter)) {
        const past: PastBound = { _tag: "PastBound", counter: "spend", amount: format(spentAfter) }
        return { answer: past, write: null, denialNotices: [] }
      }
      const notices = thresholds(row, after, state)
      return {
        answer: state,
        write: {
          next: after,
          event: event(eventId, d),
          notices: d.notify && spentAfter !== null ? [capReached(spentAfter), ...notices] : notices,
          spentAfter: spentAfter === null ? null : format(spentAfter)
        },
        denialNotices: []
      }
    }
  }
}
