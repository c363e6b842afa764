import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { insertRows } from "../platform/db/insertRows.ts"
import { decodeRows, Flag, Millis, NullableMillis, recordSchema } from "../platform/db/rowSchemas.ts"
import type { SubscriptionRecord } from "./model.ts"

export interface SubscriptionsRepoShape {
  readonly insert: (s: SubscriptionRecord) => Effect.Effect<void>
  /** A few multi-row statements. */
  readonly insertMany: (s: ReadonlyArray<SubscriptionRecord>) => Effect.Effect<void>
  readonly update: (s: SubscriptionRecord) => Effect.Effect<void>
  readonly get: (organizationId: string, id: string) => Effect.Effect<Option.Option<SubscriptionRecord>>
  /** The subscription, its row locked until the transaction ends (PostgreSQL; SQLite serialises writers). */
  readonly getForUpdate: (organizationId: string, id: string) => Effect.Effect<Option.Option<SubscriptionRecord>>
  /** Serialises changes to one customer's subscriptions (a row lock on the customer until the transaction ends). */
  readonly lockCustomer: (organizationId: string, customerId: string) => Effect.Effect<void>
  /** Newest first. */
  readonly listByCustomer: (
    organizationId: string,
    customerId: string
  ) => Effect.Effect<ReadonlyArray<SubscriptionRecord>>
  readonly listByOrganization: (organizationId: string) => Effect.Effect<ReadonlyArray<SubscriptionRecord>>
  /** Subscriptions that may grant something: the hot path reads only these. */
  readonly listLive: (organizationId: string, customerId: string) => Effect.Effect<ReadonlyArray<SubscriptionRecord>>
}

export class SubscriptionsRepo extends Context.Tag("SubscriptionsRepo")<SubscriptionsRepo, SubscriptionsRepoShape>() {}

const nullableNumber = (v: unknown) => (v === null || v === undefined ? null : Number(v))

/**
 * A subscription row as the hot path reads it (src/entitlements/EntitlementsRepo.ts, inside its one JSON row per
 * check/track): mapped by hand, with no schema decoding on that path. The repository below reads subscriptions
 * through `SubscriptionRow`, the same mapping as a schema; test/row-schemas.test.ts checks that the two agree.
 */
export const toSubscriptionRecord = (row: any): SubscriptionRecord => ({
  organizationId: row.organizationId,
  id: row.id,
  customerId: row.customerId,
  planId: row.planId,
  status: row.status,
  startedAt: Number(row.startedAt),
  currentPeriodStart: Number(row.currentPeriodStart),
  currentPeriodEnd: nullableNumber(row.currentPeriodEnd),
  trialEndsAt: nullableNumber(row.trialEndsAt),
  cancelAtPeriodEnd: Number(row.cancelAtPeriodEnd) === 1,
  canceledAt: nullableNumber(row.canceledAt),
  graceEndsAt: nullableNumber(row.graceEndsAt),
  createdAt: Number(row.createdAt),
  updatedAt: Number(row.updatedAt),
  scheduledPlanId: row.scheduledPlanId ?? null,
  scheduledAt: nullableNumber(row.scheduledAt),
  pendingPlanId: row.pendingPlanId ?? null,
  pendingInvoiceId: row.pendingInvoiceId ?? null,
  pendingExpiresAt: nullableNumber(row.pendingExpiresAt),
  resetAnchor: nullableNumber(row.resetAnchor)
})

const SubscriptionRow = recordSchema<SubscriptionRecord>()(
  Schema.Struct({
    organizationId: Schema.String,
    id: Schema.String,
    customerId: Schema.String,
    planId: Schema.String,
    status: Schema.Literal("pending", "trialing", "active", "past_due", "canceled", "expired"),
    startedAt: Millis,
    currentPeriodStart: Millis,
    currentPeriodEnd: NullableMillis,
    trialEndsAt: NullableMillis,
    cancelAtPeriodEnd: Flag,
    canceledAt: NullableMillis,
    graceEndsAt: NullableMillis,
    createdAt: Millis,
    updatedAt: Millis,
    scheduledPlanId: Schema.NullOr(Schema.String),
    scheduledAt: NullableMillis,
    pendingPlanId: Schema.optionalWith(Schema.NullOr(Schema.String), { exact: true }),
    pendingInvoiceId: Schema.optionalWith(Schema.NullOr(Schema.String), { exact: true }),
    pendingExpiresAt: Schema.optionalWith(NullableMillis, { exact: true }),
    resetAnchor: NullableMillis
  })
)

const subscriptions = decodeRows("subscriptions", SubscriptionRow)

/** Fields a reader did not load (undefined) are left as they are. */
const toRow = (s: SubscriptionRecord) =>
  Object.fromEntries(
    Object.entries({ ...s, cancelAtPeriodEnd: s.cancelAtPeriodEnd ? 1 : 0 }).filter(([, v]) => v !== undefined)
  ) as Record<string, unknown>

export const SubscriptionsRepoSql = Layer.effect(
  SubscriptionsRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const rows = <E>(effect: Effect.Effect<ReadonlyArray<unknown>, E>) =>
      effect.pipe(Effect.flatMap(subscriptions), Effect.orDie)

    const forUpdate = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })

    return {
      insert: (s) => sql`INSERT INTO subscriptions ${sql.insert(toRow(s))}`.pipe(Effect.asVoid, Effect.orDie),
      insertMany: (records) =>
        insertRows(sql, "subscriptions", records.map(toRow), false).pipe(Effect.asVoid, Effect.orDie),
      update: (s) =>
        sql`UPDATE subscriptions SET ${sql.update(toRow(s), ["organizationId", "id"])}
            WHERE organization_id = ${s.organizationId} AND id = ${s.id}`.pipe(Effect.asVoid, Effect.orDie),
      get: (organizationId, id) =>
        rows(sql`SELECT * FROM subscriptions WHERE organization_id = ${organizationId} AND id = ${id}`).pipe(
          Effect.map((r) => Option.fromNullable(r[0]))
        ),
      lockCustomer: (organizationId, customerId) =>
        sql`SELECT id FROM customers WHERE organization_id = ${organizationId} AND id = ${customerId} ${forUpdate}`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      getForUpdate: (organizationId, id) =>
        rows(
          sql`SELECT * FROM subscriptions WHERE organization_id = ${organizationId} AND id = ${id} ${forUpdate}`
        ).pipe(Effect.map((r) => Option.fromNullable(r[0]))),
      listByCustomer: (organizationId, customerId) =>
        rows(sql`SELECT * FROM subscriptions WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                 ORDER BY created_at DESC, id DESC`),
      listByOrganization: (organizationId) =>
        rows(
          sql`SELECT * FROM subscriptions WHERE organization_id = ${organizationId} ORDER BY created_at DESC, id DESC`
        ),
      listLive: (organizationId, customerId) =>
        rows(sql`SELECT * FROM subscriptions WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                 AND status IN ('active', 'trialing', 'past_due') ORDER BY started_at, id`)
    }
  })
)
