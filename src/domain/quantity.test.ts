import { describe, expect, test } from "bun:test"
import { BigDecimal } from "effect"
import { fitsMicro, fromMicro, microToNumber, toMicro } from "./quantity.ts"
import { format } from "./money.ts"

describe("micro-unit quantities", () => {
  test("exact round trips for decimals binary floats cannot hold", () => {
    expect(toMicro(0.1)).toBe(100_000n)
    expect(toMicro(0.1) + toMicro(0.2)).toBe(toMicro(0.3))
    expect(format(fromMicro(toMicro(1234.567891)))).toBe("1234.567891")
    expect(microToNumber(2_500_000)).toBe(2.5)
  })

  test("finer fractions round up, so consumption is never under-counted", () => {
    expect(toMicro("0.0000001")).toBe(1n)
    expect(toMicro("0.1666665")).toBe(166_667n)
    expect(toMicro("2")).toBe(2_000_000n)
  })

  test("decimals of any scale and sign, against their digits: exact to six places, finer rounded up", () => {
    // The reference reads the decimal's text: whole part and the first six fraction digits, one more if any digit
    // past the sixth is not zero (up: towards +∞).
    const reference = (d: BigDecimal.BigDecimal) => {
      const text = format(d)
      const negative = text.startsWith("-")
      const [whole, fraction = ""] = (negative ? text.slice(1) : text).split(".")
      const micro = BigInt(whole! + fraction.slice(0, 6).padEnd(6, "0"))
      const finer = /[1-9]/.test(fraction.slice(6))
      return negative ? -micro : finer ? micro + 1n : micro
    }
    for (let i = 0; i < 2000; i++) {
      const digits = BigInt(Math.floor(Math.random() * 1e15)) * (i % 2 === 0 ? 1n : -1n)
      const scale = (i % 13) - 3
      const d = BigDecimal.make(digits, scale)
      expect(toMicro(d)).toBe(reference(d))
    }
  })

  test("large values beyond 2^53 micro-units stay exact as bigints", () => {
    expect(fromMicro(9_007_199_254_740_993n).value).toBe(9_007_199_254_740_993n)
  })

  test("fitsMicro accepts six decimals and rejects seven", () => {
    expect(fitsMicro(1.123456)).toBe(true)
    expect(fitsMicro(1.1234567)).toBe(false)
    expect(fitsMicro(Number.NaN)).toBe(false)
    expect(fitsMicro(1e12)).toBe(false)
  })
})
