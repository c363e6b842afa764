import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../../api/Api.ts"
import { InvoicePayments } from "../InvoicePayments.ts"
import { HOSTED_HEADERS, invoicePage, messagePage } from "./hostedPage.ts"
import { InvoiceDocuments } from "./InvoiceDocuments.ts"
import { InvoiceLinks } from "./links.ts"

const html = (body: string, status = 200) =>
  HttpServerResponse.text(body, { status, contentType: "text/html; charset=utf-8", headers: HOSTED_HEADERS })

const notFound = () =>
  html(messagePage("Invoice not found", "This link does not lead to an invoice. Ask the sender for a new one."), 404)

/**
 * The invoice's hosted page, its PDF and its Pay button (decisions.md §16). No key: the token in the path is checked
 * first, and a wrong one answers exactly as an unknown invoice does.
 */
export const HostedInvoicesHttp = HttpApiBuilder.group(BillingApi, "hostedInvoices", (handlers) =>
  Effect.gen(function* () {
    const documents = yield* InvoiceDocuments
    const links = yield* InvoiceLinks
    const invoicePayments = yield* InvoicePayments

    const show = (org: string, id: string, notice?: string) =>
      Effect.gen(function* () {
        const invoice = yield* documents.wire(org, id)
        const doc = yield* documents.document(org, id)
        const path = links.hostedPath(org, id)
        return html(
          invoicePage(doc, {
            payable: invoice.status === "open" || invoice.status === "uncollectible",
            pdfPath: `${path}/pdf`,
            payPath: `${path}/pay`,
            ...(notice === undefined ? {} : { notice })
          })
        )
      }).pipe(Effect.catchTag("NotFound", () => Effect.succeed(notFound())))

    return handlers
      .handleRaw("hostedInvoice", ({ path }) =>
        links.verify(path.org, path.id, path.token) ? show(path.org, path.id) : Effect.succeed(notFound())
      )
      .handleRaw("hostedInvoicePdf", ({ path }) =>
        links.verify(path.org, path.id, path.token)
          ? documents.pdf(path.org, path.id).pipe(
              Effect.map((pdf) =>
                HttpServerResponse.uint8Array(pdf, {
                  contentType: "application/pdf",
                  headers: { ...HOSTED_HEADERS, "content-disposition": `inline; filename="${path.id}.pdf"` }
                })
              ),
              Effect.catchTag("NotFound", () => Effect.succeed(notFound()))
            )
          : Effect.succeed(notFound())
      )
      .handleRaw("hostedInvoicePay", ({ path }) => {
        if (!links.verify(path.org, path.id, path.token)) return Effect.succeed(notFound())
        const back = links.hostedUrl(path.org, path.id)
        // The same collection as `POST /v1/billing/invoice/{id}/pay`: the saved method, else the provider's checkout,
        // which returns the customer here.
        return invoicePayments.pay(path.org, path.id, back, undefined).pipe(
          Effect.flatMap((outcome) =>
            outcome.checkoutUrl !== null
              ? Effect.succeed(
                  HttpServerResponse.redirect(outcome.checkoutUrl, { status: 303, headers: HOSTED_HEADERS })
                )
              : show(
                  path.org,
                  path.id,
                  outcome.code === "payment_processing"
                    ? "A payment is being processed."
                    : "Thank you: the invoice is paid."
                )
          ),
          Effect.catchTags({
            NotFound: () => Effect.succeed(notFound()),
            Conflict: (e) => show(path.org, path.id, e.message),
            PaymentFailed: (e) => show(path.org, path.id, `The payment did not go through: ${e.message}`),
            AmountTooLarge: (e) => show(path.org, path.id, e.message),
            ProviderFailure: () =>
              show(path.org, path.id, "The payment provider could not be reached. Please try again in a moment.")
          })
        )
      })
  })
)
