import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"

/** One 15-minute rollup bucket of one feature (micro-units; `records` = events). */
export interface RollupRow {
  readonly featureId: string
  /** Epoch ms, a multiple of 15 minutes. */
  readonly bucketStart: number
  readonly value: bigint
  readonly records: number
}

/**
 * Reads of the usage rollups (`usage_rollups`, maintained by the track transaction). History never reads raw
 * `usage_events`: a customer's 90 days are at most 8,640 rows per feature, however many events they hold.
 */
export interface UsageRepoShape {
  /**
   * The customer's rollups of the given features with `fromMs <= bucket_start < toMs`. Naming the features keeps
   * the primary key `(organization_id, customer_id, feature_id, bucket_start)` a range scan per feature, so a long
   * history outside the range is never read.
   */
  readonly rollups: (
    organizationId: string,
    customerId: string,
    featureIds: ReadonlyArray<string>,
    fromMs: number,
    toMs: number
  ) => Effect.Effect<ReadonlyArray<RollupRow>>
}

export class UsageRepo extends Context.Tag("UsageRepo")<UsageRepo, UsageRepoShape>() {}

/** SUM over BIGINT is NUMERIC (a string) on PostgreSQL, a number on SQLite; BIGINT may be a bigint past 2^53. */
const toBigInt = (v: unknown): bigint =>
  typeof v === "bigint" ? v : typeof v === "number" ? BigInt(v) : BigInt(String(v ?? "0"))

export const UsageRepoSql = Layer.effect(
  UsageRepo,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    return {
      rollups: (organizationId, customerId, featureIds, fromMs, toMs) =>
        featureIds.length === 0 || fromMs >= toMs
          ? Effect.succeed([])
          : sql<{ featureId: string; bucketStart: unknown; value: unknown; records: unknown }>`
              SELECT feature_id, bucket_start, value, records
              FROM usage_rollups
              WHERE organization_id = ${organizationId} AND customer_id = ${customerId}
                AND ${sql.in("feature_id", featureIds)}
                AND bucket_start >= ${fromMs} AND bucket_start < ${toMs}`.pipe(
            Effect.map((rows) =>
              rows.map((r): RollupRow => ({
                featureId: r.featureId,
                bucketStart: Number(r.bucketStart),
                value: toBigInt(r.value),
                records: Number(r.records)
              }))
            ),
            Effect.orDie
          )
    }
  })
)
