import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { EventType } from "../api/events.ts"
import { insertRows } from "../platform/db/insertRows.ts"
import { makeMonotonicIds } from "../platform/ids.ts"

/**
 * The outbox writer (decisions.md §11): the one thing features that cause events depend on. It imports nothing but
 * the contract's event types and the platform, so any feature may emit without a cycle.
 */
export interface OutboundEvent {
  readonly type: EventType
  /** The resource in its API shape, or the event's own object (README, "Events"). */
  readonly data: unknown
  /** The customer it is about: `GET /v1/events?customer=` filters by it. */
  readonly customerId?: string | null
  /** The object it is about (sub_…, inv_…, pm_…), for reading the events of one object. */
  readonly subjectId?: string | null
  /** An event sent at most once per organization and key (a renewal's past-due notice; a usage threshold per window). */
  readonly dedupeKey?: string
}

export interface OutboxShape {
  /**
   * Writes the event: one INSERT, inside the caller's transaction when there is one, so it commits with the change
   * that causes it or not at all. `None` when an event of the same `dedupeKey` was written before.
   */
  readonly emit: (organizationId: string, event: OutboundEvent) => Effect.Effect<Option.Option<string>>
  /** Many events as `emit` writes each, in order, with a few multi-row statements (events without a `dedupeKey`). */
  readonly emitMany: (organizationId: string, events: ReadonlyArray<OutboundEvent>) => Effect.Effect<void>
}

export class Outbox extends Context.Tag("Outbox")<Outbox, OutboxShape>() {}

export const OutboxLive = Layer.effect(
  Outbox,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // Time-sortable like every id, and in the order written within this process (two events of one transaction list
    // in that order, newest first).
    const nextId = makeMonotonicIds("msg")
    const rowOf = (organizationId: string, event: OutboundEvent, now: number) => ({
      organizationId,
      id: nextId(now),
      type: event.type,
      customerId: event.customerId ?? null,
      subjectId: event.subjectId ?? null,
      dedupeKey: event.dedupeKey ?? null,
      data: JSON.stringify(event.data),
      fannedOut: 0,
      createdAt: now
    })
    return {
      emitMany: (organizationId, events) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          insertRows(
            sql,
            "outbound_events",
            events.map((event) => rowOf(organizationId, event, now)),
            true
          )
        ).pipe(Effect.asVoid, Effect.orDie),
      emit: (organizationId, event) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const row = rowOf(organizationId, event, now)
          const id = row.id
          const written = yield* sql`INSERT INTO outbound_events ${sql.insert(row)} ON CONFLICT DO NOTHING RETURNING id`
          return written.length === 0 ? Option.none<string>() : Option.some(id)
        }).pipe(Effect.orDie)
    }
  })
)
