import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { BadRequestError, NotFoundError, UnauthorizedError } from "./errors.ts"

/**
 * The provider's event, kept as the exact bytes received: signatures are computed over the raw body
 * (decisions.md §8), so it is never parsed before verification. Handlers must use `handleRaw` (which
 * skips payload decoding) and read `request.arrayBuffer`: with `handle`, HttpApi would parse the JSON
 * body and then fail to decode it as bytes.
 */
export const WebhookBody = HttpApiSchema.Uint8Array({ contentType: "application/json" }).annotations({
  description: "The provider's event, verbatim (signature-checked on these bytes)"
})

export const WebhookAck = Schema.Struct({
  success: Schema.Boolean,
  received: Schema.Boolean,
  skipped: Schema.Boolean.annotations({
    description: "True when the event was not processed (replay, unhandled type...)"
  }),
  error: Schema.optional(Schema.String)
}).annotations({ identifier: "WebhookAck" })
export type WebhookAck = typeof WebhookAck.Type

const organizationId = HttpApiSchema.param(
  "organizationId",
  Schema.String.annotations({ description: "Organization id or slug" })
)
const provider = HttpApiSchema.param(
  "provider",
  Schema.String.annotations({ description: "`paystack` or `stripe`; unknown ones answer 404 provider_not_supported" })
)

/**
 * Payment-provider webhooks (spec 4.21): no bearer key; authenticity comes from the signature.
 * `/webhooks/sandbox/{provider}` wins over `/webhooks/{organizationId}/{provider}` by the router's
 * static-before-parametric rule, whatever the declaration order, so an organization slugged
 * `sandbox` could not receive webhooks on the two-segment route.
 */
export class WebhooksGroup extends HttpApiGroup.make("webhooks")
  .annotate(OpenApi.Description, "Payment providers' webhooks to the service (signed by the provider, no key)")
  .add(
    HttpApiEndpoint.post("sandboxWebhook")`/webhooks/sandbox/${provider}`
      .setPayload(WebhookBody)
      .addSuccess(WebhookAck)
      .annotate(OpenApi.Summary, "Sandbox webhook (managed test account)")
  )
  .add(
    HttpApiEndpoint.post("providerWebhook")`/webhooks/${organizationId}/${provider}`
      .setPayload(WebhookBody)
      .addSuccess(WebhookAck)
      .annotate(OpenApi.Summary, "Provider webhook of an organization")
  )
  .add(
    HttpApiEndpoint.post("defaultProviderWebhook")`/webhooks/${organizationId}`
      .setPayload(WebhookBody)
      .addSuccess(WebhookAck)
      .annotate(OpenApi.Summary, "Webhook of the organization's first provider (paystack)")
  )
  .addError(UnauthorizedError)
  .addError(NotFoundError)
  .addError(BadRequestError) {}
