/**
 * An invoice's lines priced for its buyer (decisions.md §15, §16): each line's discounts, then its taxes on what is
 * left, then the invoice's sums. Pure; the rules themselves are src/domain/taxes.ts.
 */
import type { Address, TaxExempt } from "../api/billingProfile.ts"
import { type Decimal, format, toDecimal } from "../domain/money.ts"
import { invoiceTotals, lineTaxes, netOf, ratesFor, type TaxRateTerms, taxNote } from "../domain/taxes.ts"
import type { StoredLine } from "./lines.ts"

export interface Buyer {
  readonly address: Address | null
  readonly taxExempt: TaxExempt
}

export interface PricedInvoice {
  readonly lines: ReadonlyArray<StoredLine>
  readonly subtotal: Decimal
  readonly discount: Decimal
  readonly tax: Decimal
  readonly total: Decimal
  readonly taxNote: string | null
}

/** Lines (with any discounts already on them) taxed by the rates of the buyer's jurisdiction, and their sums. */
export const priceInvoice = (
  lines: ReadonlyArray<StoredLine>,
  rates: ReadonlyArray<TaxRateTerms>,
  buyer: Buyer
): PricedInvoice => {
  const applicable = ratesFor(rates, buyer.address)
  const priced = lines.map((line) => {
    const discounts = (line.discounts ?? []).map((d) => ({ coupon: d.coupon, amount: toDecimal(d.amount) }))
    const taxes = lineTaxes(netOf(toDecimal(line.amount), discounts), applicable, buyer.taxExempt)
    return { line, discounts, taxes }
  })
  const totals = invoiceTotals(priced.map((p) => ({ amount: toDecimal(p.line.amount), ...p })))
  return {
    lines: priced.map(({ line, discounts, taxes }) => ({
      ...line,
      discounts: discounts.map((d) => ({ coupon: d.coupon, amount: format(d.amount) })),
      taxes: taxes.map((t) => ({
        rate: t.rate,
        name: t.name,
        percentage: format(t.percentage),
        inclusive: t.inclusive,
        amount: format(t.amount)
      }))
    })),
    subtotal: totals.subtotal,
    discount: totals.discount,
    tax: totals.tax,
    total: totals.total,
    taxNote: taxNote(buyer.taxExempt, applicable) ?? null
  }
}
