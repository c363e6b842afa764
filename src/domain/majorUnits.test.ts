import { describe, expect, test } from "bun:test"
import { formatMajor, formatMinor, plainDecimal } from "./majorUnits.ts"

describe("major units", () => {
  test("major units by the currency's exponent, exactly", () => {
    expect(formatMinor(500000, "NGN")).toBe("5,000.00 NGN")
    expect(formatMinor(199, "usd")).toBe("1.99 USD")
    expect(formatMinor(0.25, "NGN")).toBe("0.0025 NGN")
    expect(formatMinor("123456.5", "USD")).toBe("1,234.565 USD")
    expect(formatMinor(1500, "JPY")).toBe("1,500 JPY")
    expect(formatMinor(0.5, "JPY")).toBe("0.5 JPY")
    expect(formatMinor(1234, "KWD")).toBe("1.234 KWD")
    expect(formatMinor(5, "KWD")).toBe("0.005 KWD")
    expect(formatMinor(0, "NGN")).toBe("0.00 NGN")
    expect(formatMinor(-250, "USD")).toBe("-2.50 USD")
    expect(formatMinor(1_000_000_000_000, "NGN")).toBe("10,000,000,000.00 NGN")
  })
  test("the amount alone, as the hosted checkout shows it after the code", () => {
    expect(formatMajor(1000, "JPY")).toBe("1,000")
    expect(formatMajor(1000, "KWD")).toBe("1.000")
    expect(formatMajor("500000", "ngn")).toBe("5,000.00")
    expect(formatMajor("12345678901234567890", "USD")).toBe("123,456,789,012,345,678.90")
  })
  test("numbers in exponent form are read as plain decimals", () => {
    expect(plainDecimal(1e-7)).toBe("0.0000001")
    expect(plainDecimal(1e21)).toBe("1000000000000000000000")
    expect(formatMinor(1e-6, "USD")).toBe("0.00000001 USD")
  })
})
