import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

export const SubscriptionsHttp = HttpApiBuilder.group(BillingApi, "subscriptions", (handlers) =>
  handlers
    .handle("attach", () => notImplemented("Subscriptions"))
    .handle("listSubscriptions", () => notImplemented("Subscriptions"))
    .handle("checkoutSubscription", () => notImplemented("Subscription checkout"))
    .handle("cancelSubscription", () => notImplemented("Subscription cancellation")))
