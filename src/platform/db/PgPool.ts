import { SqlError } from "@effect/sql/SqlError"
import { Context, Effect } from "effect"
import type pg from "pg"

/**
 * The `pg` pool under the PostgreSQL `SqlClient`, for the few statements of check/track (docs/decisions.md,
 * "Performance"): sent on the pool as they are, they skip @effect/sql's per-statement work (compiling the template,
 * a span, a connection checkout through Effect), measured at ~55 µs of CPU of ~95 per statement. Provided only on
 * PostgreSQL and only while no traces are exported, so that a traced service keeps a span for every statement.
 */
export class PgPool extends Context.Tag("PgPool")<PgPool, pg.Pool>() {}

/** One statement on a pooled connection; its rows. Fails as @effect/sql does, so a lost database is still a 503. */
export const poolQuery = <Row>(pool: pg.Pool, text: string, values: ReadonlyArray<unknown>) =>
  Effect.async<ReadonlyArray<Row>, SqlError>((resume) => {
    pool.query(text, values as Array<unknown>, (cause, result) => {
      resume(
        cause
          ? Effect.fail(new SqlError({ cause, message: "Failed to execute statement" }))
          : Effect.succeed(result.rows as ReadonlyArray<Row>)
      )
    })
  })
