import { describe, expect, test } from "bun:test"
import { BigDecimal, Either, Option } from "effect"
import {
  assertMoneyFitsJson,
  ceilDiv,
  JSON_MONEY_MAX,
  moneyFitsJson,
  format,
  max,
  min,
  parseDecimal,
  roundHalfUp,
  sumAll,
  toDecimal,
  toNumber,
  unsafeDecimal
} from "./money.ts"

const d = unsafeDecimal
const parsed = (input: string | number) => Option.map(parseDecimal(input), format)

describe("parseDecimal", () => {
  test("strings parse exactly", () => {
    expect(parsed("0.25")).toEqual(Option.some("0.25"))
    expect(parsed("-12.500")).toEqual(Option.some("-12.5"))
    expect(parsed("+7")).toEqual(Option.some("7"))
    expect(parsed("1.5e3")).toEqual(Option.some("1500"))
    expect(parsed("25E-2")).toEqual(Option.some("0.25"))
    expect(parsed("123456789012345678901234567890.000000000000000000001")).toEqual(
      Option.some("123456789012345678901234567890.000000000000000000001")
    )
  })

  test("numbers go through their shortest representation, not their binary value", () => {
    expect(parsed(0.1)).toEqual(Option.some("0.1"))
    expect(parsed(0.1 + 0.2)).toEqual(Option.some("0.30000000000000004"))
    expect(parsed(1e21)).toEqual(Option.some("1000000000000000000000"))
    expect(parsed(5e-7)).toEqual(Option.some("0.0000005"))
    expect(parsed(-0)).toEqual(Option.some("0"))
  })

  test("rejects what is not a finite decimal", () => {
    for (const bad of [NaN, Infinity, -Infinity]) expect(Option.isNone(parseDecimal(bad))).toBe(true)
    for (const bad of [
      "",
      " 1",
      "1 ",
      "1.",
      ".5",
      "1,5",
      "0x10",
      "abc",
      "1e",
      "e5",
      "1e5.5",
      "Infinity",
      "NaN",
      "--1"
    ]) {
      expect(Option.isNone(parseDecimal(bad))).toBe(true)
    }
  })

  test("rejects absurd exponents instead of allocating huge bigints", () => {
    expect(Option.isNone(parseDecimal("1e999999999"))).toBe(true)
    expect(Option.isNone(parseDecimal("1e-65"))).toBe(true)
    expect(parsed("1e64")).toEqual(Option.some("1" + "0".repeat(64)))
  })

  test("unsafeDecimal throws on bad input; toDecimal passes BigDecimals through", () => {
    expect(() => d("nope")).toThrow(RangeError)
    const x = BigDecimal.make(125n, 2)
    expect(toDecimal(x)).toBe(x)
    expect(format(toDecimal("1.25"))).toBe("1.25")
    expect(format(toDecimal(1.25))).toBe("1.25")
  })
})

describe("roundHalfUp", () => {
  const r = (s: string) => format(roundHalfUp(d(s)))
  test("ties go away from zero, everything else to nearest", () => {
    expect(r("0.75")).toBe("1")
    expect(r("0.5")).toBe("1")
    expect(r("0.49999")).toBe("0")
    expect(r("2.5")).toBe("3") // half-even would give 2
    expect(r("1.5")).toBe("2")
    expect(r("-1.5")).toBe("-2")
    expect(r("-1.49")).toBe("-1")
    expect(r("12")).toBe("12")
    expect(r("0")).toBe("0")
    expect(r("1e3")).toBe("1000")
  })
})

describe("format", () => {
  test("plain decimal strings, never an exponent", () => {
    expect(format(BigDecimal.make(1n, 20))).toBe("0.00000000000000000001")
    expect(format(BigDecimal.make(-5n, 18))).toBe("-0.000000000000000005")
    expect(format(BigDecimal.make(12n, -17))).toBe("1200000000000000000")
    expect(format(BigDecimal.make(12345n, 2))).toBe("123.45")
    expect(format(BigDecimal.make(-150n, 2))).toBe("-1.5")
    expect(format(BigDecimal.make(0n, 5))).toBe("0")
    expect(format(BigDecimal.make(7n, 1))).toBe("0.7")
  })
})

describe("toNumber and arithmetic helpers", () => {
  test("toNumber", () => {
    expect(toNumber(d("0.25"))).toBe(0.25)
    expect(toNumber(d("-1500"))).toBe(-1500)
    expect(toNumber(d("9007199254740991"))).toBe(9007199254740991)
  })

  test("toNumber is the double its decimal text parses to, at every scale, sign and size", () => {
    const digits = () => BigInt(Math.floor(Math.random() * 2 ** 53)) >> BigInt(Math.floor(Math.random() * 53))
    for (let i = 0; i < 20000; i++) {
      const value = i % 2 === 0 ? digits() : -digits()
      const decimal = BigDecimal.make(value, (i % 30) - 4)
      expect(toNumber(decimal)).toBe(Number(format(decimal)))
    }
    // Past 2^53 digits, and ties of the last bit, still as the text parses.
    for (const text of ["9007199254740993", "0.30000000000000004", "123456789.123456789", "1e-22", "1e-30"]) {
      expect(toNumber(d(text))).toBe(Number(text))
    }
  })

  test("sumAll of 0.1 ten times is exactly 1", () => {
    const total = sumAll(Array.from({ length: 10 }, () => d("0.1")))
    expect(format(total)).toBe("1")
    expect(format(sumAll([]))).toBe("0")
  })

  test("min and max", () => {
    expect(format(min(d("0.3"), d("0.25")))).toBe("0.25")
    expect(format(max(d("0.3"), d("0.25")))).toBe("0.3")
  })

  test("ceilDiv counts packages exactly", () => {
    expect(format(ceilDiv(d("150"), d("100")))).toBe("2")
    expect(format(ceilDiv(d("200"), d("100")))).toBe("2")
    expect(format(ceilDiv(d("200.0000000000000000000000000001"), d("100")))).toBe("3")
    expect(format(ceilDiv(d("0"), d("100")))).toBe("0")
    expect(format(ceilDiv(d("1.5"), d("0.5")))).toBe("3")
    expect(format(ceilDiv(d("1.6"), d("0.5")))).toBe("4")
    expect(format(ceilDiv(d("3e3"), d("7")))).toBe("429")
    expect(() => ceilDiv(d("1"), d("0"))).toThrow(RangeError)
  })
})

describe("assertMoneyFitsJson", () => {
  test("up to Number.MAX_SAFE_INTEGER minor units, either sign; one more is refused", () => {
    expect(JSON_MONEY_MAX).toBe(BigInt(Number.MAX_SAFE_INTEGER))
    expect(moneyFitsJson(d("9007199254740991"))).toBe(true)
    expect(moneyFitsJson(d("-9007199254740991"))).toBe(true)
    expect(moneyFitsJson(d("9007199254740991.4"))).toBe(false)
    expect(moneyFitsJson(d("9007199254740992"))).toBe(false)
    expect(moneyFitsJson(d("-9007199254740992"))).toBe(false)
    expect(Either.getOrThrow(assertMoneyFitsJson(d("0"), "zero"))).toEqual(d("0"))
  })

  test("the refusal names what, the exact amount, the currency and the bound", () => {
    const refused = assertMoneyFitsJson(d("8657216995426363459413"), "The line 'tokens'", "NGN")
    expect(Either.isLeft(refused)).toBe(true)
    const message = Either.isLeft(refused) ? refused.left.message : ""
    expect(message).toContain("The line 'tokens'")
    expect(message).toContain("8657216995426363459413 minor units of NGN")
    expect(message).toContain("9007199254740991")
    expect(Either.isLeft(refused) && refused.left._tag).toBe("AmountTooLarge")
  })
})
