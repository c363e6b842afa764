import { SqlClient } from "@effect/sql"
import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Option } from "effect"
import type pg from "pg"

/**
 * The `pg` pool under the PostgreSQL `SqlClient`, for the few statements of check/track (docs/decisions.md,
 * "Performance"): sent on the pool as they are, they skip @effect/sql's per-statement work (compiling the template,
 * a connection checkout through Effect), measured at ~55 µs of CPU of ~95 per statement. `traced`: traces are
 * exported, so each statement gets its client span (cheap when the request is not sampled). `pooled`: behind a
 * transaction-mode pooler (`DATABASE_POOLER`, or recognised at start-up), where a client's connection is another server
 * connection at every transaction, so a statement prepared under a name on one meets another client's (42P05) or is
 * missing (26000): statements are then sent unnamed (parsed and planned each time) instead of prepared once per
 * connection.
 */
export class PgPool extends Context.Tag("PgPool")<
  PgPool,
  { readonly pool: pg.Pool; readonly traced: boolean; readonly pooled: boolean }
>() {}

/**
 * One statement on a pooled connection; its rows. Fails as @effect/sql does, so a lost database is still a 503. With
 * a `name` (one per statement text) it is prepared once per connection: PostgreSQL then skips parsing it (not behind
 * a transaction pooler: `pooled`).
 */
export const poolQuery = <Row>(pool: PgPool["Type"], text: string, values: ReadonlyArray<unknown>, name?: string) =>
  pool.traced
    ? Effect.withSpan(statementOn<Row>(pool.pool, text, values, pool.pooled ? undefined : name), "sql.execute", SPAN)
    : statementOn<Row>(pool.pool, text, values, pool.pooled ? undefined : name)

/**
 * One statement of the current transaction, prepared once per connection under `name` (one per statement text;
 * unnamed behind a transaction pooler: `pooled`).
 * @effect/sql sends every statement unnamed, so PostgreSQL parsed and planned a batch's set-based write anew each
 * time, under the rows' locks (bench: ~24 µs of its CPU an item of a batch of 100). Outside a transaction, or on a
 * connection that is not a `pg` client (SQLite), it is `sql`'s statement as usual.
 */
export const transactionQuery = <Row extends object>(
  sql: SqlClient.SqlClient,
  pool: Option.Option<PgPool["Type"]>,
  text: string,
  values: ReadonlyArray<unknown>,
  name: string
): Effect.Effect<ReadonlyArray<Row>, SqlError> =>
  Effect.flatMap(Effect.serviceOption(SqlClient.TransactionConnection), (transaction) => {
    // The transaction's reserved connection keeps its `pg` client as `pg` (@effect/sql-pg's connection).
    const client = Option.isSome(transaction) ? (transaction.value[0] as { pg?: unknown }).pg : undefined
    if (Option.isNone(pool) || !isClient(client)) return sql.withoutTransforms().unsafe<Row>(text, values)
    const statement = statementOn<Row>(client, text, values, pool.value.pooled ? undefined : name)
    return pool.value.traced ? Effect.withSpan(statement, "sql.execute", SPAN) : statement
  })

const isClient = (value: unknown): value is pg.ClientBase =>
  typeof value === "object" && value !== null && typeof (value as { query?: unknown }).query === "function"

const SPAN = { kind: "client", attributes: { "db.system.name": "postgresql" }, captureStackTrace: false } as const

const statementOn = <Row>(
  pool: pg.Pool | pg.ClientBase,
  text: string,
  values: ReadonlyArray<unknown>,
  name: string | undefined
) =>
  Effect.async<ReadonlyArray<Row>, SqlError>((resume) => {
    const query = name === undefined ? text : { name, text }
    pool.query(query as string, values as Array<unknown>, (cause: Error | undefined, result: pg.QueryResult) => {
      resume(
        cause
          ? Effect.fail(new SqlError({ cause, message: "Failed to execute statement" }))
          : Effect.succeed(result.rows as ReadonlyArray<Row>)
      )
    })
  })
