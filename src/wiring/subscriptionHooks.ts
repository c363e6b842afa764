import { Effect, Layer } from "effect"
import { PlansAutoEnabledHook } from "../catalog/Catalog.ts"
import { CustomerCreatedHook } from "../customers/Customers.ts"
import { Subscriptions } from "../subscriptions/Subscriptions.ts"

/** New customers and newly auto-enabled plans meet here: both attach free `autoEnable` plans. */
export const SubscriptionHooksLive = Layer.mergeAll(
  Layer.effect(
    CustomerCreatedHook,
    Effect.map(
      Subscriptions,
      (s) => (organizationId, customer, now) => s.attachAutoEnabled(organizationId, customer, now)
    )
  ),
  Layer.effect(
    PlansAutoEnabledHook,
    Effect.map(Subscriptions, (s) => (organizationId, planIds) => s.attachPlansToAll(organizationId, planIds))
  )
)
