import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

// History reads one customer's rollups by time: a covering index answers them without visiting the heap
// (PostgreSQL's INCLUDE; on SQLite the same columns as index keys).
export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.onDialectOrElse({
    pg: () =>
      sql.unsafe(`CREATE INDEX usage_rollups_customer_time ON usage_rollups
        (organization_id, customer_id, bucket_start) INCLUDE (feature_id, value, records)`),
    orElse: () =>
      sql.unsafe(`CREATE INDEX usage_rollups_customer_time ON usage_rollups
        (organization_id, customer_id, bucket_start, feature_id, value, records)`)
  })
})
