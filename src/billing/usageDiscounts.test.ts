import { describe, expect, test } from "bun:test"
import type { Plan } from "../catalog/model.ts"
import type { CouponRecord } from "../catalog/coupons.ts"
import type { BoundDiscount } from "../catalog/subscriptionDiscounts.ts"
import type { InvoiceRecord } from "./InvoicesRepo.ts"
import { inForce, takenThisPeriod, usageDiscountTerms } from "./usageDiscounts.ts"

const plan = (id: string, planGroup: string | null, isAddon = false) => ({ id, planGroup, isAddon }) as unknown as Plan
const plans = new Map<string, Plan>([
  ["p_pro", plan("p_pro", null)],
  ["p_basic", plan("p_basic", null)],
  ["p_team", plan("p_team", "team")],
  ["p_seats", plan("p_seats", null, true)]
])

const coupon = (slug: string, plans: ReadonlyArray<string> | null = null): CouponRecord => ({
  id: `cp_${slug}`,
  slug,
  name: slug,
  percentOff: "10",
  amountOff: null,
  currency: null,
  duration: "forever",
  durationInCycles: null,
  maxRedemptions: null,
  redemptions: 1,
  redeemBy: null,
  plans
})

const bound = (
  subscriptionId: string,
  planId: string,
  c: CouponRecord,
  invoicesLeft: number | null = null,
  currentPeriodEnd: number | null = 2_000
): BoundDiscount => ({
  subscriptionId,
  planId,
  currentPeriodStart: 1_000,
  currentPeriodEnd,
  boundAt: 100,
  discount: { coupon: c, promotionCode: null, invoicesLeft }
})

const invoice = (subscriptionId: string, periodEnd: number, couponSlug: string, extra: Partial<InvoiceRecord> = {}) =>
  ({
    subscriptionId,
    status: "paid",
    createdAt: 200,
    periodEnd,
    lines: [{ discounts: [{ coupon: couponSlug, amount: "1" }] }],
    ...extra
  }) as unknown as InvoiceRecord

describe("usage lines covered by subscription discounts (h19)", () => {
  test("each subscription's coupon narrowed to its own plans' lines, in the subscriptions' order", () => {
    const lines = [{ planId: "p_pro", plan: "pro" }, { planId: "p_team", plan: "team" }, { planId: null }]
    const terms = usageDiscountTerms(
      lines,
      [bound("s1", "p_pro", coupon("a")), bound("s2", "p_team", coupon("b"))],
      plans,
      []
    )
    expect(terms.map((t) => [t.slug, t.plans])).toEqual([
      ["a", ["pro"]],
      ["b", ["team"]]
    ])
  })

  test("usage of an earlier plan of the same group is the subscription's; an add-on's only its own", () => {
    const lines = [
      { planId: "p_basic", plan: "basic" },
      { planId: "p_seats", plan: "seats" }
    ]
    expect(usageDiscountTerms(lines, [bound("s1", "p_pro", coupon("a"))], plans, []).map((t) => t.plans)).toEqual([
      ["basic"]
    ])
    expect(usageDiscountTerms(lines, [bound("s3", "p_seats", coupon("c"))], plans, []).map((t) => t.plans)).toEqual([
      ["seats"]
    ])
  })

  test("the coupon's own plans still limit it; nothing covered: no terms", () => {
    const lines = [{ planId: "p_pro", plan: "pro" }]
    expect(usageDiscountTerms(lines, [bound("s1", "p_pro", coupon("a", ["team"]))], plans, [])).toEqual([])
    expect(usageDiscountTerms(lines, [bound("s9", "p_team", coupon("a"))], plans, [])).toEqual([])
  })

  test("in force: invoices left, forever, or spent by an invoice of the current period since it was bound", () => {
    const spent = bound("s1", "p_pro", coupon("a"), 0, 2_000)
    expect(inForce(bound("s1", "p_pro", coupon("a"), 1), [])).toBe(true)
    expect(inForce(bound("s1", "p_pro", coupon("a"), null), [])).toBe(true)
    expect(inForce(spent, [])).toBe(false)
    expect(inForce(spent, [invoice("s1", 2_000, "a")])).toBe(true)
    // An earlier period's, another subscription's, another coupon's, a void one, or one from before the binding: no.
    expect(inForce(spent, [invoice("s1", 1_000, "a")])).toBe(false)
    expect(inForce(spent, [invoice("s2", 2_000, "a")])).toBe(false)
    expect(inForce(spent, [invoice("s1", 2_000, "b")])).toBe(false)
    expect(inForce(spent, [invoice("s1", 2_000, "a", { status: "void" })])).toBe(false)
    expect(inForce(spent, [invoice("s1", 2_000, "a", { createdAt: 50 })])).toBe(false)
  })

  test("an amount off is one budget per period: the period's fee and usage invoices share it", () => {
    const amount = { ...coupon("flat"), percentOff: null, amountOff: "1000", currency: "NGN" }
    const b = bound("s1", "p_pro", amount, null, 2_000)
    const took = (n: string) => [{ discounts: [{ coupon: "flat", amount: n }] }] as unknown as InvoiceRecord["lines"]
    const invoices = [
      invoice("s1", 2_000, "flat", { lines: took("600") }),
      invoice("s1", 1_000, "flat", { lines: took("1000") }),
      invoice("x", 0, "flat", { subscriptionId: null, createdAt: 1_500, lines: took("100") }),
      invoice("x", 0, "flat", { subscriptionId: null, createdAt: 900, lines: took("50") }),
      invoice("x", 0, "flat", {
        subscriptionId: null,
        createdAt: 1_600,
        status: "void",
        lines: took("70")
      })
    ]
    // The current period's fee (600) and a usage invoice since it started (100); not the earlier period's, not void.
    expect(String(Number(takenThisPeriod(b, invoices).value))).toBe("700")
    const terms = usageDiscountTerms([{ planId: "p_pro", plan: "pro" }], [b], plans, invoices)
    expect(terms.map((t) => Number(t.amountOff?.value))).toEqual([300])
    const all = [...invoices, invoice("s1", 2_000, "flat", { lines: took("300") })]
    expect(usageDiscountTerms([{ planId: "p_pro", plan: "pro" }], [b], plans, all)).toEqual([])
  })
})
