import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { allErrors, CustomerRef, EpochMillis, IsoDateTime, NonEmptyString, Url } from "./common.ts"
import { BadRequestError, ConflictError, NotFoundError } from "./errors.ts"
import { boundedIntegerFromQuery } from "./numbers.ts"
import { Authentication } from "./security.ts"

/** Outbound events (decisions.md §11): every type a vendor can receive. */
export const EVENT_TYPES = [
  "customer.created",
  "subscription.created",
  "subscription.activated",
  "subscription.renewed",
  "subscription.past_due",
  "subscription.canceled",
  "subscription.expired",
  "subscription.updated",
  "subscription.change_scheduled",
  "subscription.change_canceled",
  "subscription.resumed",
  "invoice.created",
  "invoice.paid",
  "invoice.payment_failed",
  "payment.refunded",
  "payment.disputed",
  "payment_method.saved",
  "payment_method.removed",
  "payment_method.updated",
  "credits.purchased",
  "credits.granted",
  "credit_balance.updated",
  "usage.threshold_reached",
  "overage.spend_cap_reached"
] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const EventTypeSchema = Schema.Literal(...EVENT_TYPES).annotations({
  identifier: "EventType",
  message: () => ({ message: `must be one of ${EVENT_TYPES.join(", ")}`, override: true })
})

export const isEventType = (s: string): s is EventType => (EVENT_TYPES as ReadonlyArray<string>).includes(s)

/** The body of every delivery, and an item of `GET /v1/events`. */
export const Event = Schema.Struct({
  id: Schema.String.annotations({ description: "msg_…: the same `webhook-id` on every attempt and resend" }),
  type: EventTypeSchema,
  createdAt: EpochMillis,
  data: Schema.Unknown.annotations({
    description:
      "The resource in its API shape (customer, subscription, invoice, payment method), or for payment, " +
      "credit and usage events the object described in the README"
  })
}).annotations({ identifier: "Event" })
export type Event = typeof Event.Type

const PageSize = boundedIntegerFromQuery({ min: 1, max: 100, what: "Items per page", title: "PageSize" })
const Cursor = NonEmptyString.pipe(Schema.maxLength(64)).annotations({
  description: "The last id of the previous page: the page after it (newest first)"
})

const pageQuery = {
  limit: Schema.optional(PageSize).annotations({ default: 20 }),
  startingAfter: Schema.optional(Cursor)
}

export const PageQuery = Schema.Struct(pageQuery).annotations(allErrors)
export type PageQuery = typeof PageQuery.Type

export const ListEventsQuery = Schema.Struct({
  ...pageQuery,
  type: Schema.optional(EventTypeSchema),
  customer: Schema.optional(CustomerRef)
}).annotations(allErrors)
export type ListEventsQuery = typeof ListEventsQuery.Type

export const EventList = Schema.Struct({
  data: Schema.Array(Event),
  hasMore: Schema.Boolean
}).annotations({ identifier: "EventList" })

export const WebhookEndpoint = Schema.Struct({
  id: Schema.String.annotations({ description: "whe_…" }),
  url: Schema.String,
  events: Schema.Array(EventTypeSchema).annotations({
    description: "The types it receives; created without `events`, every type (also types added later)"
  }),
  description: Schema.optional(Schema.String),
  enabled: Schema.Boolean,
  createdAt: EpochMillis,
  updatedAt: EpochMillis,
  secret: Schema.optional(Schema.String).annotations({
    description: "whsec_…: shown only when the endpoint is created or its secret rotated"
  })
}).annotations({ identifier: "WebhookEndpoint" })
export type WebhookEndpoint = typeof WebhookEndpoint.Type

const Description = Schema.String.pipe(Schema.maxLength(512, { message: () => "must be at most 512 characters" }))
const EventTypes = Schema.Array(EventTypeSchema).pipe(
  Schema.minItems(1, { message: () => "must name at least one type (leave it out for every type)" }),
  Schema.maxItems(EVENT_TYPES.length * 2)
)

export const CreateWebhookEndpoint = Schema.Struct({
  url: Url.annotations({ description: "https on live deployments, resolving to a public address" }),
  events: Schema.optional(EventTypes).annotations({ description: "Default: every type" }),
  description: Schema.optional(Description)
}).annotations({ identifier: "CreateWebhookEndpoint", ...allErrors })
export type CreateWebhookEndpoint = typeof CreateWebhookEndpoint.Type

export const UpdateWebhookEndpoint = Schema.Struct({
  url: Schema.optional(Url),
  events: Schema.optional(Schema.NullOr(EventTypes)).annotations({ description: "null: every type" }),
  enabled: Schema.optional(Schema.Boolean).annotations({
    description: "false stops deliveries to it; those waiting for a retry are canceled"
  }),
  description: Schema.optional(Schema.NullOr(Description)).annotations({ description: "null clears it" })
}).annotations({ identifier: "UpdateWebhookEndpoint", ...allErrors })
export type UpdateWebhookEndpoint = typeof UpdateWebhookEndpoint.Type

export const WebhookEndpointList = Schema.Struct({
  data: Schema.Array(WebhookEndpoint),
  hasMore: Schema.Boolean
}).annotations({ identifier: "WebhookEndpointList" })

export const WebhookEndpointDeleted = Schema.Struct({
  id: Schema.String,
  deleted: Schema.Literal(true)
}).annotations({ identifier: "WebhookEndpointDeleted" })

/** One HTTP attempt of one event to one endpoint. */
export const DeliveryAttempt = Schema.Struct({
  id: Schema.String.annotations({ description: "att_…" }),
  deliveryId: Schema.String.annotations({
    description: "dlv_…: the event's delivery to this endpoint (a resend is another)"
  }),
  eventId: Schema.String,
  eventType: EventTypeSchema,
  attempt: Schema.Number.annotations({ description: "1 for the first attempt of the delivery" }),
  status: Schema.Literal("succeeded", "failed"),
  responseStatus: Schema.NullOr(Schema.Number).annotations({ description: "null when no answer came" }),
  responseBody: Schema.String.annotations({ description: "The first 1,024 characters of the answer" }),
  durationMs: Schema.Number,
  error: Schema.optional(Schema.String).annotations({
    description: "Why no answer came (timeout, refused address, …)"
  }),
  nextAttemptAt: Schema.optional(IsoDateTime).annotations({
    description: "When the delivery is tried again; absent once it succeeded or failed for good"
  }),
  createdAt: EpochMillis
}).annotations({ identifier: "DeliveryAttempt" })
export type DeliveryAttempt = typeof DeliveryAttempt.Type

export const DeliveryAttemptList = Schema.Struct({
  data: Schema.Array(DeliveryAttempt),
  hasMore: Schema.Boolean
}).annotations({ identifier: "DeliveryAttemptList" })

export const ResendEvent = Schema.Struct({
  endpoint: Schema.optional(NonEmptyString.pipe(Schema.maxLength(64))).annotations({
    description: "One endpoint's id; default: every enabled endpoint subscribed to the event's type"
  })
}).annotations({ identifier: "ResendEvent", ...allErrors })
export type ResendEvent = typeof ResendEvent.Type

export const EventResent = Schema.Struct({
  id: Schema.String,
  endpoints: Schema.Array(Schema.String).annotations({ description: "The endpoints it is sent to again" })
}).annotations({ identifier: "EventResent" })

const idParam = HttpApiSchema.param("id", Schema.String)

export class EventsGroup extends HttpApiGroup.make("events")
  .annotate(OpenApi.Description, "Outbound events: webhook endpoints, deliveries, and events to poll")
  .add(
    HttpApiEndpoint.post("createWebhookEndpoint", "/v1/webhook-endpoints")
      .setPayload(CreateWebhookEndpoint)
      .addSuccess(WebhookEndpoint)
      .annotate(OpenApi.Summary, "Create a webhook endpoint (its signing secret is shown only in this answer)")
  )
  .add(
    HttpApiEndpoint.get("listWebhookEndpoints", "/v1/webhook-endpoints")
      .setUrlParams(PageQuery)
      .addSuccess(WebhookEndpointList)
      .annotate(OpenApi.Summary, "List webhook endpoints")
  )
  .add(
    HttpApiEndpoint.get("getWebhookEndpoint")`/v1/webhook-endpoints/${idParam}`
      .addSuccess(WebhookEndpoint)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "Get a webhook endpoint")
  )
  .add(
    HttpApiEndpoint.post("updateWebhookEndpoint")`/v1/webhook-endpoints/${idParam}`
      .setPayload(UpdateWebhookEndpoint)
      .addSuccess(WebhookEndpoint)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "Update a webhook endpoint (partial)")
  )
  .add(
    HttpApiEndpoint.del("deleteWebhookEndpoint")`/v1/webhook-endpoints/${idParam}`
      .addSuccess(WebhookEndpointDeleted)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "Delete a webhook endpoint")
  )
  .add(
    HttpApiEndpoint.post("rotateWebhookEndpointSecret")`/v1/webhook-endpoints/${idParam}/rotate-secret`
      .addSuccess(WebhookEndpoint)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "Rotate a webhook endpoint's signing secret")
      .annotate(
        OpenApi.Description,
        "A new secret, shown only in this answer; for 24 hours deliveries carry a signature of the old secret beside the new one's."
      )
  )
  .add(
    HttpApiEndpoint.get("listWebhookDeliveries")`/v1/webhook-endpoints/${idParam}/deliveries`
      .setUrlParams(PageQuery)
      .addSuccess(DeliveryAttemptList)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "Delivery attempts to an endpoint, newest first")
  )
  .add(
    HttpApiEndpoint.get("listEvents", "/v1/events")
      .setUrlParams(ListEventsQuery)
      .addSuccess(EventList)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Events, newest first")
  )
  .add(
    HttpApiEndpoint.get("getEvent")`/v1/events/${idParam}`
      .addSuccess(Event)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "Get an event")
  )
  .add(
    HttpApiEndpoint.post("resendEvent")`/v1/events/${idParam}/resend`
      .setPayload(ResendEvent)
      .addSuccess(EventResent)
      .addError(NotFoundError)
      .annotate(OpenApi.Summary, "Send an event again, with the same id")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
