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

/**
 * Everything `check`/`track` reads, as one JSON object (see `EntitlementContext`): the catalog version, the customers
 * the reference matches (by id, external id, lower-cased email: three index lookups), and for those customers their
 * live subscriptions (oldest first), their config of the feature and their balances of the given subjects.
 */
const ENTITLEMENT_CONTEXT_FUNCTION = `
CREATE FUNCTION entitlement_context(p_org TEXT, p_ref TEXT, p_ref_lower TEXT, p_feature TEXT, p_subjects TEXT)
RETURNS JSON LANGUAGE plpgsql STABLE AS $$
DECLARE
  ids TEXT[];
  subjects TEXT[] := string_to_array(p_subjects, ',');
  result JSON;
BEGIN
  SELECT array_agg(DISTINCT m.id) INTO ids FROM (
    SELECT id FROM customers WHERE organization_id = p_org AND id = p_ref
    UNION ALL SELECT id FROM customers WHERE organization_id = p_org AND external_id = p_ref
    UNION ALL SELECT id FROM customers WHERE organization_id = p_org AND email_lower = p_ref_lower
  ) m;
  SELECT json_build_object(
    'catalogVersion', (SELECT catalog_version FROM organizations WHERE id = p_org),
    'customers', (SELECT json_agg(json_build_object('organizationId', organization_id, 'id', id,
        'externalId', external_id, 'email', email, 'name', name, 'metadata', metadata,
        'overageMaxAmount', overage_max_amount, 'overageOnLimit', overage_on_limit,
        'overageCreatedAt', overage_created_at, 'overageUpdatedAt', overage_updated_at,
        'createdAt', created_at, 'updatedAt', updated_at))
      FROM customers WHERE organization_id = p_org AND id = ANY (ids)),
    'subscriptions', (SELECT json_agg(json_build_object('organizationId', organization_id, 'id', id,
        'customerId', customer_id, 'planId', plan_id, 'status', status, 'startedAt', started_at,
        'currentPeriodStart', current_period_start, 'currentPeriodEnd', current_period_end,
        'trialEndsAt', trial_ends_at, 'cancelAtPeriodEnd', cancel_at_period_end, 'canceledAt', canceled_at,
        'graceEndsAt', grace_ends_at, 'createdAt', created_at, 'updatedAt', updated_at) ORDER BY started_at, id)
      FROM subscriptions WHERE organization_id = p_org AND customer_id = ANY (ids)
        AND status IN ('active', 'trialing', 'past_due')),
    'configs', (SELECT json_agg(json_build_object('customerId', customer_id, 'overage', overage,
        'maxOverageUnits', max_overage_units::TEXT))
      FROM customer_feature_configs WHERE organization_id = p_org AND customer_id = ANY (ids)
        AND feature_id = p_feature),
    'balances', (SELECT json_agg(json_build_object('customerId', customer_id, 'subjectId', subject_id,
        'windowStart', window_start, 'windowEnd', window_end, 'used', used::TEXT, 'overage', overage::TEXT,
        'bonus', bonus::TEXT, 'addon', addon::TEXT, 'version', version))
      FROM balances WHERE organization_id = p_org AND customer_id = ANY (ids) AND subject_id = ANY (subjects))
  ) INTO result;
  RETURN result;
END
$$`

/** Several reads of `entitlement_context` in one call (concurrent requests, src/entitlements/Batcher.ts), in order. */
const ENTITLEMENT_CONTEXTS_FUNCTION = `
CREATE FUNCTION entitlement_contexts(p_reads JSON)
RETURNS JSON LANGUAGE plpgsql STABLE AS $$
DECLARE
  r JSON;
  results JSON[] := '{}';
BEGIN
  FOR r IN SELECT value FROM json_array_elements(p_reads) LOOP
    results := results || entitlement_context(r->>'org', r->>'ref', r->>'refLower', r->>'feature', r->>'subjects');
  END LOOP;
  RETURN array_to_json(results);
END
$$`

/**
 * One step of the balance writer (src/entitlements/BalanceWriter.ts): for each item, the balance's new state only if
 * it is still at `expected` (null: only if it does not exist yet), and then, only if that matched, its events and
 * their rollups. The new versions in item order (null where nothing was written). All in the caller's statement, so
 * the row locks last as long as the call.
 */
const COMMIT_BALANCES_FUNCTION = `
CREATE FUNCTION commit_balances(p_items JSON)
RETURNS JSON LANGUAGE plpgsql AS $$
DECLARE
  item JSON;
  written BIGINT;
  versions JSON[] := '{}';
BEGIN
  FOR item IN SELECT value FROM json_array_elements(p_items) LOOP
    written := NULL;
    IF item->>'expected' IS NULL THEN
      INSERT INTO balances (organization_id, customer_id, subject_id, window_start, window_end, used, overage, bonus,
        addon, updated_at, version)
      VALUES (item->>'org', item->>'customer', item->>'subject', (item->>'windowStart')::BIGINT,
        (item->>'windowEnd')::BIGINT, (item->>'used')::BIGINT, (item->>'overage')::BIGINT, (item->>'bonus')::BIGINT,
        (item->>'addon')::BIGINT, (item->>'now')::BIGINT, 1)
      ON CONFLICT DO NOTHING
      RETURNING version INTO written;
    ELSE
      UPDATE balances SET window_start = (item->>'windowStart')::BIGINT, window_end = (item->>'windowEnd')::BIGINT,
        used = (item->>'used')::BIGINT, overage = (item->>'overage')::BIGINT, bonus = (item->>'bonus')::BIGINT,
        addon = (item->>'addon')::BIGINT, updated_at = (item->>'now')::BIGINT, version = version + 1
      WHERE organization_id = item->>'org' AND customer_id = item->>'customer' AND subject_id = item->>'subject'
        AND version = (item->>'expected')::BIGINT
      RETURNING version INTO written;
    END IF;
    IF written IS NOT NULL THEN
      INSERT INTO usage_events (organization_id, id, customer_id, feature_id, subject_id, entity_id, value, cost,
        from_plan, from_bonus, from_addon, overage, billable, plan_id, metadata, created_at)
      SELECT item->>'org', e.id, item->>'customer', e.feature_id, item->>'subject', e.entity_id, e.value, e.cost,
        e.from_plan, e.from_bonus, e.from_addon, e.overage, e.billable, e.plan_id, e.metadata, e.created_at
      FROM json_to_recordset(item->'events') AS e(id TEXT, feature_id TEXT, entity_id TEXT, value BIGINT, cost BIGINT,
        from_plan BIGINT, from_bonus BIGINT, from_addon BIGINT, overage BIGINT, billable BIGINT, plan_id TEXT,
        metadata TEXT, created_at BIGINT);
      INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
      SELECT item->>'org', item->>'customer', r.feature_id, r.bucket_start, r.value, r.records
      FROM json_to_recordset(item->'rollups') AS r(feature_id TEXT, bucket_start BIGINT, value BIGINT, records INTEGER)
      ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
      DO UPDATE SET value = usage_rollups.value + excluded.value, records = usage_rollups.records + excluded.records;
    END IF;
    versions := versions || to_json(written);
  END LOOP;
  RETURN array_to_json(versions);
END
$$`

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
  }),
  // The hot path (issue 7). `catalog_version` is bumped by every sync that changes the catalog, so each process's
  // cached catalog is checked against it (in the same query that reads the customer) and stays correct across
  // processes. `balances.version` is bumped by every write of a balance: writers compare it instead of holding a row
  // lock across client round trips (a guarded UPDATE … WHERE version = the one the decision was made on).
  // On PostgreSQL the two statements of a check/track are functions: their plans are prepared once per connection
  // (planning the read inline cost more than running it), and the write holds the balance's row lock only while the
  // function runs. SQLite runs the same statements inline (src/entitlements/EntitlementsRepo.ts).
  "0006_hot_path": Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    yield* statements(
      `ALTER TABLE organizations ADD COLUMN catalog_version BIGINT NOT NULL DEFAULT 0`,
      `ALTER TABLE balances ADD COLUMN version BIGINT NOT NULL DEFAULT 0`
    )
    yield* sql.onDialectOrElse({
      pg: () => statements(ENTITLEMENT_CONTEXT_FUNCTION, COMMIT_BALANCES_FUNCTION),
      orElse: () => Effect.void
    })
  }),
  // Concurrent reads batched into one call (src/entitlements/Batcher.ts); PostgreSQL only, as the read itself.
  "0007_batched_reads": Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.onDialectOrElse({
      pg: () => statements(ENTITLEMENT_CONTEXTS_FUNCTION),
      orElse: () => Effect.void
    }))
}
