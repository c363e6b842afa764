import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFoundError } from "./errors.ts"
import { Authentication } from "./security.ts"

/** A PDF document, the body of the answer. */
export const Pdf = Schema.Uint8ArrayFromSelf.pipe(
  HttpApiSchema.withEncoding({ kind: "Uint8Array", contentType: "application/pdf" })
).annotations({ description: "A PDF document" })

const idParam = HttpApiSchema.param("id", Schema.String)

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
  .middleware(Authentication) {}
