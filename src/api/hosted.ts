import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequestError, NotFoundError } from "./errors.ts"

/**
 * The simulated provider's hosted checkout and setup pages (sandbox only, decisions.md §8). A person opens
 * the page and presses Pay; a script POSTs to the same URL (`?outcome=decline` declines), with any body or none.
 * Not part of the vendor-facing contract, so kept out of the OpenAPI document.
 */
const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))

/** Any string: an unknown kind is the handler's 404 page, like an unknown reference (not a JSON 400). */
const kind = HttpApiSchema.param("kind", Schema.String)
const organizationId = HttpApiSchema.param("organizationId", Schema.String)
const reference = HttpApiSchema.param("reference", Schema.String)

/** What the form posts (in the query or the body; the query wins). Both fields may be omitted: pay, card `ok`. */
export const HostedOutcome = Schema.Struct({
  outcome: Schema.optional(Schema.Literal("pay", "decline")),
  /** Which test card a setup saves: one that pays later, or one that is declined later. */
  card: Schema.optional(Schema.Literal("ok", "declining"))
})
export type HostedOutcome = typeof HostedOutcome.Type

export class HostedGroup extends HttpApiGroup.make("hosted")
  .add(
    HttpApiEndpoint.get("hostedPage")`/simulated/${kind}/${organizationId}/${reference}`
      .addSuccess(Html)
      .addError(NotFoundError)
  )
  .add(
    // Served with `handleRaw`: a form post, a JSON body or no body at all (`curl -X POST`) must all complete the
    // page, and `?outcome=decline` must work with any of them, so the handler reads the query and the body itself
    // (src/hosted/Http.ts) against `HostedOutcome`.
    HttpApiEndpoint.post("hostedComplete")`/simulated/${kind}/${organizationId}/${reference}`
      .setPayload(HostedOutcome)
      .addSuccess(Html)
      .addError(NotFoundError)
      .addError(BadRequestError)
  )
  .annotate(OpenApi.Exclude, true) {}
