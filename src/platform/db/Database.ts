import { Migrator, SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { SqlError } from "@effect/sql/SqlError"
import { Config, Duration, Effect, Layer, Logger, Option, Redacted, String as Str } from "effect"
import { mkdirSync } from "node:fs"
import { join } from "node:path"
import pg from "pg"
import { AppConfig, type DatabasePooler } from "../config.ts"
import { parseLogLevel } from "../logging.ts"
import { migrations } from "./migrations/index.ts"
import { PgPool } from "./PgPool.ts"
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
    oid === INT8_OID
      ? parseInt8
      : pg.types.getTypeParser(oid, format as "text")) as pg.CustomTypesConfig["getTypeParser"]
}

export const runMigrations = Migrator.make({})({ loader: Migrator.fromRecord(migrations) })

/**
 * The pool is ours (what `PgClient.layer` built from our options before, under our own application name) so that
 * check/track can also send their few statements on it directly (./PgPool.ts); everything else goes through the
 * `SqlClient` over it.
 */
const pgLayer = (url: Redacted.Redacted, tracing: boolean, pooler: DatabasePooler) => {
  const pool = Effect.acquireRelease(
    Effect.gen(function* () {
      const pool = new pg.Pool({
        connectionString: Redacted.value(url),
        connectionTimeoutMillis: 5_000,
        idleTimeoutMillis: 30_000,
        max: 20,
        application_name: "billing-service",
        types: pgTypes
      })
      // A connection lost while idle: the pool drops it and connects anew when asked; nothing to do here.
      pool.on("error", () => undefined)
      const pooled = yield* Effect.tryPromise({
        try: () => behindPooler(pool),
        catch: (cause) => new SqlError({ cause, message: "PgClient: Failed to connect" })
      }).pipe(
        Effect.timeoutFail({
          duration: Duration.seconds(5),
          onTimeout: () =>
            new SqlError({ cause: new Error("Connection timed out"), message: "PgClient: Connection timed out" })
        }),
        Effect.tapError(() => Effect.promise(() => pool.end()))
      )
      return { pool, pooled: pooler === "transaction" || (pooler === "auto" && pooled) }
    }),
    ({ pool }) => Effect.promise(() => pool.end()).pipe(Effect.interruptible, Effect.timeoutOption(1000))
  )
  return Layer.unwrapScoped(
    Effect.map(pool, ({ pool, pooled }) =>
      PgClient.layerFromPool({
        acquire: Effect.succeed(pool),
        transformQueryNames: Str.camelToSnake,
        transformResultNames: Str.snakeToCamel
      }).pipe(Layer.merge(Layer.succeed(PgPool, { pool, traced: tracing, pooled })))
    )
  )
}

/**
 * Whether a pooler stands between the pool and PostgreSQL (DATABASE_POOLER=auto): the backend a session was told at
 * start-up (its cancel key's process id) is not the one that runs its statements. PostgreSQL's own sessions agree;
 * PgBouncer hands out its own ids. Taken for a transaction-mode pooler, the safe assumption: no named statements.
 */
const behindPooler = async (pool: pg.Pool) => {
  const client = await pool.connect()
  try {
    const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")
    const told = (client as unknown as { processID?: number | null }).processID
    return typeof told === "number" && Number(rows[0]?.pid) !== told
  } finally {
    client.release()
  }
}

/**
 * How a file database syncs its write-ahead log (docs/decisions.md, "Performance"): `full` (the default) syncs it at
 * every commit, so an answered request survives a power loss or a kernel crash as it does on PostgreSQL
 * (`synchronous_commit = on`); the balance writer's draws of one step share one commit, hence one sync. `normal`
 * (`SQLITE_SYNCHRONOUS=normal`) syncs only at checkpoints: an answered request survives a crash of the process but may
 * be rolled back by a power loss, for a lower cost per commit (the bench prints it).
 */
export type SqliteSynchronous = "full" | "normal"
const sqliteSynchronous = Config.literal(
  "full",
  "normal"
)("SQLITE_SYNCHRONOUS").pipe(Config.withDefault("full" as const))

/**
 * A file database's page cache in MiB (`SQLITE_CACHE_MB`, 1–4096; SQLite's own default is 2). Pages are cached as
 * they are read, so a small database costs no more. Batches over 10,000 balances ran 6% (100 items) and 10% (1,000)
 * faster with 64 than with 2 (docs/decisions.md, "Batches and event time").
 */
const sqliteCacheMb = Config.integer("SQLITE_CACHE_MB").pipe(
  Config.withDefault(64),
  Config.validate({ message: "SQLITE_CACHE_MB must be 1 to 4096", validation: (mb) => mb >= 1 && mb <= 4096 })
)

const sqliteLayer = (filename: string, synchronous: SqliteSynchronous = "full", cacheMb = 64) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      if (filename !== ":memory:") {
        yield* sql.unsafe("PRAGMA journal_mode = WAL")
        yield* sql.unsafe(`PRAGMA synchronous = ${synchronous === "normal" ? "NORMAL" : "FULL"}`)
        // A negative size is in KiB.
        yield* sql.unsafe(`PRAGMA cache_size = ${-cacheMb * 1024}`)
        // A batch's multi-row statements would otherwise spill their statement journals (the pages they change, kept
        // so each can be undone alone) to temporary files: a second write of every page a commit logs.
        yield* sql.unsafe("PRAGMA temp_store = MEMORY")
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

/**
 * Migrations log what they find (0010 reports stored values out of range) as the service logs: JSON lines at
 * LOG_LEVEL. They run while the layers are built, before the service's own logger is in place.
 */
const migrated = <E, R>(client: Layer.Layer<SqlClient.SqlClient, E, R>, logLevel?: string) =>
  Layer.effectDiscard(
    logLevel === undefined
      ? runMigrations
      : runMigrations.pipe(Effect.provide(Layer.merge(Logger.json, Logger.minimumLogLevel(parseLogLevel(logLevel)))))
  ).pipe(Layer.provideMerge(client))

/** PostgreSQL when DATABASE_URL is set, else SQLite in DATA_DIR; migrated before anything uses it. */
export const DatabaseLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* AppConfig
    return yield* Option.match(config.databaseUrl, {
      onSome: (url) =>
        Effect.succeed(
          migrated(pgLayer(url, Option.isSome(config.otlpEndpoint), config.databasePooler), config.logLevel)
        ),
      onNone: () =>
        Effect.gen(function* () {
          if (config.dataDir === ":memory:") return migrated(sqliteLayer(":memory:"), config.logLevel)
          const synchronous = yield* sqliteSynchronous
          const cacheMb = yield* sqliteCacheMb
          mkdirSync(config.dataDir, { recursive: true })
          const filename = join(config.dataDir, "billing.db")
          return walCheckpointer(filename).pipe(
            Layer.provideMerge(migrated(sqliteLayer(filename, synchronous, cacheMb), config.logLevel))
          )
        })
    })
  })
)
