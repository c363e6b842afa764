import { describe, expect, test } from "bun:test"
import type { CatalogSnapshot, CreditSystem, Feature, Plan, PlanFeature } from "../catalog/model.ts"
import type { SubscriptionRecord } from "../subscriptions/model.ts"
import { creditsOnlyGrant, resolveGrant } from "./grants.ts"

const feature = (slug: string, extra: Partial<Feature> = {}): Feature => ({
  id: `feat_${slug}`,
  slug,
  name: slug,
  type: "metered",
  meterType: "consumable",
  unit: null,
  createdAt: 0,
  updatedAt: 0,
  ...extra
})
const planFeature = (slug: string, extra: Partial<PlanFeature> = {}): PlanFeature => ({
  slug,
  enabled: true,
  limit: 10,
  trialLimit: null,
  reset: "monthly",
  usageModel: "included",
  ratingModel: "package",
  pricePerUnit: null,
  billingUnits: 1,
  tiers: null,
  overage: "block",
  overagePrice: null,
  maxOverageUnits: null,
  creditCost: null,
  ...extra
})
const plan = (slug: string, features: ReadonlyArray<PlanFeature>): Plan => ({
  id: `plan_${slug}`,
  slug,
  name: slug,
  description: null,
  price: "0",
  currency: null,
  interval: null,
  billingType: "recurring",
  autoEnable: false,
  isAddon: false,
  portal: false,
  planGroup: null,
  trialDays: null,
  provider: null,
  metadata: {},
  features,
  createdAt: 0,
  updatedAt: 0
})
const sub = (
  planId: string,
  startedAt: number,
  status: SubscriptionRecord["status"] = "active"
): SubscriptionRecord => ({
  organizationId: "org",
  id: `sub_${planId}_${startedAt}`,
  customerId: "cus",
  planId,
  status,
  startedAt,
  currentPeriodStart: startedAt,
  currentPeriodEnd: null,
  trialEndsAt: null,
  cancelAtPeriodEnd: false,
  canceledAt: null,
  graceEndsAt: null,
  scheduledPlanId: null,
  scheduledAt: null,
  resetAnchor: null,
  createdAt: startedAt,
  updatedAt: startedAt
})

const tokens = feature("tokens")
const images = feature("images")
const credits: CreditSystem = {
  id: "crs_ai",
  slug: "ai",
  name: "AI",
  description: null,
  features: [{ feature: "images", creditCost: 2.5 }],
  createdAt: 0,
  updatedAt: 0
}
const snapshot: CatalogSnapshot = {
  features: new Map([
    ["tokens", tokens],
    ["images", images]
  ]),
  featuresById: new Map([
    [tokens.id, tokens],
    [images.id, images]
  ]),
  creditSystems: new Map([["ai", credits]]),
  creditSystemsById: new Map([[credits.id, credits]]),
  creditPacks: new Map(),
  plans: new Map(),
  plansById: new Map(),
  creditSystemsByFeature: new Map([["images", [credits]]])
}

describe("resolveGrant", () => {
  test("grants add up across subscriptions; the oldest sets the anchor, reset and terms", () => {
    const a = plan("a", [planFeature("tokens", { limit: 10, reset: "daily", overage: "charge" })])
    const b = plan("b", [planFeature("tokens", { limit: 5, reset: "monthly" })])
    const r = resolveGrant(
      snapshot,
      tokens,
      [
        { subscription: sub(a.id, 100), plan: a },
        { subscription: sub(b.id, 200), plan: b }
      ],
      1000
    )
    expect(r).toMatchObject({
      _tag: "Granted",
      grant: { limit: 15, reset: "daily", anchor: 100, terms: { overage: "charge" } }
    })
  })

  test("any unlimited grant makes the whole unlimited", () => {
    const a = plan("a", [planFeature("tokens", { limit: 10 })])
    const b = plan("b", [planFeature("tokens", { limit: null })])
    const r = resolveGrant(
      snapshot,
      tokens,
      [
        { subscription: sub(a.id, 1), plan: a },
        { subscription: sub(b.id, 2), plan: b }
      ],
      3
    )
    expect(r._tag === "Granted" && r.grant.limit).toBeNull()
  })

  test("a trialing subscription grants its trial limit", () => {
    const a = plan("a", [planFeature("tokens", { limit: 1000, trialLimit: 3 })])
    const r = resolveGrant(snapshot, tokens, [{ subscription: sub(a.id, 1, "trialing"), plan: a }], 2)
    expect(r._tag === "Granted" && r.grant.limit).toBe(3)
  })

  test("disabled plan features grant nothing: feature_not_in_plan; no subscriptions: no_active_subscription", () => {
    const a = plan("a", [planFeature("tokens", { enabled: false })])
    expect(resolveGrant(snapshot, tokens, [{ subscription: sub(a.id, 1), plan: a }], 2)).toEqual({
      _tag: "Denied",
      code: "feature_not_in_plan"
    })
    expect(resolveGrant(snapshot, tokens, [], 2)).toEqual({ _tag: "Denied", code: "no_active_subscription" })
  })

  test("a feature is granted through a credit system a plan grants, at the system's cost per unit", () => {
    const a = plan("a", [planFeature("ai", { limit: 100 })])
    const r = resolveGrant(snapshot, images, [{ subscription: sub(a.id, 1), plan: a }], 2)
    expect(r).toMatchObject({
      _tag: "Granted",
      grant: { limit: 100, subject: { kind: "credit_system", id: "crs_ai", costPerUnit: 2.5 } }
    })
  })

  test("non-consumable features never reset; credits-only grants have no allowance", () => {
    const seats = feature("seats", { meterType: "non_consumable" })
    const a = plan("a", [planFeature("seats", { limit: 3, reset: "monthly" })])
    const r = resolveGrant(
      { ...snapshot, features: new Map([["seats", seats]]) },
      seats,
      [{ subscription: sub(a.id, 1), plan: a }],
      2
    )
    expect(r._tag === "Granted" && r.grant.reset).toBe("none")
    expect(creditsOnlyGrant(images, credits, 5)).toMatchObject({ limit: 0, sources: [], terms: null, reset: "none" })
  })
})
