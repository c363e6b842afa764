import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { statements } from "./statements.ts"

/**
 * Fewer index pages written per recorded event (docs/decisions.md, "Batches and event time"). SQLite writes every page
 * a transaction dirtied, whole, to its log, syncs it, and copies it back at a checkpoint, so on a file database the
 * cost of an event is mostly the number of B-trees it lands on. Measured over 10,000 balances, 400 events a
 * transaction: 4.3 pages an event before, 2.6 after.
 *
 * 1. `usage_events_unbilled` indexed every event forever, billed or not, though its readers (invoicing,
 *    src/billing/InvoicesRepo.ts `unbilled`) only ever look for events that are billable and on no invoice yet. It
 *    now holds exactly those, ordered by id as those readers read them: an event drawn from an allowance never enters
 *    it, and an invoiced one leaves it. Both databases.
 * 2. SQLite: `usage_rollups` becomes a table clustered on its primary key (`WITHOUT ROWID`). History reads a range of
 *    that key per feature (src/usage/UsageRepo.ts), which the table now answers itself, so the covering index 0005
 *    added for it goes: a rollup's upsert touches one B-tree instead of three. PostgreSQL keeps its heap and index.
 */
const unbilled = [
  `DROP INDEX usage_events_unbilled`,
  `CREATE INDEX usage_events_unbilled ON usage_events (organization_id, customer_id, id)
    WHERE invoice_id IS NULL AND billable > 0`
]

const sqliteRollups = [
  `CREATE TABLE usage_rollups_clustered (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    customer_id TEXT NOT NULL,
    feature_id TEXT NOT NULL,
    bucket_start BIGINT NOT NULL,
    value BIGINT NOT NULL,
    records INTEGER NOT NULL,
    PRIMARY KEY (organization_id, customer_id, feature_id, bucket_start)
  ) WITHOUT ROWID`,
  `INSERT INTO usage_rollups_clustered (organization_id, customer_id, feature_id, bucket_start, value, records)
    SELECT organization_id, customer_id, feature_id, bucket_start, value, records FROM usage_rollups`,
  `DROP TABLE usage_rollups`,
  `ALTER TABLE usage_rollups_clustered RENAME TO usage_rollups`
]

export default Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* statements(...unbilled)
  yield* sql.onDialectOrElse({ pg: () => Effect.void, orElse: () => statements(...sqliteRollups) })
})
