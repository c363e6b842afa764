import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { EpochMillis, IdempotencyHeaders } from "./common.ts"
import { BadGatewayError, BadRequestError, NotFoundError, UnprocessableError } from "./errors.ts"
import { MONEY, boundedNumber } from "./numbers.ts"
import { Authentication } from "./security.ts"

/** A PDF document, the body of the answer. */
export const Pdf = Schema.Uint8ArrayFromSelf.pipe(
  HttpApiSchema.withEncoding({ kind: "Uint8Array", contentType: "application/pdf" })
).annotations({ description: "A PDF document" })

const idParam = HttpApiSchema.param("id", Schema.String)

/** decisions.md §16: a refund through the invoice's provider. */
export const RefundInvoice = Schema.Struct({
  amount: Schema.optionalWith(
    boundedNumber({ ...MONEY, exclusiveMin: true, what: "Minor units to refund", title: "RefundAmount" }),
    { exact: true }
  ).annotations({ description: "Default: everything paid on the invoice less what was refunded" }),
  reason: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(500)), { exact: true })
}).annotations({ identifier: "RefundInvoice", parseOptions: { errors: "all" } })

export const CreditNote = Schema.Struct({
  id: Schema.String,
  number: Schema.String.annotations({ description: "`{invoicePrefix}-CN-000001`" }),
  invoiceId: Schema.String,
  invoiceNumber: Schema.String,
  customerId: Schema.String,
  currency: Schema.String,
  amount: Schema.Number.annotations({ description: "Minor currency units given back" }),
  cause: Schema.Literal("refund", "dispute"),
  reason: Schema.optionalWith(Schema.String, { exact: true }),
  createdAt: EpochMillis
}).annotations({ identifier: "CreditNote" })
export type CreditNote = typeof CreditNote.Type

export const RefundResult = Schema.Struct({
  success: Schema.Boolean,
  amount: Schema.Number.annotations({ description: "Minor units refunded (or asked of the provider)" }),
  status: Schema.Literal("succeeded", "pending").annotations({
    description:
      "`succeeded`: recorded, its credit note issued; `pending`: asked of the provider, recorded with its credit note when the provider confirms"
  }),
  creditNotes: Schema.Array(CreditNote).annotations({ description: "The invoice's credit notes, oldest first" })
}).annotations({ identifier: "RefundResult" })

export const CreditNoteQuery = Schema.Struct({
  invoice: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1)), { exact: true })
}).annotations({ parseOptions: { errors: "all" } })

export const CreditNoteList = Schema.Struct({
  success: Schema.Boolean,
  creditNotes: Schema.Array(CreditNote)
}).annotations({ identifier: "CreditNoteList" })

/** Invoice documents (decisions.md §16). */
export class DocumentsGroup extends HttpApiGroup.make("documents")
  .annotate(OpenApi.Description, "Invoice and credit note documents")
  .add(
    HttpApiEndpoint.get("invoicePdf")`/v1/billing/invoices/${idParam}/pdf`
      .addSuccess(Pdf)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "An invoice as a PDF")
      .annotate(
        OpenApi.Description,
        "Seller profile, buyer details and tax ids, number, dates, lines with their periods, discounts and taxes, totals, amount paid and due, footer"
      )
  )
  .add(
    HttpApiEndpoint.post("refundInvoice")`/v1/billing/invoices/${idParam}/refund`
      .setPayload(RefundInvoice)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(RefundResult)
      .addError(NotFoundError)
      .addError(UnprocessableError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Refund an invoice through its provider")
      .annotate(
        OpenApi.Description,
        "Past what was paid less what was refunded: 422 `refund_exceeds_paid`. Accepts an `Idempotency-Key` header: the same key refunds once."
      )
  )
  .add(
    HttpApiEndpoint.get("listCreditNotes", "/v1/billing/credit-notes")
      .setUrlParams(CreditNoteQuery)
      .addSuccess(CreditNoteList)
      .annotate(OpenApi.Summary, "List credit notes, of one invoice or all")
  )
  .add(
    HttpApiEndpoint.get("creditNotePdf")`/v1/billing/credit-notes/${idParam}/pdf`
      .addSuccess(Pdf)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "A credit note as a PDF")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
