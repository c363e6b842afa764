import { SqlClient } from "@effect/sql"
import { readFileSync } from "node:fs"
import { Clock, Context, Effect, Layer } from "effect"
import {
  type CreateWebhookEndpoint,
  type DeliveryAttempt,
  EVENT_TYPES,
  type Event,
  type EventType,
  type UpdateWebhookEndpoint,
  type WebhookEndpoint
} from "../api/events.ts"
import { type Conflict, InvalidInput, NotFound } from "../domain/errors.ts"
import { AppConfig } from "../platform/config.ts"
import { Encryption } from "../platform/encryption.ts"
import { Ids } from "../platform/ids.ts"
import { isPublicAddress, localHostNames, privateNameProblem } from "./addresses.ts"
import { retire, type StoredSecrets } from "./retiredSecrets.ts"
import { newSecret } from "./signing.ts"

/** The names this machine's hosts file maps to private addresses, read at each registration (it is rare). */
const hostsFileNames = (): ReadonlySet<string> => {
  try {
    return localHostNames(readFileSync("/etc/hosts", "utf8"))
  } catch {
    return new Set()
  }
}

/** The old secret keeps signing beside the new one this long after a rotation (decisions.md §11). */
export const ROTATION_OVERLAP_MS = 24 * 3_600_000

export interface Page {
  readonly limit?: number | undefined
  readonly startingAfter?: string | undefined
}

export interface PageOf<A> {
  readonly data: ReadonlyArray<A>
  readonly hasMore: boolean
}

/**
 * How `GET /v1/events?customer=` names a customer (id, external id or email, decisions.md §4): filled above both
 * features (src/wiring), so events do not depend on customers. Without it, the reference is taken as an id.
 */
export class EventCustomers extends Context.Reference<EventCustomers>()("EventCustomers", {
  defaultValue:
    () =>
    (_organizationId: string, ref: string): Effect.Effect<string, NotFound | Conflict> =>
      Effect.succeed(ref)
}) {}

/** Webhook endpoints, the events API and resends (decisions.md §11). Every call is scoped by organization. */
export interface EventsShape {
  readonly createEndpoint: (org: string, input: CreateWebhookEndpoint) => Effect.Effect<WebhookEndpoint, InvalidInput>
  readonly listEndpoints: (org: string, page: Page) => Effect.Effect<PageOf<WebhookEndpoint>>
  readonly getEndpoint: (org: string, id: string) => Effect.Effect<WebhookEndpoint, NotFound>
  readonly updateEndpoint: (
    org: string,
    id: string,
    input: UpdateWebhookEndpoint
  ) => Effect.Effect<WebhookEndpoint, NotFound | InvalidInput>
  readonly deleteEndpoint: (org: string, id: string) => Effect.Effect<void, NotFound>
  readonly rotateSecret: (org: string, id: string) => Effect.Effect<WebhookEndpoint, NotFound>
  readonly listAttempts: (
    org: string,
    endpointId: string,
    page: Page
  ) => Effect.Effect<PageOf<DeliveryAttempt>, NotFound>
  readonly listEvents: (
    org: string,
    query: Page & { readonly type?: EventType | undefined; readonly customer?: string | undefined }
  ) => Effect.Effect<PageOf<Event>, NotFound | Conflict>
  readonly getEvent: (org: string, id: string) => Effect.Effect<Event, NotFound>
  /** Queues the event again: to one endpoint, or to every enabled endpoint subscribed to its type. */
  readonly resend: (org: string, id: string, endpointId?: string) => Effect.Effect<ReadonlyArray<string>, NotFound>
}

export class Events extends Context.Tag("Events")<Events, EventsShape>() {}

interface EndpointRow {
  readonly id: string
  readonly url: string
  readonly description: string | null
  readonly events: string | null
  readonly enabled: number
  readonly createdAt: number
  readonly updatedAt: number
}

/** The types an endpoint receives: `null` stored = every type, also types added later. */
export const subscribedTypes = (stored: string | null): ReadonlyArray<EventType> | "all" =>
  stored === null ? "all" : (JSON.parse(stored) as ReadonlyArray<EventType>)

export const receives = (stored: string | null, type: string) => {
  const types = subscribedTypes(stored)
  return types === "all" || types.includes(type as EventType)
}

const toWireEndpoint = (row: EndpointRow, secret?: string): WebhookEndpoint => {
  const types = subscribedTypes(row.events)
  return {
    id: row.id,
    url: row.url,
    events: types === "all" ? [...EVENT_TYPES] : types,
    ...(row.description === null ? {} : { description: row.description }),
    enabled: Number(row.enabled) === 1,
    createdAt: Number(row.createdAt),
    updatedAt: Number(row.updatedAt),
    ...(secret === undefined ? {} : { secret })
  }
}

export const toWireEvent = (row: { id: string; type: string; createdAt: number; data: string }): Event => ({
  id: row.id,
  type: row.type as EventType,
  createdAt: Number(row.createdAt),
  data: JSON.parse(row.data)
})

const toWireAttempt = (row: any): DeliveryAttempt => ({
  id: row.id,
  deliveryId: row.deliveryId,
  eventId: row.eventId,
  eventType: row.eventType,
  attempt: Number(row.attempt),
  status: row.status,
  responseStatus: row.responseStatus === null ? null : Number(row.responseStatus),
  responseBody: row.responseBody,
  durationMs: Number(row.durationMs),
  ...(row.error === null ? {} : { error: row.error }),
  ...(row.nextAttemptAt === null ? {} : { nextAttemptAt: new Date(Number(row.nextAttemptAt)).toISOString() }),
  createdAt: Number(row.createdAt)
})

const endpointNotFound = (id: string) => new NotFound({ code: "not_found", message: `No webhook endpoint '${id}'` })
const eventNotFound = (id: string) => new NotFound({ code: "not_found", message: `No event '${id}'` })

/** Distinct types in the order given (a list naming one twice subscribes once). */
const distinct = (types: ReadonlyArray<EventType>) => [...new Set(types)]

export const EventsLive = Layer.effect(
  Events,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const ids = yield* Ids
    const encryption = yield* Encryption
    const config = yield* AppConfig
    const live = config.appEnv === "live"
    const forUpdate = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })

    /** On live, where deliveries may go (decisions.md §11); the address is checked again when connecting. */
    const checkUrl = (url: string): Effect.Effect<void, InvalidInput> => {
      if (!live) return Effect.void
      const parsed = new URL(url)
      const host = parsed.hostname.replace(/^\[|\]$/g, "")
      const literal = /^[\d.]+$|:/.test(host)
      const problem =
        parsed.protocol !== "https:"
          ? "must be an https URL on a live deployment"
          : literal
            ? isPublicAddress(host)
              ? undefined
              : "must not be a private, loopback or reserved address"
            : privateNameProblem(host, hostsFileNames())
      return problem === undefined
        ? Effect.void
        : Effect.fail(
            new InvalidInput({
              message: `The request is invalid: url: ${problem}`,
              issues: [{ path: "url", message: problem }]
            })
          )
    }

    const findEndpoint = (org: string, id: string) =>
      sql<EndpointRow>`SELECT id, url, description, events, enabled, created_at, updated_at FROM webhook_endpoints
          WHERE organization_id = ${org} AND id = ${id}`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.fail(endpointNotFound(id)) : Effect.succeed(rows[0])))
      )

    const limitOf = (page: Page) => page.limit ?? 20
    const paged = <A>(rows: ReadonlyArray<A>, page: Page) => ({
      data: rows.slice(0, limitOf(page)),
      hasMore: rows.length > limitOf(page)
    })
    const after = (page: Page) => (page.startingAfter === undefined ? sql`` : sql`AND id < ${page.startingAfter}`)

    const createEndpoint: EventsShape["createEndpoint"] = (org, input) =>
      Effect.gen(function* () {
        yield* checkUrl(input.url)
        const now = yield* Clock.currentTimeMillis
        const secret = newSecret()
        const row = {
          organizationId: org,
          id: yield* ids.next("whe"),
          url: input.url,
          description: input.description ?? null,
          events: input.events === undefined ? null : JSON.stringify(distinct(input.events)),
          enabled: 1,
          secret: encryption.encrypt(secret),
          previousSecret: null,
          previousSecretExpiresAt: null,
          createdAt: now,
          updatedAt: now
        }
        yield* sql`INSERT INTO webhook_endpoints ${sql.insert(row)}`.pipe(Effect.orDie)
        return toWireEndpoint(row, secret)
      })

    const updateEndpoint: EventsShape["updateEndpoint"] = (org, id, input) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const current = yield* findEndpoint(org, id)
            if (input.url !== undefined) yield* checkUrl(input.url)
            const now = yield* Clock.currentTimeMillis
            const next: EndpointRow = {
              ...current,
              url: input.url ?? current.url,
              description: input.description === undefined ? current.description : input.description,
              events:
                input.events === undefined
                  ? current.events
                  : input.events === null
                    ? null
                    : JSON.stringify(distinct(input.events)),
              enabled: input.enabled === undefined ? Number(current.enabled) : input.enabled ? 1 : 0,
              updatedAt: now
            }
            yield* sql`UPDATE webhook_endpoints SET url = ${next.url}, description = ${next.description}, events = ${next.events},
            enabled = ${next.enabled}, updated_at = ${now} WHERE organization_id = ${org} AND id = ${id}`
            // Disabled: what waits for a retry is not sent (a resend naming the endpoint still is).
            if (next.enabled === 0) {
              yield* sql`UPDATE webhook_deliveries SET status = 'canceled', lease_owner = NULL, updated_at = ${now}
              WHERE organization_id = ${org} AND endpoint_id = ${id} AND status = 'pending'`
            }
            return toWireEndpoint(next)
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    const deleteEndpoint: EventsShape["deleteEndpoint"] = (org, id) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            yield* findEndpoint(org, id)
            yield* sql`DELETE FROM webhook_attempts WHERE organization_id = ${org} AND endpoint_id = ${id}`
            yield* sql`DELETE FROM webhook_deliveries WHERE organization_id = ${org} AND endpoint_id = ${id}`
            yield* sql`DELETE FROM webhook_endpoints WHERE organization_id = ${org} AND id = ${id}`
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    const rotateSecret: EventsShape["rotateSecret"] = (org, id) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const current = yield* findEndpoint(org, id)
            // Locked (PostgreSQL; SQLite serialises writers): two rotations at once both retire what they replaced.
            const [stored] = yield* sql<StoredSecrets & { secret: string }>`SELECT secret, previous_secret,
              previous_secret_expires_at, retired_secrets FROM webhook_endpoints
            WHERE organization_id = ${org} AND id = ${id} ${forUpdate}`
            const now = yield* Clock.currentTimeMillis
            const secret = newSecret()
            // Every secret retired within the overlap keeps signing (src/events/retiredSecrets.ts); the one-secret
            // columns of 0015 are emptied, their secret moved into the list.
            const retired = retire(stored!, stored!.secret, now, ROTATION_OVERLAP_MS)
            yield* sql`UPDATE webhook_endpoints SET retired_secrets = ${JSON.stringify(retired)},
            previous_secret = NULL, previous_secret_expires_at = NULL, secret = ${encryption.encrypt(secret)},
            updated_at = ${now} WHERE organization_id = ${org} AND id = ${id}`
            return toWireEndpoint({ ...current, updatedAt: now }, secret)
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    const listEndpoints: EventsShape["listEndpoints"] = (org, page) =>
      sql<EndpointRow>`SELECT id, url, description, events, enabled, created_at, updated_at FROM webhook_endpoints
          WHERE organization_id = ${org} ${after(page)} ORDER BY id DESC LIMIT ${limitOf(page) + 1}`.pipe(
        Effect.map((rows) =>
          paged(
            rows.map((r) => toWireEndpoint(r)),
            page
          )
        ),
        Effect.orDie
      )

    const listAttempts: EventsShape["listAttempts"] = (org, endpointId, page) =>
      Effect.gen(function* () {
        yield* findEndpoint(org, endpointId)
        const rows = yield* sql`SELECT * FROM webhook_attempts WHERE organization_id = ${org}
            AND endpoint_id = ${endpointId} ${after(page)} ORDER BY id DESC LIMIT ${limitOf(page) + 1}`.pipe(
          Effect.orDie
        )
        return paged(rows.map(toWireAttempt), page)
      })

    const listEvents: EventsShape["listEvents"] = (org, query) =>
      Effect.gen(function* () {
        const customerId =
          query.customer === undefined
            ? undefined
            : yield* Effect.flatMap(EventCustomers, (resolve) => resolve(org, query.customer!))
        const rows = yield* sql<{
          id: string
          type: string
          createdAt: number
          data: string
        }>`SELECT id, type, created_at, data
            FROM outbound_events WHERE organization_id = ${org}
            ${query.type === undefined ? sql`` : sql`AND type = ${query.type}`}
            ${customerId === undefined ? sql`` : sql`AND customer_id = ${customerId}`}
            ${after(query)} ORDER BY id DESC LIMIT ${limitOf(query) + 1}`.pipe(Effect.orDie)
        return paged(rows.map(toWireEvent), query)
      })

    const findEvent = (org: string, id: string) =>
      sql<{ id: string; type: string; createdAt: number; data: string }>`SELECT id, type, created_at, data
          FROM outbound_events WHERE organization_id = ${org} AND id = ${id}`.pipe(
        Effect.orDie,
        Effect.flatMap((rows) => (rows[0] === undefined ? Effect.fail(eventNotFound(id)) : Effect.succeed(rows[0])))
      )

    const resend: EventsShape["resend"] = (org, id, endpointId) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const event = yield* findEvent(org, id)
            const targets =
              endpointId !== undefined
                ? [(yield* findEndpoint(org, endpointId)).id]
                : (yield* sql<{ id: string; events: string | null }>`SELECT id, events FROM webhook_endpoints
              WHERE organization_id = ${org} AND enabled = 1 ORDER BY id`)
                    .filter((e) => receives(e.events, event.type))
                    .map((e) => e.id)
            const now = yield* Clock.currentTimeMillis
            for (const target of targets) {
              yield* sql`INSERT INTO webhook_deliveries ${sql.insert({
                organizationId: org,
                id: yield* ids.next("dlv"),
                eventId: id,
                endpointId: target,
                status: "pending",
                attempts: 0,
                nextAttemptAt: now,
                leaseOwner: null,
                createdAt: now,
                updatedAt: now
              })}`
            }
            // Sent to every subscribed endpoint now: the worker's fan-out must not send it to them a second time.
            if (endpointId === undefined) {
              yield* sql`UPDATE outbound_events SET fanned_out = 1 WHERE organization_id = ${org} AND id = ${id}`
            }
            return targets
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    return {
      createEndpoint,
      listEndpoints,
      getEndpoint: (org, id) => Effect.map(findEndpoint(org, id), (row) => toWireEndpoint(row)),
      updateEndpoint,
      deleteEndpoint,
      rotateSecret,
      listAttempts,
      listEvents,
      getEvent: (org, id) => Effect.map(findEvent(org, id), toWireEvent),
      resend
    }
  })
)
