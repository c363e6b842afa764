import type { SqlClient, SqlError } from "@effect/sql"
import { Effect } from "effect"

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)

/**
 * Rows a SQLite statement binds at most: SQLite's limit on variables is 32,766; a few hundred rows a statement cost
 * no more than the fewest statements (measured: 50 to 2,300 rows a statement within the noise) and keep the texts
 * that bun:sqlite caches few and short.
 */
const SQLITE_ROWS = 500
const SQLITE_VARIABLES = 32_766
/**
 * Rows a PostgreSQL statement carries: building one JSON text of 41,000 rows held the one thread for hundreds of
 * milliseconds, every other request of the process waiting.
 */
const PG_ROWS = 2_000

/**
 * Many rows of one table (camel-case keys, as `sql.insert` takes them) inserted by few statements (docs/decisions.md,
 * "New customers in batches"). PostgreSQL: a statement a few thousand rows, its rows one JSON parameter unpacked by
 * `json_populate_recordset` (binding tens of thousands of values one by one cost the driver more than the insert).
 * SQLite: multi-row `VALUES` with bound parameters, some hundreds of rows a statement (bun:sqlite binds natively;
 * `json_each` with `json_extract` a column parsed each row's JSON once per column: 2–3 times slower).
 * `ON CONFLICT DO NOTHING` when `skipConflicts`; answers how many rows were inserted.
 */
export const insertRows = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Record<string, unknown>>,
  skipConflicts: boolean
): Effect.Effect<number, SqlError.SqlError> => {
  if (rows.length === 0) return Effect.succeed(0)
  const keys = Object.keys(rows[0]!)
  const columns = keys.map(snake).join(", ")
  const onConflict = skipConflicts ? " ON CONFLICT DO NOTHING" : ""
  return sql.onDialectOrElse({
    pg: () => {
      const chunks: Array<ReadonlyArray<Record<string, unknown>>> = []
      for (let start = 0; start < rows.length; start += PG_ROWS) chunks.push(rows.slice(start, start + PG_ROWS))
      // A chunk's JSON built just before it is sent: the thread serves other requests while PostgreSQL inserts it.
      return Effect.reduce(chunks, 0, (inserted, chunk) =>
        Effect.suspend(() => {
          const json = JSON.stringify(chunk.map((row) => Object.fromEntries(keys.map((k) => [snake(k), row[k]]))))
          return sql<{ id: string }>`INSERT INTO ${sql(table)} (${sql.literal(columns)})
            SELECT ${sql.literal(columns)} FROM json_populate_recordset(NULL::${sql(table)}, ${json}::json)
            ${sql.literal(onConflict)} RETURNING id`
        }).pipe(Effect.map((rows) => inserted + rows.length))
      )
    },
    orElse: () => {
      const per = Math.max(1, Math.min(SQLITE_ROWS, Math.floor(SQLITE_VARIABLES / keys.length)))
      const row = `(${keys.map(() => "?").join(", ")})`
      const statement = (count: number) =>
        `INSERT INTO "${table}" (${columns}) VALUES ${Array(count).fill(row).join(", ")}${onConflict}`
      const full = statement(per)
      const chunks: Array<{ text: string; params: Array<unknown> }> = []
      for (let start = 0; start < rows.length; start += per) {
        const end = Math.min(start + per, rows.length)
        const params: Array<unknown> = []
        for (let r = start; r < end; r++) {
          const values = rows[r]!
          for (const k of keys) params.push(values[k])
        }
        chunks.push({ text: end - start === per ? full : statement(end - start), params })
      }
      // `changes()`: the rows the statement before it inserted (a conflict skipped is not one).
      return Effect.reduce(chunks, 0, (inserted, chunk) =>
        Effect.zipRight(
          sql.unsafe(chunk.text, chunk.params),
          Effect.map(sql.unsafe<{ n: number }>("SELECT changes() AS n"), ([r]) => inserted + Number(r!.n))
        )
      )
    }
  })
}
