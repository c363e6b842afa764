import { describe, expect, test } from "bun:test"
import { type CouponTerms, couponFitsCurrency, type DiscountableLine, lineDiscounts } from "./discounts.ts"
import { format, unsafeDecimal as d } from "./money.ts"

const percent = (p: string, plans: ReadonlyArray<string> | null = null): CouponTerms => ({
  slug: "pct",
  percentOff: d(p),
  amountOff: null,
  currency: null,
  plans
})
const amountOff = (a: string, currency = "NGN", plans: ReadonlyArray<string> | null = null): CouponTerms => ({
  slug: "amt",
  percentOff: null,
  amountOff: d(a),
  currency,
  plans
})
const line = (amount: string, plan: string | null = "pro"): DiscountableLine => ({ amount: d(amount), plan })
const shown = (coupon: CouponTerms, lines: ReadonlyArray<DiscountableLine>) => lineDiscounts(coupon, lines).map(format)

describe("lineDiscounts: a percentage", () => {
  test("per covered line, rounded half-up", () => {
    // 1234 × 12.5% = 154.25 → 154; 1236 × 12.5% = 154.5 → 155; 3 × 33.33% = 0.9999 → 1; 1 × 10% = 0.1 → 0
    expect(shown(percent("12.5"), [line("1234"), line("1236")])).toEqual(["154", "155"])
    expect(shown(percent("33.33"), [line("3"), line("1")])).toEqual(["1", "0"])
    expect(shown(percent("100"), [line("999")])).toEqual(["999"])
  })

  test("only the lines of the plans it names; never a credit line nor a line of no plan", () => {
    const lines = [line("1000", "pro"), line("2000", "team"), line("-500", "pro"), line("300", null)]
    expect(shown(percent("10", ["pro"]), lines)).toEqual(["100", "0", "0", "0"])
    expect(shown(percent("10"), lines)).toEqual(["100", "200", "0", "0"])
  })
})

describe("lineDiscounts: an amount off", () => {
  test("spread in proportion to the covered lines, half-up, the last covered line taking the remainder", () => {
    // 1000 over 3000 + 1000 + 2000 (sum 6000): 500, 166.67 → 167, last 1000 − 667 = 333
    expect(shown(amountOff("1000"), [line("3000"), line("1000"), line("2000")])).toEqual(["500", "167", "333"])
    // 10 over three equal lines: 3.33 → 3 twice, the last 4
    expect(shown(amountOff("10"), [line("10"), line("10"), line("10")])).toEqual(["3", "3", "4"])
  })

  test("capped at the covered lines' sum: a total never goes below zero", () => {
    expect(shown(amountOff("50000"), [line("1200"), line("800", "team"), line("300")])).toEqual(["1200", "800", "300"])
    expect(shown(amountOff("100"), [line("10"), line("10"), line("10")])).toEqual(["10", "10", "10"])
    expect(shown(amountOff("50000", "NGN", ["pro"]), [line("1200"), line("800", "team")])).toEqual(["1200", "0"])
  })

  test("uncovered lines are skipped, the remainder goes to the last covered line", () => {
    expect(shown(amountOff("5", "NGN", ["pro"]), [line("3"), line("3"), line("100", "team")])).toEqual(["3", "2", "0"])
  })

  test("many tiny lines never take more than is left, nor more than their amount", () => {
    // 3 over six lines of 1: each share 0.5 → 1 until nothing is left; sums to exactly 3
    const tiny = Array.from({ length: 6 }, () => line("1"))
    const out = lineDiscounts(amountOff("3"), tiny).map(format)
    expect(out).toEqual(["1", "1", "1", "0", "0", "0"])
  })

  test("no covered line: nothing", () => {
    expect(shown(amountOff("100", "NGN", ["team"]), [line("1000")])).toEqual(["0"])
    expect(shown(amountOff("100"), [line("-1000")])).toEqual(["0"])
  })

  test("an amount off fits only its currency (minor units of that currency's exponent)", () => {
    expect(couponFitsCurrency(amountOff("500", "jpy"), "JPY")).toBe(true)
    expect(couponFitsCurrency(amountOff("500", "NGN"), "USD")).toBe(false)
    expect(couponFitsCurrency(percent("10"), "USD")).toBe(true)
  })
})
