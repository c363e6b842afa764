import { Migrator, SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Duration, Effect, Layer, Option, String as Str } from "effect"
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import pg from "pg"
import { AppConfig } from "../config.ts"
import { migrations } from "./migrations.ts"
import { walCheckpointer } from "./walCheckpoint.ts"

const INT8_OID = 20

/**
 * PostgreSQL returns BIGINT as strings. Ours hold epoch milliseconds and micro-unit quantities: numbers while
 * exact, bigints past 2^53 (so rows look as they do on SQLite, and nothing is silently rounded).
 */
const parseInt8 = (value: string): number | bigint => {
  const n = Number(value)
  return Number.isSafeInteger(n) ? n : BigInt(value)
}
const pgTypes: pg.CustomTypesConfig = {
  getTypeParser: ((oid: number, format?: "text" | "binary") =>
    oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as "text")) as pg.CustomTypesConfig["getTypeParser"]
}

export const runMigrations = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

const pgLayer = (url: Parameters<typeof PgClient.layer>[0]["url"]) =>
  PgClient.layer({
    url,
    transformQueryNames: Str.camelToSnake,
    transformResultNames: Str.snakeToCamel,
    types: pgTypes,
    maxConnections: 20,
    connectTimeout: Duration.seconds(5),
    idleTimeout: Duration.seconds(30)
  })

const sqliteLayer = (filename: string) =>
  Layer.effectDiscard(
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      if (filename !== ":memory:") {
        yield* sql.unsafe("PRAGMA journal_mode = WAL")
        yield* sql.unsafe("PRAGMA synchronous = NORMAL")
      }
      yield* sql.unsafe("PRAGMA busy_timeout = 5000")
      yield* sql.unsafe("PRAGMA foreign_keys = ON")
    })
  ).pipe(
    Layer.provideMerge(
      SqliteClient.layer({
        filename,
        transformQueryNames: Str.camelToSnake,
        transformResultNames: Str.snakeToCamel
      })
    )
  )

const migrated = <E, R>(client: Layer.Layer<SqlClient.SqlClient, E, R>) =>
  Layer.effectDiscard(runMigrations).pipe(Layer.provideMerge(client))

/** PostgreSQL when DATABASE_URL is set, else SQLite in DATA_DIR; migrated before anything uses it. */
export const DatabaseLive = Layer.unwrapEffect(
  Effect.map(AppConfig, (config) =>
    Option.match(config.databaseUrl, {
      onSome: (url) => migrated(pgLayer(url)),
      onNone: () => {
        if (config.dataDir === ":memory:") return migrated(sqliteLayer(":memory:"))
        mkdirSync(config.dataDir, { recursive: true })
        const filename = join(config.dataDir, "billing.db")
        return walCheckpointer(filename).pipe(Layer.provideMerge(migrated(sqliteLayer(filename))))
      }
    })
  )
)

/** The embedded database in memory: the fast layer tests swap in (same repositories, same SQL). */
export const DatabaseMemory = migrated(sqliteLayer(":memory:"))

export const databaseDialect = Effect.map(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({ pg: () => "postgresql" as const, orElse: () => "sqlite" as const })
)
