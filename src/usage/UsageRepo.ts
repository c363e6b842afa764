import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer } from "effect"
import { bucketIndexOf } from "./buckets.ts"

/** A local bucket as UTC instants, [startMs, endMs); consecutive, sorted (see buckets.ts). */
export interface BucketInterval {
  readonly startMs: number
  readonly endMs: number
}

/** Usage of one feature in one local bucket (micro-units; `records` = events). */
export interface BucketSum {
  readonly featureId: string
  /** Index into the buckets asked for. */
  readonly bucket: number
  readonly value: bigint
  readonly records: number
}

/**
 * Reads of the usage rollups (`usage_rollups`: 15-minute UTC buckets maintained by the track transaction). History
 * never reads raw `usage_events`: a customer's 90 days are at most 8,640 rollup rows per feature, however many
 * events they hold.
 */
export interface UsageRepoShape {
  /**
   * The customer's usage of the given features per local bucket. Each 15-minute rollup counts in the bucket holding
   * its start (every zone's local midnight is on a 15-minute UTC boundary, so none straddles two buckets). Rows may
   * repeat a (feature, bucket) pair: callers add them up. Naming the features keeps the primary key
   * `(organization_id, customer_id, feature_id, bucket_start)` a range scan per feature.
   */
  readonly sumByBucket: (
    organizationId: string,
    customerId: string,
    featureIds: ReadonlyArray<string>,
    buckets: ReadonlyArray<BucketInterval>
  ) => Effect.Effect<ReadonlyArray<BucketSum>>
}

export class UsageRepo extends Context.Tag("UsageRepo")<UsageRepo, UsageRepoShape>() {}

/** BIGINT arrives as a number (a bigint past 2^53, see Database.ts); NUMERIC (a PostgreSQL SUM) as a string. */
const toBigInt = (v: unknown): bigint =>
  typeof v === "bigint" ? v : typeof v === "number" ? BigInt(v) : BigInt(String(v ?? "0"))

export const UsageRepoSql = Layer.effect(
  UsageRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    const sumByBucket: UsageRepoShape["sumByBucket"] = (organizationId, customerId, featureIds, buckets) => {
      if (featureIds.length === 0 || buckets.length === 0) return Effect.succeed([])
      const fromMs = buckets[0]!.startMs
      const toMs = buckets[buckets.length - 1]!.endMs
      const scope = sql`organization_id = ${organizationId} AND customer_id = ${customerId}
        AND ${sql.in("feature_id", featureIds)} AND bucket_start >= ${fromMs} AND bucket_start < ${toMs}`
      // Rows as arrays (`.values`): no per-row objects or name transforms.
      return sql
        .onDialectOrElse({
          // PostgreSQL groups into the local buckets itself: `width_bucket` over the sorted bucket starts is the number
          // of starts <= bucket_start (1-based; an empty bucket's duplicate start is skipped, as in bucketIndexOf), so
          // a busy customer's ~2,000 rollup rows come back as at most features × buckets sums.
          pg: () =>
            sql`SELECT feature_id, width_bucket(bucket_start, ${`{${buckets.map((b) => b.startMs).join(",")}}`}::bigint[]),
                SUM(value), SUM(records)
              FROM usage_rollups WHERE ${scope}
              GROUP BY 1, 2`.values.pipe(
              Effect.map((rows) =>
                rows.map((r): BucketSum => ({
                  featureId: String(r[0]),
                  bucket: Number(r[1]) - 1,
                  value: toBigInt(r[2]),
                  records: Number(r[3])
                }))
              )
            ),
          // Elsewhere (SQLite, in-process) the rows are few and local: one sum per rollup row, its bucket found here.
          orElse: () =>
            sql`SELECT feature_id, bucket_start, value, records FROM usage_rollups WHERE ${scope}`.values.pipe(
              Effect.map((rows) =>
                rows.map((r): BucketSum => ({
                  featureId: String(r[0]),
                  bucket: bucketIndexOf(buckets, Number(r[1])),
                  value: toBigInt(r[2]),
                  records: Number(r[3])
                }))
              )
            )
        })
        .pipe(Effect.orDie)
    }

    return { sumByBucket }
  })
)
