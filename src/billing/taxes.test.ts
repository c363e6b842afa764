import { describe, expect, test } from "bun:test"
import type { CouponTerms } from "../domain/discounts.ts"
import { format, unsafeDecimal as d } from "../domain/money.ts"
import type { TaxRateTerms } from "../domain/taxes.ts"
import { discountLines, priceLines } from "./taxes.ts"
import type { LineInput } from "./lines.ts"

const coupon = (slug: string, terms: Partial<CouponTerms>): CouponTerms => ({
  slug,
  percentOff: null,
  amountOff: null,
  currency: null,
  plans: null,
  ...terms
})
const line = (amount: number, plan?: string): LineInput => ({
  feature: plan ?? "credit",
  ...(plan === undefined ? {} : { plan }),
  description: "x",
  quantity: 1,
  unitPrice: amount,
  amount,
  periodStart: 0,
  periodEnd: 1
})
const vat: TaxRateTerms = {
  slug: "vat",
  name: "VAT",
  percentage: d("7.5"),
  inclusive: false,
  country: "NG",
  state: null
}

describe("discountLines: coupons one after another", () => {
  test("the second coupon takes its share of what the first left; a credit line is never discounted", () => {
    const out = discountLines(
      [line(-3333), line(13333, "pro")],
      [coupon("sub", { percentOff: d("25") }), coupon("cust", { percentOff: d("10"), plans: ["pro"] })],
      "NGN"
    )
    // 13333 × 25% = 3333.25 → 3333; then 10% of the 10000 left = 1000.
    expect(out.lines.map((l) => l.discounts ?? [])).toEqual([
      [],
      [
        { coupon: "sub", amount: "3333" },
        { coupon: "cust", amount: "1000" }
      ]
    ])
    expect(out.took).toEqual([true, true])
  })

  test("a coupon that covers nothing, or is an amount off in another currency, takes nothing and is not used", () => {
    const out = discountLines(
      [line(5000, "basic")],
      [
        coupon("pro-only", { percentOff: d("50"), plans: ["pro"] }),
        coupon("usd", { amountOff: d("100"), currency: "USD" })
      ],
      "NGN"
    )
    expect(out.lines[0]!.discounts).toBeUndefined()
    expect(out.took).toEqual([false, false])
  })
})

describe("priceLines: discounts, then taxes per line (a credit's negative), then the sums", () => {
  test("a credit larger than the charge: the total is below zero by the credit's tax too", () => {
    const priced = priceLines([line(-15484), line(3871, "basic")], [], "NGN", [vat], {
      address: { line1: "1", city: "Lagos", country: "NG" } as never,
      taxExempt: "none"
    })
    // −15484 × 7.5% = −1161.3 → −1161; 3871 × 7.5% = 290.325 → 290.
    expect(priced.lines.map((l) => l.taxes?.map((t) => t.amount))).toEqual([["-1161"], ["290"]])
    expect(format(priced.total)).toBe(String(-15484 + 3871 - 1161 + 290))
  })
})
