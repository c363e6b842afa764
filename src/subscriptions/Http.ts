import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { idempotencyKeyOf } from "../platform/idempotencyKey.ts"
import { Subscriptions, toWireSubscription } from "./Subscriptions.ts"

export const SubscriptionsHttp = HttpApiBuilder.group(BillingApi, "subscriptions", (handlers) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions
    return handlers
      .handle("attach", ({ payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const idempotency = yield* idempotencyKeyOf("attach", payload)
          return yield* subscriptions.attach(org.id, { ...payload, idempotency })
        }).pipe(
          Effect.map((a) => ({
            success: true,
            subscription: toWireSubscription(a.subscription, a.plan),
            checkoutUrl: a.checkoutUrl,
            message: a.message
          })),
          mapDomainErrors
        )
      )
      .handle("listSubscriptions", ({ urlParams }) =>
        Effect.flatMap(CurrentOrganization, (org) => subscriptions.list(org.id, urlParams.customer)).pipe(
          Effect.map((list) => ({
            success: true,
            subscriptions: list.map(({ plan, subscription }) => toWireSubscription(subscription, plan))
          })),
          mapDomainErrors
        )
      )
      .handle("checkoutSubscription", ({ path, payload }) =>
        Effect.flatMap(CurrentOrganization, (org) =>
          subscriptions.checkout(org.id, path.id, payload.callbackUrl ?? null)
        ).pipe(
          Effect.map((a) => ({
            success: true,
            checkoutUrl: a.checkoutUrl,
            reference: a.reference,
            accessCode: a.accessCode,
            activatedDirectly: a.subscription.status === "active",
            code: a.code ?? (a.checkoutUrl !== null ? ("checkout_required" as const) : ("activated" as const)),
            message: a.message
          })),
          mapDomainErrors
        )
      )
      .handle("cancelSubscription", ({ path }) =>
        Effect.flatMap(CurrentOrganization, (org) => subscriptions.cancel(org.id, path.id)).pipe(
          Effect.map(({ plan, subscription }) => ({
            success: true,
            subscription: toWireSubscription(subscription, plan)
          })),
          mapDomainErrors
        )
      )
  })
)
