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
  ),
  // Quantities (usage, balances, credits) are BIGINT micro-units (value × 10^6): exact on both databases and
  // summable in SQL. Prices and amounts are decimal strings in minor currency units.
  "0002_catalog_entitlements": statements(
    `CREATE TABLE features (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      slug TEXT NOT NULL,
      name TEXT NOT NULL,
      type TEXT NOT NULL,
      meter_type TEXT NOT NULL,
      unit TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, slug)
    )`,
    `CREATE TABLE credit_systems (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      slug TEXT NOT NULL,
      name TEXT NOT NULL,
      description TEXT,
      features TEXT NOT NULL DEFAULT '[]',
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, slug)
    )`,
    `CREATE TABLE credit_packs (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      slug TEXT NOT NULL,
      name TEXT NOT NULL,
      description TEXT,
      credits TEXT NOT NULL,
      price TEXT NOT NULL,
      currency TEXT NOT NULL,
      credit_system_id TEXT NOT NULL,
      provider TEXT,
      metadata TEXT NOT NULL DEFAULT '{}',
      is_active SMALLINT NOT NULL DEFAULT 1,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, slug)
    )`,
    `CREATE TABLE plans (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      slug TEXT NOT NULL,
      name TEXT NOT NULL,
      description TEXT,
      price TEXT NOT NULL,
      currency TEXT NOT NULL,
      interval TEXT NOT NULL,
      billing_type TEXT NOT NULL,
      auto_enable SMALLINT NOT NULL DEFAULT 0,
      is_addon SMALLINT NOT NULL DEFAULT 0,
      plan_group TEXT,
      trial_days INTEGER,
      provider TEXT,
      metadata TEXT NOT NULL DEFAULT '{}',
      features TEXT NOT NULL DEFAULT '[]',
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, slug)
    )`,
    `CREATE TABLE subscriptions (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      plan_id TEXT NOT NULL,
      status TEXT NOT NULL,
      started_at BIGINT NOT NULL,
      current_period_start BIGINT NOT NULL,
      current_period_end BIGINT,
      trial_ends_at BIGINT,
      cancel_at_period_end SMALLINT NOT NULL DEFAULT 0,
      canceled_at BIGINT,
      grace_ends_at BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id)
    )`,
    `CREATE INDEX subscriptions_customer ON subscriptions (organization_id, customer_id, status)`,
    `CREATE TABLE balances (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      customer_id TEXT NOT NULL,
      subject_id TEXT NOT NULL,
      window_start BIGINT NOT NULL,
      window_end BIGINT,
      used BIGINT NOT NULL DEFAULT 0,
      overage BIGINT NOT NULL DEFAULT 0,
      bonus BIGINT NOT NULL DEFAULT 0,
      addon BIGINT NOT NULL DEFAULT 0,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, customer_id, subject_id)
    )`,
    `CREATE TABLE usage_events (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      feature_id TEXT NOT NULL,
      subject_id TEXT NOT NULL,
      entity_id TEXT,
      value BIGINT NOT NULL,
      cost BIGINT NOT NULL,
      from_plan BIGINT NOT NULL,
      from_bonus BIGINT NOT NULL,
      from_addon BIGINT NOT NULL,
      overage BIGINT NOT NULL,
      billable BIGINT NOT NULL,
      metadata TEXT NOT NULL DEFAULT '{}',
      invoice_id TEXT,
      created_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id)
    )`,
    `CREATE INDEX usage_events_customer ON usage_events (organization_id, customer_id, created_at)`,
    `CREATE TABLE idempotency_keys (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      key TEXT NOT NULL,
      request_hash TEXT NOT NULL,
      response TEXT,
      created_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, key)
    )`,
    `CREATE TABLE customer_feature_configs (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      customer_id TEXT NOT NULL,
      feature_id TEXT NOT NULL,
      overage TEXT NOT NULL,
      max_overage_units BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, customer_id, feature_id)
    )`,
    `CREATE TABLE customer_spend (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      customer_id TEXT NOT NULL,
      period_start BIGINT NOT NULL,
      spent TEXT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, customer_id)
    )`,
    `CREATE TABLE entities (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      feature_id TEXT NOT NULL,
      entity TEXT NOT NULL,
      name TEXT,
      email TEXT,
      metadata TEXT NOT NULL DEFAULT '{}',
      status TEXT NOT NULL,
      remove_at BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, customer_id, feature_id, entity)
    )`,
    `CREATE TABLE notifications (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      kind TEXT NOT NULL,
      payload TEXT NOT NULL DEFAULT '{}',
      created_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id)
    )`
  ),
  // Usage history reads these, never raw events: the track transaction adds each event to its 15-minute bucket,
  // fine enough for every time zone's day boundaries (all offsets are multiples of 15 minutes).
  "0003_usage_rollups": statements(
    `CREATE TABLE usage_rollups (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      customer_id TEXT NOT NULL,
      feature_id TEXT NOT NULL,
      bucket_start BIGINT NOT NULL,
      value BIGINT NOT NULL,
      records INTEGER NOT NULL,
      PRIMARY KEY (organization_id, customer_id, feature_id, bucket_start)
    )`
  ),
  // Money in: provider accounts (secrets encrypted at rest), saved methods, checkouts and payments, invoices,
  // and the dedupe record of every webhook event.
  "0004_payments": statements(
    `CREATE TABLE provider_accounts (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      provider TEXT NOT NULL,
      secret_key TEXT NOT NULL,
      webhook_secret TEXT,
      base_url TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, provider)
    )`,
    `CREATE TABLE payment_methods (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      provider TEXT NOT NULL,
      token TEXT NOT NULL,
      provider_customer_id TEXT,
      email TEXT,
      type TEXT NOT NULL,
      brand TEXT,
      last4 TEXT,
      exp_month INTEGER,
      exp_year INTEGER,
      fingerprint TEXT,
      is_default SMALLINT NOT NULL DEFAULT 0,
      status TEXT NOT NULL,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id)
    )`,
    `CREATE INDEX payment_methods_customer ON payment_methods (organization_id, customer_id, status)`,
    `CREATE TABLE checkouts (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      reference TEXT NOT NULL,
      provider TEXT NOT NULL,
      purpose TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      target_id TEXT NOT NULL,
      quantity INTEGER NOT NULL DEFAULT 1,
      amount TEXT NOT NULL,
      currency TEXT NOT NULL,
      status TEXT NOT NULL,
      checkout_url TEXT,
      access_code TEXT,
      data TEXT NOT NULL DEFAULT '{}',
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, reference)
    )`,
    `CREATE TABLE payments (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      reference TEXT NOT NULL,
      provider TEXT NOT NULL,
      purpose TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      target_id TEXT NOT NULL,
      amount TEXT NOT NULL,
      currency TEXT NOT NULL,
      status TEXT NOT NULL,
      provider_reference TEXT,
      failure_message TEXT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, reference)
    )`,
    `CREATE TABLE invoices (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      id TEXT NOT NULL,
      number TEXT NOT NULL,
      customer_id TEXT NOT NULL,
      subscription_id TEXT,
      currency TEXT NOT NULL,
      status TEXT NOT NULL,
      lines TEXT NOT NULL DEFAULT '[]',
      subtotal TEXT NOT NULL,
      total TEXT NOT NULL,
      amount_paid TEXT NOT NULL,
      period_start BIGINT,
      period_end BIGINT,
      attempts INTEGER NOT NULL DEFAULT 0,
      next_attempt_at BIGINT,
      created_at BIGINT NOT NULL,
      updated_at BIGINT NOT NULL,
      paid_at BIGINT,
      PRIMARY KEY (organization_id, id),
      UNIQUE (organization_id, number)
    )`,
    `CREATE INDEX invoices_customer ON invoices (organization_id, customer_id, created_at)`,
    `CREATE TABLE invoice_sequences (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      next_number BIGINT NOT NULL,
      PRIMARY KEY (organization_id)
    )`,
    `CREATE INDEX usage_events_unbilled ON usage_events (organization_id, customer_id, invoice_id)`,
    // The plan whose terms priced the event: invoices rate usage by the terms it was recorded under.
    `ALTER TABLE usage_events ADD COLUMN plan_id TEXT`,
    `CREATE TABLE webhook_events (
      organization_id TEXT NOT NULL REFERENCES organizations (id),
      provider TEXT NOT NULL,
      event_key TEXT NOT NULL,
      event_type TEXT NOT NULL,
      received_at BIGINT NOT NULL,
      PRIMARY KEY (organization_id, provider, event_key)
    )`
  ),
  // History reads one customer's rollups by time: a covering index answers them without visiting the heap
  // (PostgreSQL's INCLUDE; on SQLite the same columns as index keys).
  "0005_usage_rollups_by_customer": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* sql.onDialectOrElse({
      pg: () =>
        sql.unsafe(`CREATE INDEX usage_rollups_customer_time ON usage_rollups
          (organization_id, customer_id, bucket_start) INCLUDE (feature_id, value, records)`),
      orElse: () =>
        sql.unsafe(`CREATE INDEX usage_rollups_customer_time ON usage_rollups
          (organization_id, customer_id, bucket_start, feature_id, value, records)`)
    })
  })
}
