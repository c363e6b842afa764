import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import type { PlanFeature, PlanTier } from "../catalog/model.ts"
import { pricingOf } from "../catalog/pricing.ts"
import { format, moneyFitsJson } from "../domain/money.ts"
import { fromMicro } from "../domain/quantity.ts"
import { rate } from "../domain/rating.ts"
import type { BalanceRow } from "./records.ts"
import { windowAmountPast } from "./windowMoney.ts"

const terms = (over: Partial<PlanFeature>): PlanFeature => ({
  slug: "f",
  enabled: true,
  limit: null,
  trialLimit: null,
  reset: "monthly",
  usageModel: "usage_based",
  ratingModel: "graduated",
  pricePerUnit: null,
  billingUnits: 1,
  tiers: null,
  overage: "block",
  overagePrice: null,
  maxOverageUnits: null,
  creditCost: null,
  ...over
})
const row = (usedMicro: bigint): BalanceRow => ({
  windowStart: 0,
  windowEnd: null,
  used: usedMicro,
  overage: 0n,
  bonus: 0n,
  addon: 0n
})
const tiers = (...t: Array<[number | null, string, string?]>): Array<PlanTier> =>
  t.map(([upTo, unitPrice, flatFee]) => ({ upTo, unitPrice, flatFee: flatFee ?? "0" }))

describe("windowAmountPast", () => {
  const graduated = terms({ tiers: tiers([10, "1"], [null, "987654321987"]) })

  test("the exact amount when the window's tiers price past Number.MAX_SAFE_INTEGER, else nothing", () => {
    expect(windowAmountPast(graduated, row(9129n * 1_000_000n))).toBeUndefined()
    expect(format(windowAmountPast(graduated, row(9130n * 1_000_000n))!)).toBe("9007407416521450")
    expect(windowAmountPast(graduated, row(0n))).toBeUndefined()
    expect(windowAmountPast(null, row(9130n * 1_000_000n))).toBeUndefined()
  })

  test("package pricing's answers show no amount: never refused here", () => {
    const pkg = terms({ ratingModel: "package", pricePerUnit: "987654321987" })
    expect(windowAmountPast(pkg, row(9_000_000_000n * 1_000_000n))).toBeUndefined()
  })

  test("agrees with the exact rating wherever it is asked (the doubles' estimate never lets a past amount through)", () => {
    const price = fc.oneof(
      fc.constantFrom("0", "0.25", "1", "987654321987", "1000000000000", "999999999999.999999"),
      fc.integer({ min: 0, max: 1_000_000_000_000 }).map(String)
    )
    fc.assert(
      fc.property(
        fc.constantFrom<"graduated" | "volume">("graduated", "volume"),
        price,
        price,
        fc.integer({ min: 0, max: 1_000_000_000_000 }).map(String),
        fc.integer({ min: 1, max: 1000 }),
        fc.bigInt({ min: 0n, max: 9_000_000_000_000n * 1_000_000n }),
        (model, p1, p2, fee, billingUnits, micro) => {
          const t = terms({ ratingModel: model, billingUnits, tiers: tiers([1000, p1], [null, p2, fee]) })
          const exact = rate(fromMicro(micro), pricingOf(t)).amount
          const past = windowAmountPast(t, row(micro))
          expect(past === undefined).toBe(moneyFitsJson(exact))
        }
      ),
      { numRuns: 500 }
    )
  })
})
