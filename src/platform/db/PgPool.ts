import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect } from "effect"
import type pg from "pg"

/**
 * The `pg` pool under the PostgreSQL `SqlClient`, for the few statements of check/track (docs/decisions.md,
 * "Performance"): sent on the pool as they are, they skip @effect/sql's per-statement work (compiling the template,
 * a connection checkout through Effect), measured at ~55 µs of CPU of ~95 per statement. `traced`: traces are
 * exported, so each statement gets its client span (cheap when the request is not sampled).
 */
export class PgPool extends Context.Tag("PgPool")<PgPool, { readonly pool: pg.Pool; readonly traced: boolean }>() {}

/** One statement on a pooled connection; its rows. Fails as @effect/sql does, so a lost database is still a 503. */
export const poolQuery = <Row>(pool: PgPool["Type"], text: string, values: ReadonlyArray<unknown>) =>
  pool.traced
    ? Effect.withSpan(poolStatement<Row>(pool.pool, text, values), "sql.execute", {
        kind: "client",
        attributes: { "db.system.name": "postgresql" },
        captureStackTrace: false
      })
    : poolStatement<Row>(pool.pool, text, values)

const poolStatement = <Row>(pool: pg.Pool, text: string, values: ReadonlyArray<unknown>) =>
  Effect.async<ReadonlyArray<Row>, SqlError>((resume) => {
    pool.query(text, values as Array<unknown>, (cause, result) => {
      resume(
        cause
          ? Effect.fail(new SqlError({ cause, message: "Failed to execute statement" }))
          : Effect.succeed(result.rows as ReadonlyArray<Row>)
      )
    })
  })
