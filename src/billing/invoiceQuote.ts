import { Either, Schema } from "effect"
import { format, max, ZERO } from "../domain/money.ts"
import { StoredLineJson } from "./InvoicesRepo.ts"
import type { StoredLine } from "./lines.ts"
import type { PricedInvoice } from "./taxes.ts"

/**
 * A priced invoice as a payment carries it until it settles (docs/decisions.md "The first payment is an invoice
 * (h18)"): the lines with their discounts and taxes and the sums, money as exact decimal strings of minor units. The
 * invoice written from it has these numbers and no others: they are what was charged.
 */
export interface InvoiceQuote {
  readonly lines: ReadonlyArray<StoredLine>
  readonly subtotal: string
  readonly discount: string
  readonly tax: string
  readonly taxNote: string | null
  readonly total: string
  /**
   * Of `total`, what the customer's credit balance was to pay (decisions.md §14): spent when the invoice is written;
   * the payment charged the rest.
   */
  readonly creditApplied: string
  /** The customer's own discount took something off it: settling it uses one of that discount's invoices (§15). */
  readonly customerDiscountUsed: boolean
}

const InvoiceQuoteSchema = Schema.Struct({
  lines: Schema.Array(StoredLineJson),
  subtotal: Schema.String,
  discount: Schema.String,
  tax: Schema.String,
  taxNote: Schema.NullOr(Schema.String),
  total: Schema.String,
  creditApplied: Schema.optionalWith(Schema.String, { default: () => "0" }),
  customerDiscountUsed: Schema.optionalWith(Schema.Boolean, { default: () => false })
})

/**
 * The quote of a priced invoice; its total never below zero, as an invoice's (Invoices.insertInvoice), with the part of
 * it the credit balance is to pay.
 */
export const invoiceQuoteOf = (
  priced: PricedInvoice & { readonly customerTook?: boolean },
  creditApplied: bigint
): InvoiceQuote => ({
  lines: priced.lines,
  subtotal: format(priced.subtotal),
  discount: format(priced.discount),
  tax: format(priced.tax),
  taxNote: priced.taxNote,
  total: format(max(priced.total, ZERO)),
  creditApplied: creditApplied.toString(),
  customerDiscountUsed: priced.customerTook === true
})

/** A stored quote back; null when there is none or it is not one (an attempt from before quotes were kept). */
export const decodeInvoiceQuote = (stored: unknown): InvoiceQuote | null =>
  stored === null || stored === undefined
    ? null
    : Either.getOrNull(Schema.decodeUnknownEither(InvoiceQuoteSchema)(stored))

/** The quote as a JSON object a payment can keep. */
export const encodeInvoiceQuote = (quote: InvoiceQuote): Record<string, unknown> =>
  JSON.parse(JSON.stringify(quote)) as Record<string, unknown>
