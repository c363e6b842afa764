import { SqlClient } from "@effect/sql"
import { Effect } from "effect"

/**
 * Versioned schema, applied at start-up on both dialects. Conventions that keep one SQL text valid on
 * PostgreSQL and SQLite: instants are epoch-millisecond BIGINTs, money is a decimal string (TEXT),
 * JSON is TEXT, booleans are SMALLINT 0/1. Every key starts with organization_id (architecture.md,
 * invariant 1); api_keys.key_hash is the one global lookup, because a key is how we learn the org.
 */
const statements = (...ddl: ReadonlyArray<string>) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    for (const statement of ddl) yield* sql.unsafe(statement)
  })

export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_organizations_customers": statements(
    `CREATE TABLE organizations (
      id TEXT PRIMARY KEY,
      slug TEXT NOT NULL UNIQUE,
      name TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL
    )`,
    `CREATE TABLE api_keys (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      key_hash TEXT NOT NULL UNIQUE,
      display_prefix TEXT NOT NULL,
      environment TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      revoked_at BIGINT,
      PRIMARY KEY (organization_id, id)
    )`,
    `CREATE TABLE customers (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      external_id TEXT,
      email TEXT,
      email_lower TEXT,
      name TEXT,
      metadata TEXT NOT NULL DEFAULT '{}',
      overage_max_amount TEXT,
      overage_on_limit TEXT,
      overage_created_at BIGINT,
      overage_updated_at BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id)
    )`,
    `CREATE UNIQUE INDEX customers_external_id ON customers (organization_id, external_id)`,
    `CREATE UNIQUE INDEX customers_email ON customers (organization_id, email_lower)`,
    `CREATE INDEX customers_newest ON customers (organization_id, created_at DESC, id DESC)`
  )
}
