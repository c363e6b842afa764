import { Context, Effect, Layer } from "effect"
import type { Invoice } from "../../api/billing.ts"
import { Customers } from "../../customers/Customers.ts"
import type { NotFound } from "../../domain/errors.ts"
import { Payments } from "../../payments/Payments.ts"
import { Invoices, toWireInvoice } from "../Invoices.ts"
import { BillingProfiles } from "../profile/BillingProfiles.ts"
import { InvoiceLinks } from "./links.ts"
import { CreditNotes, toWireCreditNote } from "../creditNotes/CreditNotes.ts"
import type { CreditNote } from "../../api/documents.ts"
import { type BillingDocument, type BuyerDetails, creditNoteDocument, invoiceDocument } from "./model.ts"
import { renderPdf } from "./pdf.ts"

/** An invoice's documents (decisions.md §16): the same numbers as `GET /v1/billing/invoices`. */
export interface InvoiceDocumentsShape {
  /** The invoice as the API lists it. */
  readonly wire: (org: string, invoiceId: string) => Effect.Effect<Invoice, NotFound>
  /** The invoice's document: seller, buyer, lines, totals. */
  readonly document: (org: string, invoiceId: string) => Effect.Effect<BillingDocument, NotFound>
  readonly pdf: (org: string, invoiceId: string) => Effect.Effect<Uint8Array, NotFound>
  /** Credit notes as the API lists them: one invoice's (by id or number), or all. */
  readonly creditNotes: (org: string, invoiceId: string | undefined) => Effect.Effect<ReadonlyArray<CreditNote>>
  readonly creditNotePdf: (org: string, creditNoteId: string) => Effect.Effect<Uint8Array, NotFound>
}

export class InvoiceDocuments extends Context.Tag("InvoiceDocuments")<InvoiceDocuments, InvoiceDocumentsShape>() {}

export const InvoiceDocumentsLive = Layer.effect(
  InvoiceDocuments,
  Effect.gen(function* () {
    const invoices = yield* Invoices
    const payments = yield* Payments
    const customers = yield* Customers
    const profiles = yield* BillingProfiles
    const links = yield* InvoiceLinks
    const creditNotes = yield* CreditNotes

    const wire = (org: string, invoiceId: string) =>
      Effect.gen(function* () {
        const invoice = yield* invoices.get(org, invoiceId)
        const refunded = yield* payments.refundedByTarget(org, [invoice.id])
        return toWireInvoice({ ...invoice, amountRefunded: refunded.get(invoice.id) ?? "0" }, links)
      })

    /** The buyer as it is now: a document shows the current billing details. */
    const buyerOf = (org: string, customerId: string) =>
      Effect.gen(function* () {
        const customer = yield* customers
          .resolve(org, customerId)
          .pipe(Effect.catchTag("Conflict", () => Effect.die("a customer id is unambiguous")))
        const details = yield* customers.billingDetails(org, customer.id)
        return {
          name: customer.name,
          email: customer.email,
          address: details.address,
          taxIds: details.taxIds
        } satisfies BuyerDetails
      })

    /** The seller and buyer as they are now: a document shows the current profile and billing details. */
    const document = (org: string, invoiceId: string) =>
      Effect.gen(function* () {
        const invoice = yield* wire(org, invoiceId)
        return invoiceDocument(invoice, yield* profiles.get(org), yield* buyerOf(org, invoice.customerId))
      })

    const listCreditNotes = (org: string, invoiceId: string | undefined) =>
      Effect.gen(function* () {
        const notes = yield* creditNotes.list(org, invoiceId)
        const numbers = new Map<string, string>()
        for (const n of notes) {
          if (!numbers.has(n.invoiceId)) {
            const invoice = yield* invoices.get(org, n.invoiceId).pipe(Effect.orDie)
            numbers.set(n.invoiceId, invoice.number)
          }
        }
        return notes.map((n) => toWireCreditNote(n, numbers.get(n.invoiceId)!))
      })

    const creditNotePdf = (org: string, creditNoteId: string) =>
      Effect.gen(function* () {
        const note = yield* creditNotes.get(org, creditNoteId)
        const invoice = yield* wire(org, note.invoiceId)
        const doc = creditNoteDocument(
          toWireCreditNote(note, invoice.number),
          invoice,
          yield* profiles.get(org),
          yield* buyerOf(org, note.customerId)
        )
        return yield* Effect.promise(() => renderPdf(doc))
      })

    const pdf = (org: string, invoiceId: string) =>
      Effect.flatMap(document(org, invoiceId), (doc) => Effect.promise(() => renderPdf(doc)))

    return { wire, document, pdf, creditNotes: listCreditNotes, creditNotePdf }
  })
)
