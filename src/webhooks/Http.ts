import { HttpApiBuilder, HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { type WebhookRoute, Webhooks } from "./Webhooks.ts"

/**
 * `handleRaw`: the payload is the raw body (see api/webhooks.ts). It is read as bytes for the signature check;
 * path parameters are still decoded.
 */
export const WebhooksHttp = HttpApiBuilder.group(BillingApi, "webhooks", (handlers) =>
  Effect.gen(function* () {
    const webhooks = yield* Webhooks
    const receive = (route: WebhookRoute) =>
      Effect.gen(function* () {
        const request = yield* HttpServerRequest.HttpServerRequest
        const body = new Uint8Array(yield* Effect.orDie(request.arrayBuffer))
        return yield* webhooks.receive(route, body, request.headers)
      }).pipe(mapDomainErrors)
    return handlers
      .handleRaw("sandboxWebhook", ({ path }) => receive({ _tag: "Sandbox", provider: path.provider }))
      .handleRaw("providerWebhook", ({ path }) =>
        receive({ _tag: "Organization", organization: path.organizationId, provider: path.provider })
      )
      .handleRaw("defaultProviderWebhook", ({ path }) =>
        receive({ _tag: "Organization", organization: path.organizationId, provider: "paystack" })
      )
  })
)
