import { describe, expect, test } from "bun:test"
import fc from "fast-check"
import { unsafeDecimal } from "./money.ts"
import { addInterval, BILLING_INTERVALS } from "./periods.ts"
import {
  compareMonthly,
  creditToApply,
  defaultWhen,
  monthlyEquivalent,
  prorate,
  proratedAmount,
  secondsBetween,
  settle
} from "./planChange.ts"

const d = unsafeDecimal
const DAY = 86_400_000

describe("monthly equivalents (decisions.md §13)", () => {
  test("daily × 30, weekly × 52/12, monthly, quarterly / 3, yearly / 12, exactly", () => {
    const eq = (price: number, interval: Parameters<typeof monthlyEquivalent>[1]) => {
      const m = monthlyEquivalent(d(price), interval)
      return Number(m.numerator) / Number(m.denominator)
    }
    expect(eq(100, "daily")).toBe(3000)
    expect(eq(1200, "weekly")).toBe(5200)
    expect(eq(5000, "monthly")).toBe(5000)
    expect(eq(15000, "quarterly")).toBe(5000)
    expect(eq(60000, "yearly")).toBe(5000)
    expect(eq(0.5, "monthly")).toBe(0.5)
  })

  test("comparisons are exact where floats are not (weekly 12 = monthly 52)", () => {
    expect(compareMonthly({ price: d(12), interval: "weekly" }, { price: d(52), interval: "monthly" })).toBe(0)
    expect(compareMonthly({ price: d(60001), interval: "yearly" }, { price: d(5000), interval: "monthly" })).toBe(1)
    expect(compareMonthly({ price: d(4999), interval: "monthly" }, { price: d(15000), interval: "quarterly" })).toBe(-1)
  })
})

describe("defaultWhen (decisions.md §14)", () => {
  const side = (price: number, interval: "monthly" | "yearly" = "monthly") => ({ price: d(price), interval })
  const base = { trialing: false, periodEnds: true }
  test("higher or equal: now; lower: period_end; to free: period_end", () => {
    expect(defaultWhen({ ...base, from: side(1000), to: side(2000) })).toBe("now")
    expect(defaultWhen({ ...base, from: side(1000), to: side(1000) })).toBe("now")
    expect(defaultWhen({ ...base, from: side(2000), to: side(1000) })).toBe("period_end")
    expect(defaultWhen({ ...base, from: side(2000), to: side(0) })).toBe("period_end")
  })
  test("from a trial, an interval change, or a period without end: now", () => {
    expect(defaultWhen({ ...base, trialing: true, from: side(2000), to: side(1000) })).toBe("now")
    expect(defaultWhen({ ...base, from: side(5000), to: side(12000, "yearly") })).toBe("now")
    expect(defaultWhen({ ...base, periodEnds: false, from: side(2000), to: side(1000) })).toBe("now")
    expect(defaultWhen({ ...base, from: side(0), to: side(0) })).toBe("now")
  })
})

describe("proration by the second", () => {
  test("day 10 of a 30-day period: the worked example of the README", () => {
    const start = Date.UTC(2026, 3, 1)
    const end = Date.UTC(2026, 4, 1) // April: 30 days
    const p = prorate({
      oldPrice: d(5000),
      newPrice: d(20000),
      periodStart: start,
      periodEnd: end,
      at: start + 10 * DAY
    })
    expect(p.periodSeconds).toBe(2_592_000n)
    expect(p.remainingSeconds).toBe(1_728_000n)
    expect(p.credit).toBe(3333n) // 5000 × 20/30 = 3333.33…
    expect(p.charge).toBe(13333n) // 20000 × 20/30 = 13333.33…
    expect(settle(p.credit, p.charge)).toEqual({ subtotal: 10000n, total: 10000n, surplus: 0n })
    // Pro down to Small (2,000) at the same instant: a surplus of 12,000 for the credit balance.
    const down = prorate({
      oldPrice: d(20000),
      newPrice: d(2000),
      periodStart: start,
      periodEnd: end,
      at: start + 10 * DAY
    })
    expect([down.credit, down.charge]).toEqual([13333n, 1333n])
    expect(settle(down.credit, down.charge)).toEqual({ subtotal: -12000n, total: 0n, surplus: 12000n })
    expect(creditToApply(12000n, 2000n)).toBe(2000n)
  })

  test("each amount is rounded once, half-up (0.5 goes up), with no float anywhere", () => {
    expect(proratedAmount(d(1), 1n, 2n)).toBe(1n)
    expect(proratedAmount(d(3), 1n, 2n)).toBe(2n)
    expect(proratedAmount(d(1), 1n, 3n)).toBe(0n)
    expect(proratedAmount(d(2), 1n, 3n)).toBe(1n)
    expect(proratedAmount(d("0.25"), 2n, 1n)).toBe(1n)
    // Past 2^53: exact.
    expect(proratedAmount(d("1000000000000"), 2_592_000n - 1n, 2_592_000n)).toBe(999_999_614_198n)
    // JPY and KWD: prices are minor units already (yen, fils): the rounding is to a whole one of them.
    expect(proratedAmount(d(1000), 1n, 3n)).toBe(333n)
  })

  test("seconds are whole seconds of the clock: instants inside one second prorate alike", () => {
    expect(secondsBetween(1_000, 2_999)).toBe(1n)
    expect(secondsBetween(1_999, 2_000)).toBe(1n)
    expect(secondsBetween(5_000, 1_000)).toBe(0n)
  })

  test("a change at the period's start credits and charges the whole prices; at its end nothing", () => {
    const start = Date.UTC(2026, 0, 31, 12)
    const end = addInterval(start, "monthly", 1)
    expect(
      prorate({ oldPrice: d(999), newPrice: d(1999), periodStart: start, periodEnd: end, at: start })
    ).toMatchObject({ credit: 999n, charge: 1999n })
    expect(prorate({ oldPrice: d(999), newPrice: d(1999), periodStart: start, periodEnd: end, at: end })).toMatchObject(
      {
        credit: 0n,
        charge: 0n
      }
    )
  })

  const arbitraryChange = fc
    .record({
      oldPrice: fc.bigInt({ min: 0n, max: 1_000_000_000_000n }),
      newPrice: fc.bigInt({ min: 0n, max: 1_000_000_000_000n }),
      start: fc.integer({ min: Date.UTC(2000, 0, 1), max: Date.UTC(2100, 0, 1) }),
      interval: fc.constantFrom(...BILLING_INTERVALS),
      fraction: fc.double({ min: 0, max: 1, noNaN: true })
    })
    .map(({ fraction, interval, newPrice, oldPrice, start }) => {
      const end = addInterval(start, interval, 1)
      return {
        oldPrice: d(oldPrice.toString()),
        newPrice: d(newPrice.toString()),
        periodStart: start,
        periodEnd: end,
        at: start + Math.floor((end - start) * fraction)
      }
    })

  test("property: credit + remaining charge never exceed a full period's prices", () => {
    fc.assert(
      fc.property(arbitraryChange, (change) => {
        const p = prorate(change)
        const full = BigInt(change.oldPrice.value) + BigInt(change.newPrice.value)
        expect(p.credit + p.charge).toBeLessThanOrEqual(full)
        expect(p.credit).toBeGreaterThanOrEqual(0n)
        expect(p.charge).toBeGreaterThanOrEqual(0n)
      }),
      { numRuns: 500 }
    )
  })

  test("property: A → B → A in the same second nets to zero", () => {
    fc.assert(
      fc.property(arbitraryChange, fc.integer({ min: 0, max: 999 }), (change, ms) => {
        const there = prorate(change)
        const back = prorate({
          ...change,
          oldPrice: change.newPrice,
          newPrice: change.oldPrice,
          at: Math.min(change.periodEnd, Math.floor(change.at / 1000) * 1000 + ms)
        })
        const net = settle(there.credit, there.charge).subtotal + settle(back.credit, back.charge).subtotal
        expect(net).toBe(0n)
      }),
      { numRuns: 500 }
    )
  })
})

describe("settling a change and applying a balance", () => {
  test("a larger credit makes a total of zero and a surplus", () => {
    expect(settle(3000n, 1000n)).toEqual({ subtotal: -2000n, total: 0n, surplus: 2000n })
    expect(settle(1000n, 3000n)).toEqual({ subtotal: 2000n, total: 2000n, surplus: 0n })
  })
  test("a balance pays at most what is due and at most itself", () => {
    expect(creditToApply(500n, 2000n)).toBe(500n)
    expect(creditToApply(5000n, 2000n)).toBe(2000n)
    expect(creditToApply(0n, 2000n)).toBe(0n)
    expect(creditToApply(100n, 0n)).toBe(0n)
  })
})
