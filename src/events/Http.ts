import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { Events } from "./Events.ts"

export const EventsHttp = HttpApiBuilder.group(BillingApi, "events", (handlers) =>
  Effect.gen(function* () {
    const events = yield* Events
    const org = Effect.map(CurrentOrganization, (o) => o.id)
    return handlers
      .handle("createWebhookEndpoint", ({ payload }) =>
        Effect.flatMap(org, (id) => events.createEndpoint(id, payload)).pipe(mapDomainErrors)
      )
      .handle("listWebhookEndpoints", ({ urlParams }) =>
        Effect.flatMap(org, (id) => events.listEndpoints(id, urlParams))
      )
      .handle("getWebhookEndpoint", ({ path }) =>
        Effect.flatMap(org, (id) => events.getEndpoint(id, path.id)).pipe(mapDomainErrors)
      )
      .handle("updateWebhookEndpoint", ({ path, payload }) =>
        Effect.flatMap(org, (id) => events.updateEndpoint(id, path.id, payload)).pipe(mapDomainErrors)
      )
      .handle("deleteWebhookEndpoint", ({ path }) =>
        Effect.flatMap(org, (id) => events.deleteEndpoint(id, path.id)).pipe(
          Effect.as({ id: path.id, deleted: true as const }),
          mapDomainErrors
        )
      )
      .handle("rotateWebhookEndpointSecret", ({ path }) =>
        Effect.flatMap(org, (id) => events.rotateSecret(id, path.id)).pipe(mapDomainErrors)
      )
      .handle("listWebhookDeliveries", ({ path, urlParams }) =>
        Effect.flatMap(org, (id) => events.listAttempts(id, path.id, urlParams)).pipe(mapDomainErrors)
      )
      .handle("listEvents", ({ urlParams }) =>
        Effect.flatMap(org, (id) => events.listEvents(id, urlParams)).pipe(mapDomainErrors)
      )
      .handle("getEvent", ({ path }) => Effect.flatMap(org, (id) => events.getEvent(id, path.id)).pipe(mapDomainErrors))
      .handle("resendEvent", ({ path, payload }) =>
        Effect.flatMap(org, (id) => events.resend(id, path.id, payload.endpoint)).pipe(
          Effect.map((endpoints) => ({ id: path.id, endpoints })),
          mapDomainErrors
        )
      )
  })
)
