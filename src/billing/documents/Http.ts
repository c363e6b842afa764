import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../../api/Api.ts"
import { CurrentOrganization } from "../../api/security.ts"
import { mapDomainErrors } from "../../boundary/toApiError.ts"
import { Payments } from "../../payments/Payments.ts"
import { Invoices } from "../Invoices.ts"
import { InvoiceDocuments } from "./InvoiceDocuments.ts"

export const DocumentsHttp = HttpApiBuilder.group(BillingApi, "documents", (handlers) =>
  Effect.gen(function* () {
    const documents = yield* InvoiceDocuments
    const invoices = yield* Invoices
    const payments = yield* Payments
    return handlers
      .handle("invoicePdf", ({ path }) =>
        Effect.flatMap(CurrentOrganization, (org) => documents.pdf(org.id, path.id)).pipe(mapDomainErrors)
      )
      .handle("refundInvoice", ({ path, payload, headers }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const invoice = yield* invoices.get(org.id, path.id)
          const key = headers["idempotency-key"] ?? crypto.randomUUID()
          const outcome = yield* payments.refund(org.id, invoice.id, {
            amount: payload.amount ?? null,
            reason: payload.reason ?? null,
            key
          })
          return {
            success: true,
            amount: outcome.amount,
            status: outcome.status,
            creditNotes: yield* documents.creditNotes(org.id, invoice.id)
          }
        }).pipe(mapDomainErrors)
      )
      .handle("listCreditNotes", ({ urlParams }) =>
        Effect.flatMap(CurrentOrganization, (org) => documents.creditNotes(org.id, urlParams.invoice)).pipe(
          Effect.map((creditNotes) => ({ success: true, creditNotes }))
        )
      )
      .handle("creditNotePdf", ({ path }) =>
        Effect.flatMap(CurrentOrganization, (org) => documents.creditNotePdf(org.id, path.id)).pipe(mapDomainErrors)
      )
  })
)
