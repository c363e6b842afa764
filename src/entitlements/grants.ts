/**
 * What a customer's subscriptions grant for one feature (decisions.md §5): pure, over the catalog snapshot and
 * the subscriptions that grant at `now`.
 */
import type { CatalogSnapshot, CreditSystem, Feature, Plan, PlanFeature } from "../catalog/model.ts"
import type { ResetInterval } from "../domain/periods.ts"
import { microToNumber, toMicro } from "../domain/quantity.ts"
import type { SubscriptionRecord } from "../subscriptions/model.ts"

export type Subject =
  | { readonly kind: "feature"; readonly id: string; readonly feature: Feature }
  | {
      readonly kind: "credit_system"
      readonly id: string
      readonly feature: Feature
      readonly system: CreditSystem
      /** Credits one unit of the feature costs. */
      readonly costPerUnit: number
    }

export interface GrantSource {
  readonly subscription: SubscriptionRecord
  readonly plan: Plan
  readonly planFeature: PlanFeature
}

export interface Grant {
  readonly subject: Subject
  /** Oldest subscription first; empty when only purchased credits back the feature. */
  readonly sources: ReadonlyArray<GrantSource>
  /** Sum of the grants in the subject's unit, as a wire number (the nearest double of `limitMicro`); `null` = unlimited. */
  readonly limit: number | null
  /** The same sum, exactly, in micro-units. */
  readonly limitMicro: bigint | null
  readonly reset: ResetInterval
  /** Reset windows are anchored at the oldest granting subscription's reset anchor (its start, until an interval change). */
  readonly anchor: number
  /** Pricing and overage terms: those of the oldest grant. */
  readonly terms: PlanFeature | null
}

export type Resolution =
  | { readonly _tag: "Granted"; readonly grant: Grant }
  | { readonly _tag: "Denied"; readonly code: "no_active_subscription" | "feature_not_in_plan" }

type Granting = ReadonlyArray<{ readonly subscription: SubscriptionRecord; readonly plan: Plan }>

const limitOf = (source: GrantSource): number | null =>
  source.subscription.status === "trialing" && source.planFeature.trialLimit !== null
    ? source.planFeature.trialLimit
    : source.planFeature.limit

/** Exact: 0.1 + 0.2 is 0.3, and two limits of 1e12 are 2e12 (each plan's limit is within its bound; their sum need not be). */
const sumLimits = (sources: ReadonlyArray<GrantSource>): bigint | null => {
  let total = 0n
  for (const source of sources) {
    const limit = limitOf(source)
    if (limit === null) return null // any unlimited grant makes the whole unlimited
    total += toMicro(limit)
  }
  return total
}

const sourcesFor = (granting: Granting, slug: string): Array<GrantSource> =>
  granting.flatMap(({ plan, subscription }) =>
    plan.features
      .filter((pf) => pf.slug === slug && pf.enabled)
      .map((planFeature) => ({ subscription, plan, planFeature }))
  )

export const creditSubject = (feature: Feature, system: CreditSystem): Subject => ({
  kind: "credit_system",
  id: system.id,
  feature,
  system,
  costPerUnit: system.features.find((f) => f.feature === feature.slug)?.creditCost ?? 1
})

const grantOf = (subject: Subject, sources: ReadonlyArray<GrantSource>, now: number): Grant => {
  const first = sources[0]
  const neverResets = subject.feature.type === "boolean" || subject.feature.meterType === "non_consumable"
  const limitMicro = sumLimits(sources)
  return {
    subject,
    sources,
    limit: limitMicro === null ? null : microToNumber(limitMicro),
    limitMicro,
    reset: first === undefined || neverResets ? "none" : first.planFeature.reset,
    anchor: first === undefined ? now : (first.subscription.resetAnchor ?? first.subscription.startedAt),
    terms: first?.planFeature ?? null
  }
}

/**
 * A feature is granted directly by a plan feature of the same slug, or through a credit system it belongs to
 * that a plan grants. Direct grants win; among credit systems, the first one granted.
 */
export const resolveGrant = (
  snapshot: CatalogSnapshot,
  feature: Feature,
  granting: Granting,
  now: number
): Resolution => {
  const direct = sourcesFor(granting, feature.slug)
  if (direct.length > 0)
    return { _tag: "Granted", grant: grantOf({ kind: "feature", id: feature.id, feature }, direct, now) }
  for (const system of snapshot.creditSystemsByFeature.get(feature.slug) ?? []) {
    const viaCredits = sourcesFor(granting, system.slug)
    if (viaCredits.length > 0)
      return { _tag: "Granted", grant: grantOf(creditSubject(feature, system), viaCredits, now) }
  }
  return { _tag: "Denied", code: granting.length === 0 ? "no_active_subscription" : "feature_not_in_plan" }
}

/** A grant of nothing but purchased credits: no plan allowance, no reset, no overage. */
export const creditsOnlyGrant = (feature: Feature, system: CreditSystem, now: number): Grant =>
  grantOf(creditSubject(feature, system), [], now)
