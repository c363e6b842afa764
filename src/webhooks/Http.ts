import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

/**
 * `handleRaw`, not `handle`: the payload is the raw body (see api/webhooks.ts), read it with
 * `request.arrayBuffer` for the signature check; path parameters are still decoded.
 */
export const WebhooksHttp = HttpApiBuilder.group(BillingApi, "webhooks", (handlers) =>
  handlers
    .handleRaw("sandboxWebhook", () => notImplemented("Sandbox webhooks"))
    .handleRaw("providerWebhook", () => notImplemented("Provider webhooks"))
    .handleRaw("defaultProviderWebhook", () => notImplemented("Provider webhooks")))
