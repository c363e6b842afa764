import { Effect, Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { EventCustomers } from "../events/Events.ts"

/** `GET /v1/events?customer=` resolves its customer as every route does (id, external id, then email). */
export const EventCustomersLive = Layer.effect(
  EventCustomers,
  Effect.map(
    Customers,
    (customers) => (organizationId, ref) => Effect.map(customers.resolve(organizationId, ref), (c) => c.id)
  )
)
