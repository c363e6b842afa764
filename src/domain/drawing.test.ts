import { describe, expect, test } from "bun:test"
import { type DrawRequest, draw, type OverageTerms } from "./drawing.ts"
import { format, unsafeDecimal } from "./money.ts"

const noOverage: OverageTerms = {
  allowed: false,
  maxOverageUnits: null,
  overageUsedUnits: 0,
  spendCap: null,
  spendSoFar: 0,
  pricePerOverageUnit: 0
}

const req = (r: Partial<DrawRequest> & Pick<DrawRequest, "requested">, overage: Partial<OverageTerms> = {}) =>
  draw({ planRemaining: 0, bonus: 0, addon: 0, ...r, overage: { ...noOverage, ...overage } })

/** The draw without its exact parts and cost, for compact expectations; those are checked on their own. */
const summary = (r: Partial<DrawRequest> & Pick<DrawRequest, "requested">, overage: Partial<OverageTerms> = {}) => {
  const { exact: _, overageCost, ...rest } = req(r, overage)
  return { ...rest, overageCost: format(overageCost) }
}

const nothing = { fromPlan: 0, fromBonus: 0, fromAddon: 0, overageUnits: 0, overageCost: "0", notify: false }

describe("plan balance", () => {
  test("within the plan", () => {
    expect(summary({ requested: 3, planRemaining: 10, bonus: 5 })).toEqual({
      allowed: true,
      fromPlan: 3,
      fromBonus: 0,
      fromAddon: 0,
      overageUnits: 0,
      overageCost: "0",
      notify: false,
      reason: "within_plan",
      cap: null
    })
  })

  test("exactly the remaining balance is still within the plan", () => {
    expect(summary({ requested: 10, planRemaining: 10 })).toMatchObject({
      allowed: true,
      fromPlan: 10,
      reason: "within_plan"
    })
  })

  test("one more than remaining with nothing else: limit_exceeded, nothing drawn", () => {
    expect(summary({ requested: 11, planRemaining: 10 })).toEqual({
      allowed: false,
      ...nothing,
      reason: "limit_exceeded",
      cap: null
    })
  })

  test("unlimited plan takes everything", () => {
    expect(summary({ requested: 1e9, planRemaining: null })).toMatchObject({
      allowed: true,
      fromPlan: 1e9,
      reason: "within_plan"
    })
  })

  test("a negative remaining (limit lowered below usage) gives nothing", () => {
    expect(summary({ requested: 1, planRemaining: -4, bonus: 1 })).toMatchObject({
      allowed: true,
      fromPlan: 0,
      fromBonus: 1,
      reason: "addon_credits"
    })
  })

  test("zero requested is allowed and draws nothing, even with nothing left", () => {
    expect(summary({ requested: 0, planRemaining: 0 })).toEqual({
      allowed: true,
      ...nothing,
      reason: "within_plan",
      cap: null
    })
  })

  test("negative requested is a programming error", () => {
    expect(() => req({ requested: -1 })).toThrow(RangeError)
  })
})

describe("bonus then addon credits", () => {
  test("plan first, then bonus, then addon", () => {
    expect(summary({ requested: 10, planRemaining: 4, bonus: 3, addon: 5 })).toEqual({
      allowed: true,
      fromPlan: 4,
      fromBonus: 3,
      fromAddon: 3,
      overageUnits: 0,
      overageCost: "0",
      notify: false,
      reason: "addon_credits",
      cap: null
    })
  })

  test("exactly all of plan + bonus + addon", () => {
    expect(summary({ requested: 12, planRemaining: 4, bonus: 3, addon: 5 })).toMatchObject({
      allowed: true,
      fromPlan: 4,
      fromBonus: 3,
      fromAddon: 5,
      reason: "addon_credits"
    })
  })

  test("one past plan + bonus + addon with overage off: denied, nothing drawn", () => {
    expect(summary({ requested: 13, planRemaining: 4, bonus: 3, addon: 5 })).toEqual({
      allowed: false,
      ...nothing,
      reason: "limit_exceeded",
      cap: null
    })
  })

  test("fractional quantities add up exactly: 0.1 plan + 0.2 bonus covers 0.3", () => {
    // In floating point 0.3 - 0.1 - 0.2 = -2.8e-17, and 0.1 + 0.2 > 0.3.
    expect(summary({ requested: 0.3, planRemaining: 0.1, bonus: 0.2 })).toMatchObject({
      allowed: true,
      fromPlan: 0.1,
      fromBonus: 0.2,
      fromAddon: 0,
      overageUnits: 0,
      reason: "addon_credits"
    })
    expect(summary({ requested: 0.7, planRemaining: 0.1, bonus: 0.2, addon: 0.4 })).toMatchObject({
      allowed: true,
      fromAddon: 0.4
    })
    expect(summary({ requested: 0.7000001, planRemaining: 0.1, bonus: 0.2, addon: 0.4 }).allowed).toBe(false)
  })
})

describe("overage", () => {
  const charge = { allowed: true, pricePerOverageUnit: 2.5 }

  test("allowed overage takes the rest after plan, bonus and addon", () => {
    expect(summary({ requested: 10, planRemaining: 4, bonus: 1, addon: 2 }, charge)).toEqual({
      allowed: true,
      fromPlan: 4,
      fromBonus: 1,
      fromAddon: 2,
      overageUnits: 3,
      overageCost: "7.5",
      notify: false,
      reason: "overage",
      cap: null
    })
  })

  test("maxOverageUnits: exactly reaching it is allowed", () => {
    expect(
      summary({ requested: 5, planRemaining: 2 }, { ...charge, maxOverageUnits: 10, overageUsedUnits: 7 })
    ).toMatchObject({
      allowed: true,
      fromPlan: 2,
      overageUnits: 3,
      reason: "overage"
    })
  })

  test("maxOverageUnits: passing it denies and draws nothing, not even the plan part", () => {
    expect(
      summary({ requested: 6, planRemaining: 2 }, { ...charge, maxOverageUnits: 10, overageUsedUnits: 7 })
    ).toEqual({
      allowed: false,
      ...nothing,
      reason: "overage_cap",
      cap: "max_overage_units"
    })
  })

  test("maxOverageUnits 0 means no overage at all", () => {
    expect(summary({ requested: 0.5, planRemaining: 0 }, { ...charge, maxOverageUnits: 0 })).toMatchObject({
      allowed: false,
      reason: "overage_cap",
      cap: "max_overage_units"
    })
  })

  test("spend cap block: reaching the cap exactly is allowed", () => {
    // 1000 spent + 4 units × 2.5 = 1010 = max
    const r = summary(
      { requested: 4 },
      { ...charge, spendCap: { max: 1010, onLimitReached: "block" }, spendSoFar: 1000 }
    )
    expect(r).toMatchObject({
      allowed: true,
      overageUnits: 4,
      overageCost: "10",
      notify: false,
      reason: "overage",
      cap: null
    })
  })

  test("spend cap block: passing it denies", () => {
    // 1000 + 4.4 × 2.5 = 1011 > 1010
    expect(
      summary({ requested: 4.4 }, { ...charge, spendCap: { max: 1010, onLimitReached: "block" }, spendSoFar: 1000 })
    ).toEqual({
      allowed: false,
      ...nothing,
      reason: "overage_cap",
      cap: "spend_cap"
    })
  })

  test("spend cap notify: passing it allows and asks for a notification", () => {
    expect(
      summary({ requested: 4.4 }, { ...charge, spendCap: { max: 1010, onLimitReached: "notify" }, spendSoFar: 1000 })
    ).toEqual({
      allowed: true,
      fromPlan: 0,
      fromBonus: 0,
      fromAddon: 0,
      overageUnits: 4.4,
      overageCost: "11",
      notify: true,
      reason: "overage",
      cap: "spend_cap"
    })
  })

  test("spend cap notify: reaching it exactly does not notify", () => {
    expect(
      summary({ requested: 4 }, { ...charge, spendCap: { max: 1010, onLimitReached: "notify" }, spendSoFar: 1000 })
    ).toMatchObject({
      allowed: true,
      notify: false,
      cap: null
    })
  })

  test("per-feature cap is checked before the spend cap", () => {
    const r = summary(
      { requested: 5 },
      { ...charge, maxOverageUnits: 4, spendCap: { max: 0, onLimitReached: "notify" } }
    )
    expect(r).toMatchObject({ allowed: false, reason: "overage_cap", cap: "max_overage_units" })
  })

  test("spend cap compares exact fractional cost: 3 × 0.1 against a cap of 0.3", () => {
    // Floating point says 0.1 * 3 = 0.30000000000000004 > 0.3 and would block.
    const r = summary(
      { requested: 3 },
      { allowed: true, pricePerOverageUnit: 0.1, spendCap: { max: 0.3, onLimitReached: "block" } }
    )
    expect(r).toMatchObject({ allowed: true, overageUnits: 3, overageCost: "0.3" })
  })

  test("only the part beyond the credits counts toward the caps", () => {
    // 8 requested, 6 covered by plan + addon: 2 overage units, within maxOverageUnits 2, cost 5 within cap 5.
    const r = summary(
      { requested: 8, planRemaining: 5, addon: 1 },
      { ...charge, maxOverageUnits: 2, spendCap: { max: 5, onLimitReached: "block" } }
    )
    expect(r).toMatchObject({ allowed: true, fromPlan: 5, fromAddon: 1, overageUnits: 2, overageCost: "5" })
  })
})

describe("exact parts", () => {
  test("past 2^53 micro-units the numbers round, the exact parts do not", () => {
    // 3 × a credit cost of 3333333333.333333: 9999999999.999999 credits, 16 significant digits.
    const d = req({
      requested: unsafeDecimal("9999999999.999999"),
      planRemaining: unsafeDecimal("9999999999.999998"),
      bonus: 1
    })
    expect(d.fromPlan).toBe(9999999999.999998)
    expect(format(d.exact.fromPlan)).toBe("9999999999.999998")
    expect(format(d.exact.fromBonus)).toBe("0.000001")
    const over = req({ requested: unsafeDecimal("9999999999.999999"), planRemaining: 0 }, { allowed: true })
    expect(format(over.exact.overageUnits)).toBe("9999999999.999999")
    expect(format(req({ requested: unsafeDecimal("9999999999.999999"), planRemaining: null }).exact.fromPlan)).toBe(
      "9999999999.999999"
    )
    expect(format(req({ requested: 5, planRemaining: 1 }).exact.fromPlan)).toBe("0")
  })
})
