import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * DDL statements run in order. Conventions that keep one SQL text valid on PostgreSQL and SQLite: instants are
 * epoch-millisecond BIGINTs, money is a decimal string (TEXT), JSON is TEXT, booleans are SMALLINT 0/1. Every key
 * starts with organization_id (architecture.md, invariant 1); api_keys.key_hash is the one global lookup, because a
 * key is how we learn the organization.
 */
export const statements = (...ddl: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    for (const statement of ddl) yield* sql.unsafe(statement)
  })

/** The same DDL on PostgreSQL only (functions the hot path calls there; SQLite runs their statements inline). */
export const onPostgres = (...ddl: ReadonlyArray<string>) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({ pg: () => statements(...ddl), orElse: () => Effect.void })
  )
