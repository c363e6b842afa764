import type { SqlClient, SqlError } from "@effect/sql"
import { Effect } from "effect"

const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)

/**
 * Many rows of one table (camel-case keys, as `sql.insert` takes them) inserted by one statement, its rows one JSON
 * parameter unpacked by the database (PostgreSQL's `json_populate_recordset`, SQLite's `json_each`): binding tens of
 * thousands of values one by one cost the drivers more than the insert. `ON CONFLICT DO NOTHING` when `skipConflicts`;
 * answers how many rows were inserted.
 */
export const insertRows = (
  sql: SqlClient.SqlClient,
  table: string,
  rows: ReadonlyArray<Record<string, unknown>>,
  skipConflicts: boolean
): Effect.Effect<number, SqlError.SqlError> => {
  if (rows.length === 0) return Effect.succeed(0)
  const keys = Object.keys(rows[0]!)
  const onConflict = sql.literal(skipConflicts ? "ON CONFLICT DO NOTHING" : "")
  return sql.onDialectOrElse({
    pg: () => {
      const columns = sql.literal(keys.map(snake).join(", "))
      const json = JSON.stringify(rows.map((row) => Object.fromEntries(keys.map((k) => [snake(k), row[k]]))))
      return sql<{ id: string }>`INSERT INTO ${sql(table)} (${columns})
        SELECT ${columns} FROM json_populate_recordset(NULL::${sql(table)}, ${json}::json) ${onConflict} RETURNING id`.pipe(
        Effect.map((inserted) => inserted.length)
      )
    },
    // The WHERE keeps SQLite from reading ON CONFLICT as the join's.
    orElse: () => {
      const columns = sql.literal(keys.map(snake).join(", "))
      const values = sql.literal(keys.map((k) => `json_extract(value, '$.${k}')`).join(", "))
      return sql<{ id: string }>`INSERT INTO ${sql(table)} (${columns})
        SELECT ${values} FROM json_each(${JSON.stringify(rows)}) WHERE true ${onConflict} RETURNING id`.pipe(
        Effect.map((inserted) => inserted.length)
      )
    }
  })
}
