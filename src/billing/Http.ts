import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { Payments } from "../payments/Payments.ts"
import { idempotencyKeyOf } from "../platform/idempotencyKey.ts"
import { InvoiceLinks } from "./documents/links.ts"
import { InvoicePayments } from "./InvoicePayments.ts"
import { Invoices, toWireInvoice } from "./Invoices.ts"

export const BillingHttp = HttpApiBuilder.group(BillingApi, "billing", (handlers) =>
  Effect.gen(function* () {
    const invoices = yield* Invoices
    const invoicePayments = yield* InvoicePayments
    const payments = yield* Payments
    const links = yield* InvoiceLinks
    return handlers
      .handle("generateInvoice", ({ payload }) =>
        Effect.flatMap(CurrentOrganization, (org) => invoices.generate(org.id, payload.customer)).pipe(
          Effect.map((created) => {
            const wire = created.map((i) => toWireInvoice(i, links))
            return { success: true, invoice: wire[0]!, invoices: wire }
          }),
          mapDomainErrors
        )
      )
      .handle("listInvoices", ({ urlParams }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const list = yield* invoices.list(org.id, urlParams.customer)
          const refunded = yield* payments.refundedByTarget(
            org.id,
            list.map((i) => i.id)
          )
          return {
            success: true,
            invoices: list.map((i) => toWireInvoice({ ...i, amountRefunded: refunded.get(i.id) ?? "0" }, links))
          }
        }).pipe(mapDomainErrors)
      )
      .handle("getUnbilledUsage", ({ urlParams }) =>
        Effect.flatMap(CurrentOrganization, (org) => invoices.unbilled(org.id, urlParams.customer)).pipe(
          Effect.map((customers) => ({ success: true, customers })),
          mapDomainErrors
        )
      )
      .handle("payInvoice", ({ path, payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const idempotency = yield* idempotencyKeyOf("pay", { id: path.id, ...payload })
          return yield* invoicePayments.pay(org.id, path.id, payload.callbackUrl ?? null, idempotency)
        }).pipe(
          Effect.map((outcome) => ({
            success: true,
            paid: outcome.paid,
            checkoutUrl: outcome.checkoutUrl,
            invoice: {
              id: outcome.invoice.id,
              number: outcome.invoice.number,
              currency: outcome.invoice.currency,
              status: outcome.invoice.status,
              total: Number(outcome.invoice.total)
            },
            code: outcome.code,
            message: outcome.message
          })),
          mapDomainErrors
        )
      )
  })
)
