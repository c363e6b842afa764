import { storedCapMicro, storedMicro, storedMoney, COUNT_MAX_MICRO } from "../domain/bounds.ts"
import { SubscriptionStatus as SubscriptionStatusSchema } from "../api/subscriptions.ts"
import type { SubscriptionStatus } from "../subscriptions/model.ts"
import type { EntitlementContext, HotBalance, HotConfig, HotCustomer } from "./hotStatements.ts"

/**
 * The hot read's rows decoded without Effect's parser (docs/decisions.md, "Rows decoded by schemas"): the same
 * checks and the same values as `EntitlementContext`'s schema, field for field, at ~1/15 of its cost (the schema took
 * ~58 µs of CPU a context, 15% of a track's service CPU). `undefined` when anything differs from what the schema
 * accepts: the caller then decodes with the schema, whose message names the field. test/hot-decode.test.ts holds
 * the two to the same answers, for rows the statements give and for rows they must never give.
 */
type Row = Record<string, unknown>

const isRow = (u: unknown): u is Row => typeof u === "object" && u !== null && !Array.isArray(u)
const str = (u: unknown): u is string => typeof u === "string"
const num = (u: unknown): u is number => typeof u === "number"
const strOrNull = (u: unknown) => u === null || typeof u === "string"
const numOrNull = (u: unknown) => u === null || typeof u === "number"
const stored = (u: unknown) => typeof u === "string" || typeof u === "number" || typeof u === "bigint"

const STATUSES: ReadonlySet<unknown> = new Set(SubscriptionStatusSchema.literals)
const customer = (r: unknown): HotCustomer | undefined => {
  if (!isRow(r)) return undefined
  const { id, externalId, email, overageMaxAmount, overageOnLimit, createdAt } = r
  if (!str(id) || !strOrNull(externalId) || !strOrNull(email) || !num(createdAt)) return undefined
  if (overageMaxAmount !== null && !str(overageMaxAmount) && !num(overageMaxAmount)) return undefined
  if (overageOnLimit !== null && overageOnLimit !== "block" && overageOnLimit !== "notify") return undefined
  return {
    id,
    externalId: externalId as string | null,
    email: email as string | null,
    overageMaxAmount: overageMaxAmount === null ? null : storedMoney(String(overageMaxAmount)),
    overageOnLimit,
    createdAt
  }
}

const subscription = (r: unknown): EntitlementContext["subscriptions"][number] | undefined => {
  if (!isRow(r)) return undefined
  const s = r
  if (!str(s.organizationId) || !str(s.id) || !str(s.customerId) || !str(s.planId) || !STATUSES.has(s.status)) {
    return undefined
  }
  if (!num(s.startedAt) || !num(s.currentPeriodStart) || !num(s.createdAt) || !num(s.updatedAt)) return undefined
  if (!numOrNull(s.currentPeriodEnd) || !numOrNull(s.trialEndsAt) || !numOrNull(s.canceledAt)) return undefined
  if (!numOrNull(s.graceEndsAt) || !num(s.cancelAtPeriodEnd)) return undefined
  if ((s.scheduledPlanId !== null && !str(s.scheduledPlanId)) || !numOrNull(s.scheduledAt)) return undefined
  if (!numOrNull(s.resetAnchor)) return undefined
  return {
    organizationId: s.organizationId,
    id: s.id,
    customerId: s.customerId,
    planId: s.planId,
    status: s.status as SubscriptionStatus,
    startedAt: s.startedAt,
    currentPeriodStart: s.currentPeriodStart,
    currentPeriodEnd: s.currentPeriodEnd as number | null,
    trialEndsAt: s.trialEndsAt as number | null,
    cancelAtPeriodEnd: s.cancelAtPeriodEnd === 1,
    canceledAt: s.canceledAt as number | null,
    graceEndsAt: s.graceEndsAt as number | null,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt,
    scheduledPlanId: s.scheduledPlanId as string | null,
    scheduledAt: s.scheduledAt as number | null,
    resetAnchor: s.resetAnchor as number | null
  }
}

const config = (r: unknown): HotConfig | undefined => {
  if (!isRow(r)) return undefined
  const { customerId, overage, maxOverageUnits } = r
  if (!str(customerId) || (overage !== "block" && overage !== "charge")) return undefined
  if (maxOverageUnits !== null && !stored(maxOverageUnits)) return undefined
  return {
    customerId,
    overage,
    maxOverageUnits: maxOverageUnits === null ? null : storedCapMicro(maxOverageUnits, COUNT_MAX_MICRO)
  }
}

const balance = (r: unknown): HotBalance | undefined => {
  if (!isRow(r)) return undefined
  const b = r
  if (!str(b.customerId) || !str(b.subjectId) || !num(b.windowStart) || !numOrNull(b.windowEnd)) return undefined
  if (!stored(b.used) || !stored(b.overage) || !stored(b.bonus) || !stored(b.addon) || !num(b.version)) return undefined
  return {
    customerId: b.customerId,
    subjectId: b.subjectId,
    windowStart: b.windowStart,
    windowEnd: b.windowEnd as number | null,
    used: storedMicro(b.used),
    overage: storedMicro(b.overage),
    bonus: storedMicro(b.bonus),
    addon: storedMicro(b.addon),
    version: b.version
  }
}

const all = <A>(u: unknown, each: (r: unknown) => A | undefined): Array<A> | undefined => {
  if (!Array.isArray(u)) return undefined
  const out: Array<A> = []
  for (const r of u) {
    const a = each(r)
    if (a === undefined) return undefined
    out.push(a)
  }
  return out
}

/** A context as `EntitlementContext` decodes it, or `undefined` where the schema must say why it refuses it. */
export const fastContext = (u: unknown): EntitlementContext | undefined => {
  if (!isRow(u) || !num(u.catalogVersion)) return undefined
  const customers = all(u.customers, customer)
  const subscriptions = all(u.subscriptions, subscription)
  const configs = all(u.configs, config)
  const balances = all(u.balances, balance)
  if (customers === undefined || subscriptions === undefined || configs === undefined || balances === undefined) {
    return undefined
  }
  return { catalogVersion: u.catalogVersion, customers, subscriptions, configs, balances }
}

/** Balances as `Schema.Array(HotBalance)` decodes them (a batch's locked rows), or `undefined` as above. */
export const fastBalances = (u: unknown): Array<HotBalance> | undefined => all(u, balance)
