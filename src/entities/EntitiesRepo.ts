import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, type Option, Schema } from "effect"
import { decodeFirstRow, JsonObjectText, Millis, NullableMillis, recordSchema } from "../platform/db/rowSchemas.ts"

export type EntityStatus = "active" | "pending_removal"

/** One seat or member of a customer for one feature; `entity` is the caller's own name for it. */
export interface EntityRecord {
  readonly organizationId: string
  readonly id: string
  readonly customerId: string
  readonly featureId: string
  readonly entity: string
  readonly name: string | null
  readonly email: string | null
  readonly metadata: Record<string, unknown>
  readonly status: EntityStatus
  /** When a pending removal takes effect; `null` while active. */
  readonly removeAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
}

/** Whether an entity counts at `now`: active, or pending removal not yet due (decisions.md §6). */
export const isLive = (e: EntityRecord, now: number): boolean =>
  e.status === "active" || (e.removeAt !== null && e.removeAt > now)

export interface EntitiesRepoShape {
  /**
   * Serialises entity writes of one customer for the rest of the transaction: PostgreSQL locks the customer's
   * row (`FOR UPDATE`); SQLite runs one writer at a time already.
   */
  readonly lockCustomer: (org: string, customerId: string) => Effect.Effect<void>
  /** The row of that name, whatever its status (an expired pending removal is still a row, reused on re-add). */
  readonly find: (
    org: string,
    customerId: string,
    featureId: string,
    entity: string
  ) => Effect.Effect<Option.Option<EntityRecord>>
  /** Active plus pending removal not yet due: the same rule as the engine's `countEntities`. */
  readonly count: (org: string, customerId: string, featureId: string, now: number) => Effect.Effect<number>
  readonly insert: (entity: EntityRecord) => Effect.Effect<void>
  /** Writes the mutable fields (name, email, metadata, status, remove_at, updated_at). */
  readonly update: (entity: EntityRecord) => Effect.Effect<void>
}

export class EntitiesRepo extends Context.Tag("EntitiesRepo")<EntitiesRepo, EntitiesRepoShape>() {}

const EntityRow = recordSchema<EntityRecord>()(
  Schema.Struct({
    organizationId: Schema.String,
    id: Schema.String,
    customerId: Schema.String,
    featureId: Schema.String,
    entity: Schema.String,
    name: Schema.NullOr(Schema.String),
    email: Schema.NullOr(Schema.String),
    metadata: JsonObjectText,
    status: Schema.Literal("active", "pending_removal"),
    removeAt: NullableMillis,
    createdAt: Millis,
    updatedAt: Millis
  })
)

const firstEntity = decodeFirstRow("entities", EntityRow)

export const EntitiesRepoSql = Layer.effect(
  EntitiesRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })

    return {
      lockCustomer: (org, customerId) =>
        isPg
          ? sql`SELECT id FROM customers WHERE organization_id = ${org} AND id = ${customerId} FOR UPDATE`.pipe(
              Effect.asVoid,
              Effect.orDie
            )
          : Effect.void,
      find: (org, customerId, featureId, entity) =>
        sql`SELECT * FROM entities WHERE organization_id = ${org} AND customer_id = ${customerId}
            AND feature_id = ${featureId} AND entity = ${entity}`.pipe(Effect.flatMap(firstEntity), Effect.orDie),
      count: (org, customerId, featureId, now) =>
        sql<{ n: number | bigint | string }>`SELECT COUNT(*) AS n FROM entities WHERE organization_id = ${org}
            AND customer_id = ${customerId} AND feature_id = ${featureId}
            AND (status = 'active' OR (status = 'pending_removal' AND remove_at > ${now}))`.pipe(
          Effect.map((rows) => Number(rows[0]?.n ?? 0)),
          Effect.orDie
        ),
      insert: (e) =>
        sql`INSERT INTO entities ${sql.insert({
          organizationId: e.organizationId,
          id: e.id,
          customerId: e.customerId,
          featureId: e.featureId,
          entity: e.entity,
          name: e.name,
          email: e.email,
          metadata: JSON.stringify(e.metadata),
          status: e.status,
          removeAt: e.removeAt,
          createdAt: e.createdAt,
          updatedAt: e.updatedAt
        })}`.pipe(Effect.asVoid, Effect.orDie),
      update: (e) =>
        sql`UPDATE entities SET name = ${e.name}, email = ${e.email}, metadata = ${JSON.stringify(e.metadata)},
              status = ${e.status}, remove_at = ${e.removeAt}, updated_at = ${e.updatedAt}
            WHERE organization_id = ${e.organizationId} AND id = ${e.id}`.pipe(Effect.asVoid, Effect.orDie)
    }
  })
)
