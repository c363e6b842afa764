import { describe, expect, test } from "bun:test"
import { BigDecimal } from "effect"
import { format, unsafeDecimal } from "./money.ts"
import { type Pricing, rate, type Tier, validatePricing, validateTiers } from "./rating.ts"

/** The rating with every Decimal as its plain string, so expectations read as the worked numbers they are. */
const plain = (units: number | string, pricing: Pricing) => {
  const r = rate(typeof units === "string" ? unsafeDecimal(units) : units, pricing)
  return {
    amount: format(r.amount),
    lines: r.tierBreakdown.map((l) => ({
      ...l,
      unitPrice: format(l.unitPrice),
      flatFee: format(l.flatFee),
      amount: format(l.amount)
    })),
    current:
      r.currentTier === null
        ? null
        : { ...r.currentTier, unitPrice: format(r.currentTier.unitPrice), flatFee: format(r.currentTier.flatFee) }
  }
}

const tiers: ReadonlyArray<Tier> = [
  { upTo: 100, unitPrice: "10" },
  { upTo: 1000, unitPrice: "5", flatFee: "200" },
  { upTo: null, unitPrice: "2.5" }
]
const graduated: Pricing = { ratingModel: "graduated", tiers }
const volume: Pricing = { ratingModel: "volume", tiers }

describe("package", () => {
  test("billingUnits 100 with 150 units bills 2 packages", () => {
    const pricing: Pricing = { ratingModel: "package", pricePerUnit: "500", billingUnits: 100 }
    expect(plain(150, pricing)).toEqual({ amount: "1000", lines: [], current: null })
    expect(plain(200, pricing).amount).toBe("1000")
    expect(plain(201, pricing).amount).toBe("1500")
    expect(plain(1, pricing).amount).toBe("500")
    expect(plain(0, pricing).amount).toBe("0")
  })

  test("is the default model, with billingUnits defaulting to 1", () => {
    expect(plain(7, { pricePerUnit: 3 }).amount).toBe("21")
    expect(plain(7, {}).amount).toBe("0")
  })

  test("fractional unit price 0.25 × 3 units = 0.75 rounds to 1", () => {
    expect(plain(3, { pricePerUnit: "0.25" }).amount).toBe("1")
  })

  test("half-up at .5: 0.25 × 2 = 0.5 → 1, 0.25 × 10 = 2.5 → 3, 0.25 × 9 = 2.25 → 2", () => {
    expect(plain(2, { pricePerUnit: "0.25" }).amount).toBe("1")
    expect(plain(10, { pricePerUnit: "0.25" }).amount).toBe("3") // half-even would say 2
    expect(plain(9, { pricePerUnit: "0.25" }).amount).toBe("2")
  })

  test("fractional units round up to a whole package", () => {
    expect(plain("0.5", { pricePerUnit: "10" }).amount).toBe("10")
    expect(plain("2.0001", { pricePerUnit: "10" }).amount).toBe("30")
  })

  test("prices given as JSON numbers are taken at their decimal value", () => {
    // In binary floating point 0.145 × 100 = 14.499999999999998, which would round to 14; exactly it is 14.5 → 15.
    expect(plain(100, { pricePerUnit: 0.145 }).amount).toBe("15")
    expect(plain(3, { pricePerUnit: 0.1 }).amount).toBe("0")
  })
})

describe("graduated", () => {
  test("zero units: nothing billed, next unit in tier 0", () => {
    expect(plain(0, graduated)).toEqual({
      amount: "0",
      lines: [],
      current: { index: 0, startsAt: 0, endsAt: 100, unitPrice: "10", flatFee: "0" }
    })
  })

  test("exactly at the first upTo: only tier 0 billed, next unit in tier 1", () => {
    expect(plain(100, graduated)).toEqual({
      amount: "1000",
      lines: [{ tier: 0, units: 100, packages: 100, unitPrice: "10", flatFee: "0", amount: "1000" }],
      current: { index: 1, startsAt: 100, endsAt: 1000, unitPrice: "5", flatFee: "200" }
    })
  })

  test("one unit past the edge brings tier 1's flat fee", () => {
    const r = plain(101, graduated)
    expect(r.lines.map((l) => [l.tier, l.units, l.amount])).toEqual([
      [0, 100, "1000"],
      [1, 1, "205"]
    ])
    expect(r.amount).toBe("1205")
  })

  test("exactly at the second upTo: 1000 + 900 × 5 + 200", () => {
    const r = plain(1000, graduated)
    expect(r.amount).toBe("5700")
    expect(r.current).toEqual({ index: 2, startsAt: 1000, endsAt: null, unitPrice: "2.5", flatFee: "0" })
  })

  test("into the unbounded tier with half-up per tier line", () => {
    // tier 2: 1 × 2.5 = 2.5 → 3; 3 × 2.5 = 7.5 → 8
    expect(plain(1001, graduated).amount).toBe("5703")
    expect(plain(1003, graduated).lines[2]).toEqual({
      tier: 2,
      units: 3,
      packages: 3,
      unitPrice: "2.5",
      flatFee: "0",
      amount: "8"
    })
    expect(plain(1003, graduated).amount).toBe("5708")
  })

  test("rounds per tier line and sums the rounded lines", () => {
    // 0.5 + 0.5 would round to 1 as a whole; the invoice shows two lines of 1, so the total is 2.
    const r = plain(2, {
      ratingModel: "graduated",
      tiers: [
        { upTo: 1, unitPrice: "0.5" },
        { upTo: null, unitPrice: "0.5" }
      ]
    })
    expect(r.lines.map((l) => l.amount)).toEqual(["1", "1"])
    expect(r.amount).toBe("2")
  })

  test("billingUnits: packages are rounded up per tier", () => {
    const pricing: Pricing = {
      ratingModel: "graduated",
      billingUnits: 100,
      tiers: [
        { upTo: 1000, unitPrice: "50" },
        { upTo: null, unitPrice: "30" }
      ]
    }
    const r = plain(1050, pricing)
    expect(r.lines.map((l) => [l.units, l.packages, l.amount])).toEqual([
      [1000, 10, "500"],
      [50, 1, "30"]
    ])
    expect(r.amount).toBe("530")
  })

  test("fractional units split exactly across a tier edge", () => {
    const r = plain("100.3", {
      ratingModel: "graduated",
      tiers: [
        { upTo: 100.1, unitPrice: "1" },
        { upTo: null, unitPrice: "1" }
      ]
    })
    expect(r.lines.map((l) => [l.units, l.packages])).toEqual([
      [100.1, 101],
      [0.2, 1]
    ])
    expect(r.amount).toBe("102")
  })

  test("no tiers: one unbounded tier at pricePerUnit", () => {
    expect(plain(4, { ratingModel: "graduated", pricePerUnit: "3" })).toEqual({
      amount: "12",
      lines: [{ tier: 0, units: 4, packages: 4, unitPrice: "3", flatFee: "0", amount: "12" }],
      current: { index: 0, startsAt: 0, endsAt: null, unitPrice: "3", flatFee: "0" }
    })
  })

  test("a stored bounded last tier is billed as unbounded rather than dropping units", () => {
    const r = plain(25, {
      ratingModel: "graduated",
      tiers: [
        { upTo: 10, unitPrice: "1" },
        { upTo: 20, unitPrice: "2" }
      ]
    })
    expect(r.lines.map((l) => [l.units, l.amount])).toEqual([
      [10, "10"],
      [15, "30"]
    ])
    expect(r.amount).toBe("40")
  })
})

describe("volume", () => {
  test("exactly at upTo: all units at that tier's price", () => {
    expect(plain(100, volume)).toEqual({
      amount: "1000",
      lines: [{ tier: 0, units: 100, packages: 100, unitPrice: "10", flatFee: "0", amount: "1000" }],
      current: { index: 1, startsAt: 100, endsAt: 1000, unitPrice: "5", flatFee: "200" }
    })
  })

  test("one past: every unit at the cheaper tier, plus its flat fee", () => {
    expect(plain(101, volume).amount).toBe("705") // 101 × 5 + 200
    expect(plain(1000, volume).amount).toBe("5200")
  })

  test("unbounded tier with half-up: 1001 × 2.5 = 2502.5 → 2503", () => {
    const r = plain(1001, volume)
    expect(r.amount).toBe("2503")
    expect(r.lines).toEqual([{ tier: 2, units: 1001, packages: 1001, unitPrice: "2.5", flatFee: "0", amount: "2503" }])
  })

  test("zero units: no flat fee", () => {
    const r = plain(0, { ratingModel: "volume", tiers: [{ upTo: null, unitPrice: "1", flatFee: "999" }] })
    expect(r.amount).toBe("0")
    expect(r.lines).toEqual([])
    expect(r.current?.index).toBe(0)
  })

  test("billingUnits apply to the whole quantity", () => {
    const pricing: Pricing = {
      ratingModel: "volume",
      billingUnits: 1000,
      tiers: [
        { upTo: 5000, unitPrice: "40" },
        { upTo: null, unitPrice: "25" }
      ]
    }
    expect(plain(5000, pricing).amount).toBe("200") // 5 packages × 40
    expect(plain(5001, pricing).amount).toBe("150") // 6 packages × 25
  })
})

describe("rate rejects nonsense inputs", () => {
  test("negative units and non-positive billingUnits", () => {
    expect(() => rate(-1, { pricePerUnit: "1" })).toThrow(RangeError)
    expect(() => rate(1, { pricePerUnit: "1", billingUnits: 0 })).toThrow(RangeError)
  })

  test("amounts are BigDecimals", () => {
    expect(BigDecimal.isBigDecimal(rate(3, { pricePerUnit: "0.25" }).amount)).toBe(true)
  })
})

describe("validateTiers", () => {
  test("a good tier list has no problems", () => {
    expect(validateTiers(tiers)).toEqual([])
    expect(validateTiers([{ upTo: null, unitPrice: "0" }])).toEqual([])
  })

  test("empty", () => {
    expect(validateTiers([])).toEqual(["tiers: must have at least one tier"])
  })

  test("not ascending: each offender against the highest bound so far", () => {
    expect(
      validateTiers([
        { upTo: 100, unitPrice: "1" },
        { upTo: 50, unitPrice: "1" },
        { upTo: 80, unitPrice: "1" },
        { upTo: 100, unitPrice: "1" },
        { upTo: null, unitPrice: "1" }
      ])
    ).toEqual([
      "tiers[1].upTo: tiers must be ascending; 50 is not greater than tiers[0].upTo 100",
      "tiers[2].upTo: tiers must be ascending; 80 is not greater than tiers[0].upTo 100",
      "tiers[3].upTo: tiers must be ascending; 100 is not greater than tiers[0].upTo 100"
    ])
  })

  test("last tier must be unbounded, and only the last", () => {
    expect(
      validateTiers([
        { upTo: null, unitPrice: "1" },
        { upTo: 100, unitPrice: "1" }
      ])
    ).toEqual([
      "tiers[0].upTo: only the last tier may be unbounded (null)",
      "tiers[1].upTo: the last tier must be unbounded (null)"
    ])
  })

  test("negative or malformed prices, non-positive bounds: every problem listed", () => {
    expect(
      validateTiers([
        { upTo: 0, unitPrice: "-1", flatFee: -5 },
        { upTo: 10, unitPrice: "abc" },
        { upTo: null, unitPrice: NaN, flatFee: "0.5" }
      ])
    ).toEqual([
      "tiers[0].upTo: must be a positive number",
      "tiers[0].unitPrice: must not be negative",
      "tiers[0].flatFee: must not be negative",
      "tiers[1].unitPrice: must be a decimal number",
      "tiers[2].unitPrice: must be a decimal number"
    ])
  })
})

describe("validatePricing", () => {
  test("collects field problems and tier problems", () => {
    expect(validatePricing({ pricePerUnit: "0.25", billingUnits: 100 })).toEqual([])
    expect(
      validatePricing({
        ratingModel: "tiered" as never,
        pricePerUnit: "-0.01",
        billingUnits: 0,
        tiers: [{ upTo: 5, unitPrice: "1" }]
      })
    ).toEqual([
      "ratingModel: must be one of package, graduated, volume",
      "pricePerUnit: must not be negative",
      "billingUnits: must be a positive number",
      "tiers[0].upTo: the last tier must be unbounded (null)"
    ])
  })
})
