/**
 * An invoice's lines priced for its buyer (decisions.md §15, §16): each line's discounts, then its taxes on what is
 * left, then the invoice's sums. Pure; the rules themselves are src/domain/taxes.ts.
 */
import { BigDecimal } from "effect"
import type { Address, TaxExempt } from "../api/billingProfile.ts"
import { type CouponTerms, couponFitsCurrency, lineDiscounts } from "../domain/discounts.ts"
import { type Decimal, format, toDecimal } from "../domain/money.ts"
import { invoiceTotals, lineTaxes, netOf, ratesFor, type TaxRateTerms, taxNote } from "../domain/taxes.ts"
import { type LineInput, type StoredLine, storedLine } from "./lines.ts"

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

/**
 * The lines with each coupon's discounts on those it covers, coupon after coupon, each on what the earlier ones left
 * (a subscription's discount, then the customer's); `took[i]`: whether coupon i took anything (an invoice that got
 * nothing from a coupon does not use one of its invoices). A coupon in another currency than an amount off's is
 * skipped.
 */
export const discountLines = (
  lines: ReadonlyArray<LineInput>,
  coupons: ReadonlyArray<CouponTerms>,
  currency: string
): { readonly lines: ReadonlyArray<StoredLine>; readonly took: ReadonlyArray<boolean> } => {
  let stored = lines.map(storedLine)
  const took = coupons.map((terms) => {
    if (!couponFitsCurrency(terms, currency)) return false
    const owed = stored.map((l, i) => ({
      amount: netOf(
        toDecimal(l.amount),
        (l.discounts ?? []).map((d) => ({ amount: toDecimal(d.amount) }))
      ),
      plan: lines[i]!.plan ?? null
    }))
    const amounts = lineDiscounts(terms, owed)
    if (amounts.every((a) => BigDecimal.isZero(a))) return false
    stored = stored.map((line, i) =>
      BigDecimal.isZero(amounts[i]!)
        ? line
        : { ...line, discounts: [...(line.discounts ?? []), { coupon: terms.slug, amount: format(amounts[i]!) }] }
    )
    return true
  })
  return { lines: stored, took }
}

/** Discounts, then taxes, then sums: how every invoice (and a preview of one, and a first charge) is priced. */
export const priceLines = (
  lines: ReadonlyArray<LineInput>,
  coupons: ReadonlyArray<CouponTerms>,
  currency: string,
  rates: ReadonlyArray<TaxRateTerms>,
  buyer: Buyer
): PricedInvoice & { readonly took: ReadonlyArray<boolean> } => {
  const discounted = discountLines(lines, coupons, currency)
  return { ...priceInvoice(discounted.lines, rates, buyer), took: discounted.took }
}
