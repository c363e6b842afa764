import { Migrator, SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { expect, test } from "bun:test"
import { Effect } from "effect"
import { migrations } from "./migrations/index.ts"

const upTo = (last: string) =>
  Migrator.make({})({
    loader: Migrator.fromRecord(Object.fromEntries(Object.entries(migrations).filter(([id]) => id <= last)))
  })

const event = (id: string, customer: string, billable: number, invoice: string | null, createdAt: number) =>
  [id, customer, billable, invoice, createdAt] as const

/** A database written before 0020, then migrated: usage history and unbilled usage read as before. */
const migratedWithHistory = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* upTo("0019_context_versions")
  const rollups = [
    ["cus_a", "feat_1", 0, 5, 2],
    ["cus_a", "feat_1", 900_000, 7, 1],
    ["cus_a", "feat_2", 0, 1, 1],
    ["cus_b", "feat_1", 0, 3, 3]
  ] as const
  for (const [customer, feature, bucket, value, records] of rollups)
    yield* sql`INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
      VALUES ('org_1', ${customer}, ${feature}, ${bucket}, ${value}, ${records})`
  const events = [
    event("evt_1", "cus_a", 0, null, 1),
    event("evt_2", "cus_a", 4, null, 2),
    event("evt_3", "cus_a", 4, "inv_1", 3),
    event("evt_4", "cus_b", 2, null, 4)
  ]
  for (const [id, customer, billable, invoice, createdAt] of events)
    yield* sql`INSERT INTO usage_events (organization_id, id, customer_id, feature_id, subject_id, entity_id, value,
        cost, from_plan, from_bonus, from_addon, overage, billable, plan_id, metadata, invoice_id, created_at)
      VALUES ('org_1', ${id}, ${customer}, 'feat_1', 'feat_1', NULL, 1, 1, 1, 0, 0, 0, ${billable}, NULL, '{}',
        ${invoice}, ${createdAt})`
  yield* upTo("0020_leaner_usage_writes")
  const unbilledQuery = `SELECT id FROM usage_events
    WHERE organization_id = 'org_1' AND customer_id = 'cus_a' AND invoice_id IS NULL AND billable > 0 ORDER BY id`
  return {
    rollups: yield* sql`SELECT customer_id, feature_id, bucket_start, value, records FROM usage_rollups
      ORDER BY customer_id, feature_id, bucket_start`.values,
    unbilled: (yield* sql.unsafe<{ id: string }>(unbilledQuery)).map((r) => r.id),
    plan: (yield* sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${unbilledQuery}`)).map((r) => r.detail),
    schema: (yield* sql<{ name: string; sql: string }>`SELECT name, sql FROM sqlite_master
      WHERE tbl_name IN ('usage_rollups', 'usage_events') AND sql IS NOT NULL ORDER BY name`).map((r) => r.name),
    rollupsTable: (yield* sql<{ sql: string }>`SELECT sql FROM sqlite_master WHERE name = 'usage_rollups'`)[0]!.sql
  }
})

test("0020 on SQLite: usage history survives the rollups' new table, and unbilled usage is read from the partial index", async () => {
  const result = await Effect.runPromise(
    migratedWithHistory.pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" })))
  )
  expect(result.rollups).toEqual([
    ["cus_a", "feat_1", 0, 5, 2],
    ["cus_a", "feat_1", 900_000, 7, 1],
    ["cus_a", "feat_2", 0, 1, 1],
    ["cus_b", "feat_1", 0, 3, 3]
  ])
  expect(result.rollupsTable).toContain("WITHOUT ROWID")
  // The covering index of 0005 is gone: the clustered table answers history's range reads itself.
  expect(result.schema).toEqual(["usage_events", "usage_events_customer", "usage_events_unbilled", "usage_rollups"])
  expect(result.unbilled).toEqual(["evt_2"])
  expect(result.plan.join("\n")).toContain("USING INDEX usage_events_unbilled")
})

test("0021 on SQLite: events keep one index of their own, the unbilled one, which unbilled usage still reads", async () => {
  const result = await Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* Migrator.make({})({ loader: Migrator.fromRecord(migrations) })
      const unbilled = `SELECT id, cost, billable FROM usage_events
        WHERE organization_id = 'org_1' AND customer_id = 'cus_a' AND invoice_id IS NULL AND billable > 0 ORDER BY id`
      return {
        indexes: (yield* sql<{ name: string }>`SELECT name FROM sqlite_master
          WHERE type = 'index' AND tbl_name = 'usage_events' AND sql IS NOT NULL ORDER BY name`).map((r) => r.name),
        plan: (yield* sql.unsafe<{ detail: string }>(`EXPLAIN QUERY PLAN ${unbilled}`)).map((r) => r.detail)
      }
    }).pipe(Effect.provide(SqliteClient.layer({ filename: ":memory:" })))
  )
  expect(result.indexes).toEqual(["usage_events_unbilled"])
  expect(result.plan.join("\n")).toContain("USING INDEX usage_events_unbilled")
})
