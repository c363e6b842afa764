import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFoundError } from "./errors.ts"

/**
 * Hosted invoice pages (decisions.md §16): opened by the vendor's customer from the invoice's `hostedUrl`, without a
 * key; the unguessable token in the path is the credential. Pages for people, not part of the API document.
 */
const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))
const org = HttpApiSchema.param("org", Schema.String)
const id = HttpApiSchema.param("id", Schema.String)
const token = HttpApiSchema.param("token", Schema.String)

export class HostedInvoicesGroup extends HttpApiGroup.make("hostedInvoices")
  .add(HttpApiEndpoint.get("hostedInvoice")`/i/${org}/${id}/${token}`.addSuccess(Html).addError(NotFoundError))
  .add(
    HttpApiEndpoint.get("hostedInvoicePdf")`/i/${org}/${id}/${token}/pdf`
      .addSuccess(Schema.Uint8ArrayFromSelf)
      .addError(NotFoundError)
  )
  .add(HttpApiEndpoint.post("hostedInvoicePay")`/i/${org}/${id}/${token}/pay`.addSuccess(Html).addError(NotFoundError))
  .annotate(OpenApi.Exclude, true) {}
