import type { SqlError } from "@effect/sql/SqlError"

/**
 * A unique index refused the insert: another request claimed the same thing first (PostgreSQL `23505`, SQLite
 * `SQLITE_CONSTRAINT_UNIQUE` / `SQLITE_CONSTRAINT_PRIMARYKEY`).
 */
export const isUniqueViolation = (error: SqlError): boolean => {
  const cause = error.cause as { readonly code?: unknown; readonly message?: unknown } | undefined
  const code = typeof cause?.code === "string" ? cause.code : ""
  if (code === "23505" || code.startsWith("SQLITE_CONSTRAINT")) return true
  return typeof cause?.message === "string" && /UNIQUE constraint failed/.test(cause.message)
}
