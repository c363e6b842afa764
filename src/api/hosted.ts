import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { NotFoundError } from "./errors.ts"

/**
 * The simulated provider's hosted checkout and setup pages (sandbox only, decisions.md §8). A person opens
 * the page and presses Pay; a script POSTs to the same URL (`?outcome=decline` declines). Not part of the
 * vendor-facing contract, so kept out of the OpenAPI document.
 */
const Html = Schema.String.pipe(HttpApiSchema.withEncoding({ kind: "Text", contentType: "text/html" }))

const kind = HttpApiSchema.param("kind", Schema.Literal("checkout", "setup"))
const organizationId = HttpApiSchema.param("organizationId", Schema.String)
const reference = HttpApiSchema.param("reference", Schema.String)

export const HostedOutcome = Schema.Struct({
  outcome: Schema.optional(Schema.Literal("pay", "decline")),
  /** Which test card a setup saves: one that pays later, or one that is declined later. */
  card: Schema.optional(Schema.Literal("ok", "declining"))
})

export class HostedGroup extends HttpApiGroup.make("hosted")
  .add(
    HttpApiEndpoint.get("hostedPage")`/simulated/${kind}/${organizationId}/${reference}`
      .addSuccess(Html)
      .addError(NotFoundError)
  )
  .add(
    HttpApiEndpoint.post("hostedComplete")`/simulated/${kind}/${organizationId}/${reference}`
      .setUrlParams(HostedOutcome)
      .setPayload(Schema.Struct({ outcome: Schema.optional(Schema.String), card: Schema.optional(Schema.String) }))
      .addSuccess(Html)
      .addError(NotFoundError)
  )
  .annotate(OpenApi.Exclude, true)
{}
