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

/**
 * One statement on a pooled connection; its rows. Fails as @effect/sql does, so a lost database is still a 503. With
 * a `name` (one per statement text) it is prepared once per connection: PostgreSQL then skips parsing it.
 */
export const poolQuery = <Row>(pool: PgPool["Type"], text: string, values: ReadonlyArray<unknown>, name?: string) =>
  pool.traced
    ? Effect.withSpan(poolStatement<Row>(pool.pool, text, values, name), "sql.execute", {
        kind: "client",
        attributes: { "db.system.name": "postgresql" },
        captureStackTrace: false
      })
    : poolStatement<Row>(pool.pool, text, values, name)

const poolStatement = <Row>(pool: pg.Pool, text: string, values: ReadonlyArray<unknown>, name: string | undefined) =>
  Effect.async<ReadonlyArray<Row>, SqlError>((resume) => {
    const query = name === undefined ? text : { name, text }
    pool.query(query as string, values as Array<unknown>, (cause, result) => {
      resume(
        cause
          ? Effect.fail(new SqlError({ cause, message: "Failed to execute statement" }))
          : Effect.succeed(result.rows as ReadonlyArray<Row>)
      )
    })
  })
