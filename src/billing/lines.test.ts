import { describe, expect, test } from "bun:test"
import type { CreditSystem, Feature, Plan, PlanFeature } from "../catalog/model.ts"
import { format, unsafeDecimal } from "../domain/money.ts"
import { divideHalfUp, rateUnbilled, storedLine, type UnbilledEvent, wireLine } from "./lines.ts"

const feature = (id: string, slug: string, name: string): Feature => ({
  id,
  slug,
  name,
  type: "metered",
  meterType: "consumable",
  unit: null,
  createdAt: 0,
  updatedAt: 0
})

const terms = (slug: string, overrides: Partial<PlanFeature>): PlanFeature => ({
  slug,
  enabled: true,
  limit: null,
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
  ...overrides
})

const plan = (id: string, name: string, currency: string | null, features: ReadonlyArray<PlanFeature>): Plan => ({
  id,
  slug: name.toLowerCase(),
  name,
  description: null,
  price: "0",
  currency,
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

const features = [
  feature("feat_tokens", "tokens", "Tokens"),
  feature("feat_calls", "api-calls", "API calls"),
  feature("feat_images", "images", "Images"),
  feature("feat_a", "a", "A"),
  feature("feat_b", "b", "B")
]
const credits: CreditSystem = {
  id: "crs_ai",
  slug: "ai-credits",
  name: "AI credits",
  description: null,
  features: [{ feature: "images", creditCost: 5 }],
  createdAt: 0,
  updatedAt: 0
}

const plans = [
  // Overage on tokens, 100 per package of 1,000 tokens.
  plan("plan_pro", "Pro", "NGN", [
    terms("tokens", { limit: 1000, overage: "charge", overagePrice: "100", billingUnits: 1000 })
  ]),
  // Usage-based graduated: 10 × 1, then 0.5 each plus a flat 100 for using the second tier.
  plan("plan_metered", "Metered", "NGN", [
    terms("api-calls", {
      usageModel: "usage_based",
      ratingModel: "graduated",
      tiers: [
        { upTo: 10, unitPrice: "1", flatFee: "0" },
        { upTo: null, unitPrice: "0.5", flatFee: "100" }
      ]
    })
  ]),
  // Fractional unit prices, in another currency.
  plan("plan_cheap", "Cheap", "usd", [
    terms("a", { usageModel: "usage_based", pricePerUnit: "0.25" }),
    terms("b", { usageModel: "usage_based", pricePerUnit: "0.25" })
  ]),
  // A credit system priced per credit, and a plan without a currency.
  plan("plan_ai", "AI", null, [terms("ai-credits", { usageModel: "usage_based", pricePerUnit: "0.5" })])
]

const catalog = {
  featuresById: new Map(features.map((f) => [f.id, f])),
  creditSystemsById: new Map([[credits.id, credits]]),
  plansById: new Map(plans.map((p) => [p.id, p]))
}

let n = 0
const event = (
  subjectId: string,
  planId: string | null,
  units: number,
  createdAt = 1_700_000_000_000,
  customerId = "cus_1",
  /** Units of the same event the plan covered (recorded, not billed). */
  covered = 0
): UnbilledEvent => ({
  id: `evt_${String(++n).padStart(4, "0")}`,
  customerId,
  subjectId,
  planId,
  cost: BigInt(Math.round((units + covered) * 1_000_000)),
  billable: BigInt(Math.round(units * 1_000_000)),
  createdAt
})

/** Lines with every Decimal as its plain string. */
const plain = (events: ReadonlyArray<UnbilledEvent>) =>
  rateUnbilled(catalog, events).map((g) => ({
    customerId: g.customerId,
    currency: g.currency,
    subtotal: format(g.subtotal),
    events: g.eventIds.length,
    lines: g.lines.map((l) => ({
      feature: l.feature,
      description: l.description,
      quantity: format(l.quantity),
      unitPrice: format(l.unitPrice),
      amount: format(l.amount),
      tiers: l.tierBreakdown.map((t) => [t.tier, t.units, format(t.unitPrice), format(t.flatFee), format(t.amount)])
    }))
  }))

describe("rateUnbilled", () => {
  test("package overage with billingUnits bills whole packages of the summed events", () => {
    // 1,200 + 300 = 1,500 tokens over the limit: 2 packages of 1,000 at 100.
    const [group] = plain([event("feat_tokens", "plan_pro", 1200), event("feat_tokens", "plan_pro", 300)])
    expect(group).toEqual({
      customerId: "cus_1",
      currency: "NGN",
      subtotal: "200",
      events: 2,
      lines: [
        {
          feature: "tokens",
          description: "Tokens overage (Pro)",
          quantity: "1500",
          unitPrice: "0.1",
          amount: "200",
          tiers: []
        }
      ]
    })
  })

  test("graduated usage across tiers: each tier priced, flat fee once, unit price the line's average", () => {
    // 6 + 8 = 14 calls: 10 × 1 = 10, then 4 × 0.5 + 100 = 102; 112 / 14 = 8 per call.
    const [group] = plain([event("feat_calls", "plan_metered", 6), event("feat_calls", "plan_metered", 8)])
    expect(group!.lines).toEqual([
      {
        feature: "api-calls",
        description: "API calls usage (Metered)",
        quantity: "14",
        unitPrice: "8",
        amount: "112",
        tiers: [
          [0, 10, "1", "0", "10"],
          [1, 4, "0.5", "100", "102"]
        ]
      }
    ])
    expect(group!.subtotal).toBe("112")
  })

  test("fractional unit prices round half-up per line, and the subtotal is the sum of rounded lines", () => {
    // a: 2 × 0.25 = 0.5 → 1; b: 2 × 0.25 = 0.5 → 1; subtotal 2 (not round(1.0) = 1).
    const [group] = plain([event("feat_a", "plan_cheap", 2), event("feat_b", "plan_cheap", 2)])
    expect(group!.currency).toBe("USD")
    expect(group!.lines.map((l) => [l.feature, l.quantity, l.unitPrice, l.amount])).toEqual([
      ["a", "2", "0.25", "1"],
      ["b", "2", "0.25", "1"]
    ])
    expect(group!.subtotal).toBe("2")
    // 1 × 0.25 rounds down to 0; 3 × 0.25 = 0.75 up to 1; 10.5 units × 0.25 = 2.625 → 3.
    expect(plain([event("feat_a", "plan_cheap", 1)])[0]!.lines[0]!.amount).toBe("0")
    expect(plain([event("feat_a", "plan_cheap", 3)])[0]!.lines[0]!.amount).toBe("1")
    expect(plain([event("feat_a", "plan_cheap", 10.5)])[0]!.lines[0]).toMatchObject({ quantity: "10.5", amount: "3" })
  })

  test("a credit-system feature: billable units are credits, the line is the credit system's", () => {
    // 3 images at 5 credits = 15 credits at 0.5 = 7.5 → 8. The plan names no currency: NGN.
    const [group] = plain([event("crs_ai", "plan_ai", 15)])
    expect(group).toEqual({
      customerId: "cus_1",
      currency: "NGN",
      subtotal: "8",
      events: 1,
      lines: [
        {
          feature: "ai-credits",
          description: "AI credits usage (AI)",
          quantity: "15",
          unitPrice: "0.5",
          amount: "8",
          tiers: []
        }
      ]
    })
  })

  test("groups by customer and currency, then plan and feature; periods are the events' span", () => {
    const events = [
      event("feat_tokens", "plan_pro", 1000, 3_000),
      event("feat_a", "plan_cheap", 4, 2_000),
      event("crs_ai", "plan_ai", 2, 1_000),
      event("feat_calls", "plan_metered", 1, 5_000),
      event("feat_a", "plan_cheap", 4, 4_000, "cus_2"),
      // Nothing billable: ignored.
      event("feat_b", "plan_cheap", 0, 9_000)
    ]
    const groups = rateUnbilled(catalog, events)
    expect(groups.map((g) => [g.customerId, g.currency, g.lines.map((l) => l.feature), format(g.subtotal)])).toEqual([
      ["cus_1", "NGN", ["ai-credits", "api-calls", "tokens"], "102"],
      ["cus_1", "USD", ["a"], "1"],
      ["cus_2", "USD", ["a"], "1"]
    ])
    expect([groups[0]!.periodStart, groups[0]!.periodEnd]).toEqual([1_000, 5_000])
    expect(groups[0]!.eventIds).toHaveLength(3)
    expect(groups.flatMap((g) => g.eventIds)).not.toContain(events[5]!.id)
  })

  test("a line records its events whole: what they billed and what the plan covered of them", () => {
    const groups = rateUnbilled(catalog, [
      // The event that ran past the plan's limit: 2 covered, 5 over.
      event("feat_tokens", "plan_pro", 5, 1_000, "cus_1", 2),
      event("feat_tokens", "plan_pro", 9, 2_000),
      event("feat_a", "plan_cheap", 0.5, 3_000, "cus_1", 0.25)
    ])
    const lines = groups.flatMap((g) => g.lines.map((l) => [l.feature, format(l.quantity), format(l.recorded)]))
    expect(lines).toEqual([
      ["tokens", "14", "16"],
      ["a", "0.5", "0.75"]
    ])
  })

  test("usage under a plan or plan feature the catalog no longer has is a zero-priced line, billed once", () => {
    const groups = plain([event("feat_tokens", "plan_gone", 5), event("feat_images", "plan_pro", 2)])
    expect(groups).toEqual([
      {
        customerId: "cus_1",
        currency: "NGN",
        subtotal: "0",
        events: 2,
        lines: [
          {
            feature: "images",
            description: "Images (no longer priced by the catalog)",
            quantity: "2",
            unitPrice: "0",
            amount: "0",
            tiers: []
          },
          {
            feature: "tokens",
            description: "Tokens (no longer priced by the catalog)",
            quantity: "5",
            unitPrice: "0",
            amount: "0",
            tiers: []
          }
        ]
      }
    ])
  })

  test("no events, no groups", () => {
    expect(rateUnbilled(catalog, [])).toEqual([])
  })
})

describe("stored and wire lines", () => {
  test("money stays exact in storage; amounts are whole minor units", () => {
    const [group] = rateUnbilled(catalog, [event("feat_calls", "plan_metered", 14, Date.UTC(2025, 0, 2))])
    const stored = storedLine(group!.lines[0]!)
    expect(stored).toEqual({
      feature: "api-calls",
      description: "API calls usage (Metered)",
      quantity: "14",
      unitPrice: "8",
      amount: "112",
      tierBreakdown: [
        { tier: 0, units: 10, unitPrice: "1", flatFee: "0", amount: "10" },
        { tier: 1, units: 4, unitPrice: "0.5", flatFee: "100", amount: "102" }
      ],
      periodStart: "2025-01-02T00:00:00.000Z",
      periodEnd: "2025-01-02T00:00:00.000Z"
    })
    expect(wireLine(stored)).toMatchObject({
      quantity: 14,
      unitPrice: 8,
      amount: 112,
      tierBreakdown: [{ amount: 10 }, { unitPrice: 0.5 }]
    })
    // A given amount that is not whole is rounded half-up.
    expect(storedLine({ ...group!.lines[0]!, amount: "2.5" }).amount).toBe("3")
  })

  test("divideHalfUp", () => {
    expect(format(divideHalfUp(unsafeDecimal(1), unsafeDecimal(3)))).toBe("0.333333")
    expect(format(divideHalfUp(unsafeDecimal(2), unsafeDecimal(3)))).toBe("0.666667")
    expect(format(divideHalfUp(unsafeDecimal(200), unsafeDecimal(1500)))).toBe("0.133333")
    expect(format(divideHalfUp(unsafeDecimal("0.0000005"), unsafeDecimal(1)))).toBe("0.000001")
  })
})
