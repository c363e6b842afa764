import { describe, expect, test } from "bun:test"
import { format, unsafeDecimal as d } from "./money.ts"
import { invoiceTotals, lineTaxes, netOf, ratesFor, type TaxRateTerms, taxNote } from "./taxes.ts"

const rate = (slug: string, percentage: string, inclusive = false, country = "DE", state: string | null = null) =>
  ({ slug, name: slug.toUpperCase(), percentage: d(percentage), inclusive, country, state }) satisfies TaxRateTerms

const amounts = (taxes: ReadonlyArray<{ amount: ReturnType<typeof d> }>) => taxes.map((t) => format(t.amount))

describe("ratesFor", () => {
  const rates = [
    rate("vat-de", "19"),
    rate("vat-ng", "7.5", false, "NG"),
    rate("ny", "4", false, "US", "NY"),
    rate("ca", "7.25", false, "US", "CA")
  ]
  test("by country, and by state where the rate names one (case-insensitively)", () => {
    expect(ratesFor(rates, { country: "DE" }).map((r) => r.slug)).toEqual(["vat-de"])
    expect(ratesFor(rates, { country: "de", state: "Berlin" }).map((r) => r.slug)).toEqual(["vat-de"])
    expect(ratesFor(rates, { country: "US", state: " ny " }).map((r) => r.slug)).toEqual(["ny"])
    expect(ratesFor(rates, { country: "US" })).toEqual([])
    expect(ratesFor(rates, { country: "FR" })).toEqual([])
    expect(ratesFor(rates, null)).toEqual([])
  })
})

describe("lineTaxes", () => {
  test("exclusive: net × p / 100, half-up once per line", () => {
    // 1234 × 7.5% = 92.55 → 93; 1230 × 7.5% = 92.25 → 92; 1 × 19% = 0.19 → 0; 3 × 16.6667% = 0.500001 → 1
    expect(amounts(lineTaxes(d("1234"), [rate("v", "7.5")], "none"))).toEqual(["93"])
    expect(amounts(lineTaxes(d("1230"), [rate("v", "7.5")], "none"))).toEqual(["92"])
    expect(amounts(lineTaxes(d("1"), [rate("v", "19")], "none"))).toEqual(["0"])
    expect(amounts(lineTaxes(d("3"), [rate("v", "16.6667")], "none"))).toEqual(["1"])
    expect(amounts(lineTaxes(d("10"), [rate("v", "5")], "none"))).toEqual(["1"]) // 0.5 → 1 (half-up)
  })

  test("inclusive: carved out of the amount, net × p / (100 + p)", () => {
    // 11900 gross at 19%: 1900 of it is tax.
    expect(amounts(lineTaxes(d("11900"), [rate("v", "19", true)], "none"))).toEqual(["1900"])
    // 1000 at 7.5% inclusive: 75 × 1000 / 107.5 = 69.767… → 70
    expect(amounts(lineTaxes(d("1000"), [rate("v", "7.5", true)], "none"))).toEqual(["70"])
    // Two inclusive rates share one denominator: 1200 at 10% + 10% → 100 each (not 109 each).
    expect(amounts(lineTaxes(d("1200"), [rate("a", "10", true), rate("b", "10", true)], "none"))).toEqual([
      "100",
      "100"
    ])
  })

  test("exempt and reverse charge: every matching rate at zero, with the note saying why", () => {
    const rates = [rate("vat", "19")]
    expect(amounts(lineTaxes(d("5000"), rates, "exempt"))).toEqual(["0"])
    expect(amounts(lineTaxes(d("5000"), rates, "reverse_charge"))).toEqual(["0"])
    expect(taxNote("reverse_charge", rates)).toBe("Reverse charge: VAT to be accounted for by the recipient")
    expect(taxNote("exempt", rates)).toBe("Tax exempt: no VAT charged")
    expect(taxNote("none", rates)).toBeUndefined()
  })

  test("a negative line (a credit) is taxed negatively, rounded away from zero like its charge", () => {
    expect(amounts(lineTaxes(d("-1234"), [rate("v", "7.5")], "none"))).toEqual(["-93"])
  })
})

describe("invoiceTotals", () => {
  test("total = subtotal − discount + exclusive tax; tax counts inclusive and exclusive", () => {
    const vat = rate("vat", "19")
    const incl = rate("incl", "7.5", true)
    const line1 = { amount: d("10000"), discounts: [{ amount: d("1000") }] }
    const line2 = { amount: d("2150"), discounts: [] }
    const lines = [
      { ...line1, taxes: lineTaxes(netOf(line1.amount, line1.discounts), [vat], "none") }, // 9000 × 19% = 1710
      { ...line2, taxes: lineTaxes(netOf(line2.amount, line2.discounts), [incl], "none") } // 2150 × 7.5/107.5 = 150
    ]
    const totals = invoiceTotals(lines)
    expect({
      subtotal: format(totals.subtotal),
      discount: format(totals.discount),
      tax: format(totals.tax),
      exclusiveTax: format(totals.exclusiveTax),
      total: format(totals.total)
    }).toEqual({ subtotal: "12150", discount: "1000", tax: "1860", exclusiveTax: "1710", total: "12860" })
  })

  test("exact past 2^53 minor units", () => {
    const big = d("90071992547409930") // > 2^53 × 10
    const taxes = lineTaxes(big, [rate("vat", "19")], "none")
    expect(amounts(taxes)).toEqual(["17113678584007887"]) // 90071992547409930 × 0.19 = 17113678584007886.7
    expect(format(invoiceTotals([{ amount: big, discounts: [], taxes }]).total)).toBe("107185671131417817")
  })
})
