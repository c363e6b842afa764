import { Context, Effect, Layer } from "effect"
import type { Invoice } from "../../api/billing.ts"
import { Customers } from "../../customers/Customers.ts"
import type { NotFound } from "../../domain/errors.ts"
import { Payments } from "../../payments/Payments.ts"
import { Invoices, toWireInvoice } from "../Invoices.ts"
import { BillingProfiles } from "../profile/BillingProfiles.ts"
import { InvoiceLinks } from "./links.ts"
import { type BillingDocument, invoiceDocument } from "./model.ts"
import { renderPdf } from "./pdf.ts"

/** An invoice's documents (decisions.md §16): the same numbers as `GET /v1/billing/invoices`. */
export interface InvoiceDocumentsShape {
  /** The invoice as the API lists it. */
  readonly wire: (org: string, invoiceId: string) => Effect.Effect<Invoice, NotFound>
  /** The invoice's document: seller, buyer, lines, totals. */
  readonly document: (org: string, invoiceId: string) => Effect.Effect<BillingDocument, NotFound>
  readonly pdf: (org: string, invoiceId: string) => Effect.Effect<Uint8Array, NotFound>
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

    const wire = (org: string, invoiceId: string) =>
      Effect.gen(function* () {
        const invoice = yield* invoices.get(org, invoiceId)
        const refunded = yield* payments.refundedByTarget(org, [invoice.id])
        return toWireInvoice({ ...invoice, amountRefunded: refunded.get(invoice.id) ?? "0" }, links)
      })

    /** The seller and buyer as they are now: a document shows the current profile and billing details. */
    const document = (org: string, invoiceId: string) =>
      Effect.gen(function* () {
        const invoice = yield* wire(org, invoiceId)
        const customer = yield* customers
          .resolve(org, invoice.customerId)
          .pipe(Effect.catchTag("Conflict", () => Effect.die("a customer id is unambiguous")))
        const details = yield* customers.billingDetails(org, customer.id)
        const seller = yield* profiles.get(org)
        return invoiceDocument(invoice, seller, {
          name: customer.name,
          email: customer.email,
          address: details.address,
          taxIds: details.taxIds
        })
      })

    const pdf = (org: string, invoiceId: string) =>
      Effect.flatMap(document(org, invoiceId), (doc) => Effect.promise(() => renderPdf(doc)))

    return { wire, document, pdf }
  })
)
