import { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { afterAll, expect, test } from "bun:test"
import { Effect, Layer } from "effect"
import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AppConfigTest } from "../config.ts"
import { DatabaseLive } from "./Database.ts"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { BACKSTOP_PAGES, walCheckpointer } from "./walCheckpoint.ts"

const dir = mkdtempSync(join(tmpdir(), "billing-wal-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** What the database file holds without its log: only what a checkpoint has copied back into it. */
const rowsInMainFile = (table: string) => {
  const copy = join(dir, `copy-${crypto.randomUUID()}.db`)
  copyFileSync(join(dir, "billing.db"), copy)
  const db = new Database(copy, { readonly: true })
  try {
    return Number((db.query(`SELECT COUNT(*) AS n FROM ${table}`).get() as { n: number }).n)
  } catch {
    return 0 // the table itself is not in the file yet
  } finally {
    db.close()
  }
}

test("the log is copied into the database file by the worker, not by the committing thread", async () => {
  const layer = DatabaseLive.pipe(Layer.provide(AppConfigTest({ dataDir: dir })))
  const program = Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const [setting] = yield* sql<{ walAutocheckpoint: number }>`PRAGMA wal_autocheckpoint`
    yield* sql`CREATE TABLE wal_probe (n INTEGER NOT NULL)`
    for (let i = 0; i < 50; i++) yield* sql`INSERT INTO wal_probe (n) VALUES (${i})`
    // 50 small commits are far below the committing connection's backstop: only the worker can have copied them.
    const deadline = Date.now() + 5_000
    let copied = rowsInMainFile("wal_probe")
    while (copied < 50 && Date.now() < deadline) {
      yield* Effect.sleep("20 millis")
      copied = rowsInMainFile("wal_probe")
    }
    return { setting: setting!.walAutocheckpoint, copied }
  })
  const { copied, setting } = await Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))
  expect(setting).toBe(BACKSTOP_PAGES)
  expect(copied).toBe(50)
  // Closed cleanly: the worker's last checkpoint and the connection's close leave no log behind.
  expect(existsSync(join(dir, "billing.db-wal")) ? statSync(join(dir, "billing.db-wal")).size : 0).toBe(0)
})

test("a worker that cannot open the database leaves checkpoints to the service's connection, at SQLite's default", async () => {
  const client = SqliteClient.layer({ filename: join(dir, "fallback.db") })
  const layer = walCheckpointer(join(dir, "missing", "billing.db")).pipe(Layer.provideMerge(client))
  const program = Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ wal_autocheckpoint: number }>`PRAGMA wal_autocheckpoint`
  )
  const [setting] = await Effect.runPromise(Effect.scoped(Effect.provide(program, layer)))
  expect(setting!.wal_autocheckpoint).toBe(1_000)
})
