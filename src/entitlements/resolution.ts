import { Option } from "effect"
import type { EntitlementState } from "../api/entitlements.ts"
import type { CatalogSnapshot } from "../catalog/model.ts"
import type { Feature } from "../catalog/model.ts"
import { ambiguous, pickMatch } from "../customers/Customers.ts"
import { matchesOf } from "../customers/CustomersRepo.ts"
import { grantingOf } from "../subscriptions/Subscriptions.ts"
import type { FeatureConfigRow, StoredBalance } from "./records.ts"
import { creditsOnlyGrant, type Grant, resolveGrant } from "./grants.ts"
import type { SubscriptionRecord } from "../subscriptions/model.ts"
import type { EntitlementContext, HotBalance, HotCustomer } from "./hotStatements.ts"
import type { EntitlementInput, Mode, Resolved } from "./meter.ts"
import { denial } from "./state.ts"

/**
 * What a request resolves to over what was read of its customer (pure): an answer already (a denial before any
 * balance), or what to decide over. The engine's single requests and a batch's items share it; they differ only in
 * how the reads were made (one statement per request, or one for a batch's references).
 */
export type Resolution =
  | { readonly _tag: "Answered"; readonly state: EntitlementState }
  | { readonly _tag: "Resolved"; readonly resolved: Resolved; readonly stored: Option.Option<StoredBalance> }

export const answered = (state: EntitlementState): Resolution => ({ _tag: "Answered", state })

/** What was read of the customers: their live subscriptions, their config of the feature, their balances. */
export interface CustomerReads {
  readonly customersOf: (ref: string) => ReadonlyArray<HotCustomer>
  readonly subscriptionsOf: (customerId: string) => ReadonlyArray<SubscriptionRecord>
  readonly configOf: (customerId: string) => FeatureConfigRow | undefined
  readonly balanceOf: (customerId: string, subjectId: string) => StoredBalance | undefined
}

/** One request's read: a handful of rows, searched as they are. */
export const readsOfOne = (context: EntitlementContext): CustomerReads => ({
  customersOf: () => context.customers,
  subscriptionsOf: (customerId) => context.subscriptions.filter((s) => s.customerId === customerId),
  configOf: (customerId) => context.configs.find((c) => c.customerId === customerId),
  balanceOf: (customerId, subjectId) =>
    context.balances.find((b) => b.customerId === customerId && b.subjectId === subjectId)
})

const push = <K, V>(map: Map<K, Array<V>>, key: K, value: V) => {
  const list = map.get(key)
  if (list === undefined) map.set(key, [value])
  else list.push(value)
}

/**
 * A batch's read of one feature (every customer its references match): indexed once, so that each item finds its
 * rows without searching all of them (a batch of 1,000 items would otherwise search 1,000 rows 1,000 times).
 */
export const readsOfMany = (context: EntitlementContext): CustomerReads => {
  const byRef = new Map<string, Array<HotCustomer>>()
  for (const c of context.customers) {
    push(byRef, c.id, c)
    if (c.externalId !== null && c.externalId !== c.id) push(byRef, c.externalId, c)
    if (c.email !== null) push(byRef, `\u0000${c.email.toLowerCase()}`, c)
  }
  const subscriptions = new Map<string, Array<SubscriptionRecord>>()
  for (const s of context.subscriptions) push(subscriptions, s.customerId, s)
  const configs = new Map(context.configs.map((c) => [c.customerId, c]))
  const balances = new Map<string, HotBalance>(context.balances.map((b) => [`${b.customerId}\u0000${b.subjectId}`, b]))
  return {
    // The candidates of a reference (matchesOf then tells which matched how): by id or external id, and by email.
    customersOf: (ref) => [...(byRef.get(ref) ?? []), ...(byRef.get(`\u0000${ref.toLowerCase()}`) ?? [])],
    subscriptionsOf: (customerId) => subscriptions.get(customerId) ?? [],
    configOf: (customerId) => configs.get(customerId),
    balanceOf: (customerId, subjectId) => balances.get(`${customerId}\u0000${subjectId}`)
  }
}

/** The customer a reference names among those read: found, none, or more than one. */
export const pickCustomer = (
  reads: CustomerReads,
  ref: string
): { readonly _tag: "Found"; readonly customer: HotCustomer } | { readonly _tag: "Missing" } | Resolution => {
  const picked = pickMatch(matchesOf(reads.customersOf(ref), ref))
  if (picked === "ambiguous") return answered(denial("customer_ambiguous", ambiguous(ref).message))
  return Option.isNone(picked) ? { _tag: "Missing" } : { _tag: "Found", customer: picked.value }
}

/**
 * The request's instant: its one reading of the clock, unless the customer it found was created after that reading
 * (by a concurrent request, whose creation this one waited for or read). The request then happens at the creation,
 * so its event falls inside the window and the subscription the creation started.
 */
export const instantFor = (customer: HotCustomer, requestedAt: number) => Math.max(requestedAt, customer.createdAt)

/** A request whose customer, feature and entity are known, resolved over its reads to a grant or a denial. */
export const resolveFound = (request: {
  readonly org: string
  readonly mode: Mode
  readonly input: EntitlementInput
  readonly snapshot: CatalogSnapshot
  readonly feature: Feature
  readonly customer: HotCustomer
  readonly reads: CustomerReads
  readonly entityId: string | null
  readonly now: number
  readonly timestamp: number | undefined
  readonly inTransaction: boolean
}): Resolution => {
  const { snapshot, feature, customer, reads, now } = request
  const balanceOf = (subjectId: string) => Option.fromNullable(reads.balanceOf(customer.id, subjectId))
  const granting = grantingOf(reads.subscriptionsOf(customer.id), snapshot, now)
  const resolution = resolveGrant(snapshot, feature, granting, now)
  let grant: Grant | undefined = resolution._tag === "Granted" ? resolution.grant : undefined
  if (grant === undefined && feature.type === "metered" && feature.meterType === "consumable") {
    // No plan grants it, but purchased or bonus credits of one of its credit systems may.
    for (const system of snapshot.creditSystemsByFeature.get(feature.slug) ?? []) {
      const balance = balanceOf(system.id)
      if (Option.isSome(balance) && balance.value.bonus + balance.value.addon > 0n) {
        grant = creditsOnlyGrant(feature, system, now)
        break
      }
    }
  }
  if (grant === undefined) {
    const code = resolution._tag === "Denied" ? resolution.code : "feature_not_in_plan"
    return answered(
      denial(
        code,
        code === "no_active_subscription"
          ? "The customer has no active subscription"
          : `No plan of the customer includes '${feature.slug}'`
      )
    )
  }
  const resolved: Resolved = {
    org: request.org,
    mode: request.mode,
    input: request.input,
    customer,
    feature,
    grant,
    config: Option.fromNullable(reads.configOf(customer.id)),
    entityId: request.entityId,
    now,
    at: request.timestamp ?? now,
    inTransaction: request.inTransaction
  }
  return { _tag: "Resolved", resolved, stored: balanceOf(grant.subject.id) }
}
