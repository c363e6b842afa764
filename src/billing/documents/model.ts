/**
 * What an invoice or credit note document shows, as text (pure): the PDF and the hosted page draw it. Money is as
 * the dashboard shows it (decisions.md §13): major units by the currency's exponent, exactly, with the code.
 */
import type { Invoice } from "../../api/billing.ts"
import type { CreditNote } from "../../api/documents.ts"
import type { Address, TaxId } from "../../api/billingProfile.ts"
import { formatMinor, plainDecimal } from "../../domain/majorUnits.ts"
import type { ProfileRecord } from "../profile/BillingProfiles.ts"

export interface DocumentParty {
  readonly name: string | null
  readonly lines: ReadonlyArray<string>
}

export interface DocumentLine {
  readonly description: string
  readonly period: string
  readonly quantity: string
  readonly unitPrice: string
  readonly amount: string
  /** Its discounts and taxes, one row each under it. */
  readonly adjustments: ReadonlyArray<{ readonly label: string; readonly amount: string }>
}

export interface BillingDocument {
  readonly title: string
  readonly number: string
  readonly statusLabel: string
  readonly createdAt: number
  readonly seller: DocumentParty
  readonly buyerHeading: string
  readonly buyer: DocumentParty
  readonly facts: ReadonlyArray<readonly [string, string]>
  readonly lines: ReadonlyArray<DocumentLine>
  readonly totals: ReadonlyArray<{ readonly label: string; readonly amount: string; readonly strong: boolean }>
  readonly notes: ReadonlyArray<string>
  readonly footer: string | null
}

/** The buyer as documents name it. */
export interface BuyerDetails {
  readonly name: string | null
  readonly email: string | null
  readonly address: Address | null
  readonly taxIds: ReadonlyArray<TaxId>
}

const regionNames = new Intl.DisplayNames(["en"], { type: "region", fallback: "code" })

export const addressLines = (a: Address | null): Array<string> => {
  if (a === null) return []
  const cityLine = [a.postalCode, a.city].filter((s) => s !== undefined && s !== "").join(" ")
  return [a.line1, a.line2, cityLine, a.state, regionNames.of(a.country) ?? a.country].filter(
    (s): s is string => s !== undefined && s !== ""
  )
}

const day = (iso: string | number) => new Date(iso).toISOString().slice(0, 10)

export const sellerParty = (p: ProfileRecord): DocumentParty => ({
  name: p.legalName,
  lines: [
    ...addressLines(p.address),
    ...(p.email === null ? [] : [p.email]),
    ...(p.taxId === null ? [] : [`Tax ID: ${p.taxId}`])
  ]
})

export const buyerParty = (b: BuyerDetails): DocumentParty => ({
  name: b.name ?? b.email,
  lines: [
    ...(b.name !== null && b.email !== null ? [b.email] : []),
    ...addressLines(b.address),
    ...b.taxIds.map((t) => `${t.type.toUpperCase().replace(/_/g, " ")}: ${t.value}`)
  ]
})

const percent = (p: number) => `${plainDecimal(p)}%`

const STATUS_LABEL: Record<Invoice["status"], string> = {
  draft: "Draft",
  open: "Open: payment due",
  paid: "Paid",
  void: "Void",
  uncollectible: "Uncollectible"
}

/** An invoice as its document shows it. */
export const invoiceDocument = (invoice: Invoice, seller: ProfileRecord, buyer: BuyerDetails): BillingDocument => {
  const money = (minor: number) => formatMinor(minor, invoice.currency)
  const inclusiveTax = invoice.lines
    .flatMap((l) => l.taxes.filter((t) => t.inclusive))
    .reduce((s, t) => s + t.amount, 0)
  const exclusiveTax = invoice.tax - inclusiveTax
  const refunded = invoice.amountRefunded
  return {
    title: "Invoice",
    number: invoice.number,
    statusLabel: STATUS_LABEL[invoice.status],
    createdAt: invoice.createdAt,
    seller: sellerParty(seller),
    buyerHeading: "BILL TO",
    buyer: buyerParty(buyer),
    facts: [
      ["Invoice number", invoice.number],
      ["Date of issue", day(invoice.createdAt)],
      ...(invoice.paidAt === null ? [] : [["Paid on", day(invoice.paidAt)] as const]),
      ["Currency", invoice.currency]
    ],
    lines: invoice.lines.map((line) => ({
      description: line.description,
      period:
        day(line.periodStart) === day(line.periodEnd)
          ? day(line.periodStart)
          : `${day(line.periodStart)} – ${day(line.periodEnd)}`,
      quantity: plainDecimal(line.quantity),
      unitPrice: money(line.unitPrice),
      amount: money(line.amount),
      adjustments: [
        ...line.discounts.map((d) => ({ label: `Discount (${d.coupon})`, amount: money(-d.amount) })),
        ...line.taxes.map((t) => ({
          label: `${t.name} ${percent(t.percentage)}${t.inclusive ? " (included)" : ""}`,
          amount: money(t.amount)
        }))
      ]
    })),
    totals: [
      { label: "Subtotal", amount: money(invoice.subtotal), strong: false },
      ...(invoice.discount === 0 ? [] : [{ label: "Discount", amount: money(-invoice.discount), strong: false }]),
      ...(exclusiveTax === 0 && inclusiveTax !== 0
        ? []
        : [{ label: "Tax", amount: money(exclusiveTax), strong: false }]),
      ...(inclusiveTax === 0 ? [] : [{ label: "Tax included in amounts", amount: money(inclusiveTax), strong: false }]),
      // Both kinds: the invoice's `tax` (their sum, §16) is shown too, so the document has the API's figure.
      ...(exclusiveTax !== 0 && inclusiveTax !== 0
        ? [{ label: "Total tax", amount: money(invoice.tax), strong: false }]
        : []),
      { label: "Total", amount: money(invoice.total), strong: true },
      { label: "Amount paid", amount: money(invoice.amountPaid), strong: false },
      ...(refunded === 0 ? [] : [{ label: "Amount refunded", amount: money(refunded), strong: false }]),
      { label: "Amount due", amount: money(invoice.amountDue), strong: true }
    ],
    notes: invoice.taxNote === undefined ? [] : [invoice.taxNote],
    footer: seller.footer
  }
}

/** A credit note as its document shows it: what was given back on which invoice, and why. */
export const creditNoteDocument = (
  note: CreditNote,
  invoice: Invoice,
  seller: ProfileRecord,
  buyer: BuyerDetails
): BillingDocument => {
  const money = (minor: number) => formatMinor(minor, note.currency)
  const what = note.cause === "dispute" ? "Lost payment dispute" : "Refund"
  return {
    title: "Credit note",
    number: note.number,
    statusLabel: `${what} on invoice ${invoice.number}`,
    createdAt: note.createdAt,
    seller: sellerParty(seller),
    buyerHeading: "CREDIT TO",
    buyer: buyerParty(buyer),
    facts: [
      ["Credit note number", note.number],
      ["Date of issue", day(note.createdAt)],
      ["Invoice", invoice.number],
      ["Invoice date", day(invoice.createdAt)],
      ["Currency", note.currency]
    ],
    lines: [
      {
        description: `${what} of invoice ${invoice.number}`,
        period: day(note.createdAt),
        quantity: "1",
        unitPrice: money(note.amount),
        amount: money(note.amount),
        adjustments: []
      }
    ],
    totals: [
      { label: "Invoice total", amount: money(invoice.total), strong: false },
      { label: "Total credited", amount: money(note.amount), strong: true },
      { label: "Refunded on the invoice so far", amount: money(invoice.amountRefunded), strong: false }
    ],
    notes: note.reason === undefined ? [] : [`Reason: ${note.reason}`],
    footer: seller.footer
  }
}
