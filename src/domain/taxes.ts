/**
 * Taxes and invoice totals (decisions.md §16): pure, exact, in whole minor units. A line is taxed on its amount after
 * its discounts; each rate's tax on a line is rounded half-up once; an inclusive rate's tax is carved out of that
 * amount, an exclusive one added to it. `total = subtotal − discount + exclusive tax`.
 */
import { BigDecimal } from "effect"
import { type Decimal, roundHalfUp, sumAll, toDecimal, ZERO } from "./money.ts"

export type TaxStatus = "none" | "exempt" | "reverse_charge"

/** A catalog tax rate as the rules need it: `percentage` 0–100 with up to 4 decimals. */
export interface TaxRateTerms {
  readonly slug: string
  readonly name: string
  readonly percentage: Decimal
  readonly inclusive: boolean
  readonly country: string
  readonly state: string | null
}

export interface TaxLocation {
  readonly country: string
  readonly state?: string | undefined
}

export interface LineTax {
  readonly rate: string
  readonly name: string
  readonly percentage: Decimal
  readonly inclusive: boolean
  readonly amount: Decimal
}

const HUNDRED = BigDecimal.make(100n, 0)

/** Exact division rounded half-up (away from zero) to a whole minor unit, on scaled bigints. */
const divideToWhole = (numerator: Decimal, denominator: Decimal): Decimal => {
  const scale = Math.max(numerator.scale, denominator.scale)
  const x = BigDecimal.scale(numerator, scale).value
  const y = BigDecimal.scale(denominator, scale).value
  if (y === 0n) throw new RangeError("divideToWhole: division by zero")
  const negative = x < 0n !== y < 0n
  const ax = x < 0n ? -x : x
  const ay = y < 0n ? -y : y
  const q = ax / ay + ((ax % ay) * 2n >= ay ? 1n : 0n)
  return BigDecimal.make(negative ? -q : q, 0)
}

/**
 * The rates of the customer's jurisdiction: its country's rates without a state, and those of its state
 * (case-insensitive). No address: none.
 */
export const ratesFor = (
  rates: ReadonlyArray<TaxRateTerms>,
  location: TaxLocation | null
): ReadonlyArray<TaxRateTerms> => {
  if (location === null) return []
  const state = location.state?.trim().toLowerCase()
  return rates.filter(
    (r) => r.country === location.country.toUpperCase() && (r.state === null || r.state.trim().toLowerCase() === state)
  )
}

/**
 * One line's taxes on `net` (its amount after discounts), one per rate, each rounded half-up once. Exclusive:
 * net × p / 100. Inclusive: carved out of net, net × p / (100 + P) where P is the sum of the inclusive rates (with one
 * inclusive rate, p / (100 + p)), so several inclusive rates together never carve out more than the amount holds.
 * An exempt or reverse-charge customer: every rate at zero.
 */
export const lineTaxes = (
  net: Decimal,
  rates: ReadonlyArray<TaxRateTerms>,
  status: TaxStatus
): ReadonlyArray<LineTax> => {
  const inclusiveSum = sumAll(rates.filter((r) => r.inclusive).map((r) => r.percentage))
  return rates.map((r) => ({
    rate: r.slug,
    name: r.name,
    percentage: r.percentage,
    inclusive: r.inclusive,
    amount:
      status !== "none"
        ? ZERO
        : r.inclusive
          ? divideToWhole(BigDecimal.multiply(net, r.percentage), BigDecimal.sum(HUNDRED, inclusiveSum))
          : divideToWhole(BigDecimal.multiply(net, r.percentage), HUNDRED)
  }))
}

/** Why an invoice carries no tax for this customer; absent for a taxed one. */
export const taxNote = (status: TaxStatus, rates: ReadonlyArray<Pick<TaxRateTerms, "name">>): string | undefined => {
  const names = [...new Set(rates.map((r) => r.name))].join(", ") || "tax"
  if (status === "reverse_charge") return `Reverse charge: ${names} to be accounted for by the recipient`
  if (status === "exempt") return `Tax exempt: no ${names} charged`
  return undefined
}

export interface LineAmounts {
  readonly amount: Decimal
  readonly discounts: ReadonlyArray<{ readonly amount: Decimal }>
  readonly taxes: ReadonlyArray<Pick<LineTax, "inclusive" | "amount">>
}

export interface InvoiceTotals {
  readonly subtotal: Decimal
  readonly discount: Decimal
  /** Every line's taxes, inclusive and exclusive. */
  readonly tax: Decimal
  readonly exclusiveTax: Decimal
  /** subtotal − discount + exclusive tax. */
  readonly total: Decimal
}

/** The invoice's sums over its lines (every line amount already whole minor units). */
export const invoiceTotals = (lines: ReadonlyArray<LineAmounts>): InvoiceTotals => {
  const subtotal = sumAll(lines.map((l) => l.amount))
  const discount = sumAll(lines.flatMap((l) => l.discounts.map((d) => d.amount)))
  const taxes = lines.flatMap((l) => l.taxes)
  const tax = sumAll(taxes.map((t) => t.amount))
  const exclusiveTax = sumAll(taxes.filter((t) => !t.inclusive).map((t) => t.amount))
  const total = BigDecimal.sum(BigDecimal.subtract(subtotal, discount), exclusiveTax)
  return { subtotal: roundHalfUp(subtotal), discount, tax, exclusiveTax, total }
}

/** A line's amount after its discounts: what its taxes are computed on. */
export const netOf = (amount: Decimal, discounts: ReadonlyArray<{ readonly amount: Decimal }>): Decimal =>
  BigDecimal.subtract(amount, sumAll(discounts.map((d) => toDecimal(d.amount))))
