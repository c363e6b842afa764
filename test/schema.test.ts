import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * Ready to scale out (../shared/guide/architecture.md, invariant 1): every table's primary key and unique indexes lead with
 * `organization_id`, the distribution column a sharded PostgreSQL (Citus) would use. The exceptions are deliberate
 * and listed here: the organizations themselves (a reference table), the key-hash lookup that tells which
 * organization a request belongs to, the encryption key's check value, and the migrator's own bookkeeping.
 */
const EXCEPTIONS: Readonly<Record<string, string>> = {
  "organizations:pkey": "reference table: one row per organization",
  "organizations:slug": "reference table: slugs are unique across the deployment",
  "api_keys:key_hash": "a key is how the organization is learnt, so its lookup cannot be scoped by it",
  "effect_sql_migrations:pkey": "the migrator's bookkeeping",
  "encryption_key_check:pkey": "one row: the check value of the deployment's encryption key (a reference table)"
}

interface KeyIndex {
  readonly table: string
  readonly name: string
  readonly primary: boolean
  readonly columns: ReadonlyArray<string>
}

const pgKeys = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const rows = yield* sql<{ table: string; name: string; primary: boolean; columns: string }>`
    SELECT t.relname AS table, i.relname AS name, x.indisprimary AS primary,
      (SELECT string_agg(a.attname, ',' ORDER BY k.ord) FROM unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
        JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum) AS columns
    FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
    JOIN pg_namespace n ON n.oid = t.relnamespace
    WHERE n.nspname = current_schema() AND x.indisunique`
  return rows.map((r): KeyIndex => ({
    table: r.table,
    name: r.name,
    primary: r.primary,
    columns: r.columns.split(",")
  }))
})

const sqliteKeys = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  const tables = yield* sql<{
    name: string
  }>`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`
  const keys: Array<KeyIndex> = []
  for (const { name: table } of tables) {
    const info = yield* sql.unsafe<{ name: string; pk: number }>(`PRAGMA table_info("${table}")`)
    const pk = info
      .filter((c) => c.pk > 0)
      .sort((a, b) => a.pk - b.pk)
      .map((c) => c.name)
    if (pk.length > 0) keys.push({ table, name: `${table}_pkey`, primary: true, columns: pk })
    const indexes = yield* sql.unsafe<{ name: string; unique: number; origin: string }>(`PRAGMA index_list("${table}")`)
    for (const index of indexes) {
      if (index.unique !== 1 || index.origin === "pk") continue
      const columns = yield* sql.unsafe<{ name: string; seqno: number }>(`PRAGMA index_info("${index.name}")`)
      keys.push({
        table,
        name: index.name,
        primary: false,
        columns: [...columns].sort((a, b) => a.seqno - b.seqno).map((c) => c.name)
      })
    }
  }
  return keys
})

/** `table:pkey` or `table:<first column>` for the exceptions list. */
const exceptionKey = (k: KeyIndex) => `${k.table}:${k.primary ? "pkey" : k.columns[0]}`

for (const db of databases()) {
  describe(`schema keys lead with the organization (${db.name})`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(db.config)
    })
    afterAll(() => server.close())

    test("every primary key and unique index starts with organization_id, but for the listed exceptions", async () => {
      const keys = await server.run(db.name === "postgresql" ? pgKeys : sqliteKeys)
      const tables = new Set(keys.map((k) => k.table))
      // The check reads the real catalog: the tables the service depends on are all there.
      for (const table of ["customers", "balances", "usage_events", "payments", "checkouts", "invoices"]) {
        expect(tables.has(table)).toBe(true)
      }
      const offenders = keys
        .filter((k) => k.columns[0] !== "organization_id" && EXCEPTIONS[exceptionKey(k)] === undefined)
        .map((k) => `${k.table}.${k.name} (${k.columns.join(", ")})`)
      expect(offenders).toEqual([])
      // Every exception still exists: a stale list would hide a table that no longer needs one.
      const present = new Set(keys.filter((k) => k.columns[0] !== "organization_id").map(exceptionKey))
      for (const name of Object.keys(EXCEPTIONS)) expect(present.has(name)).toBe(true)
    })
  })
}
