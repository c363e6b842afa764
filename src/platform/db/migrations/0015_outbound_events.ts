import { statements } from "./statements.ts"

// Outbound events (decisions.md §11). `outbound_events` is the outbox: a change and its event commit in one
// transaction (one INSERT, nothing else read). `fanned_out` = 0 until the delivery worker has made one
// `webhook_deliveries` row per endpoint subscribed at that moment. `dedupe_key` makes an event that must be sent once
// (a subscription's past-due notice per renewal invoice; later a usage threshold per reset window) an
// `INSERT … ON CONFLICT DO NOTHING`. A delivery is due when `next_attempt_at` has passed: claiming it pushes
// `next_attempt_at` out by the lease, so a delivery whose process died is due again when the lease runs out.
// Every HTTP attempt is one `webhook_attempts` row. Secrets are encrypted like provider secrets.
export default statements(
  `CREATE TABLE outbound_events (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    type TEXT NOT NULL,
    customer_id TEXT,
    subject_id TEXT,
    dedupe_key TEXT,
    data TEXT NOT NULL,
    fanned_out SMALLINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE UNIQUE INDEX outbound_events_dedupe ON outbound_events (organization_id, dedupe_key)`,
  `CREATE INDEX outbound_events_type ON outbound_events (organization_id, type, id)`,
  `CREATE INDEX outbound_events_customer ON outbound_events (organization_id, customer_id, id)`,
  `CREATE INDEX outbound_events_unsent ON outbound_events (created_at) WHERE fanned_out = 0`,
  `CREATE TABLE webhook_endpoints (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    url TEXT NOT NULL,
    description TEXT,
    events TEXT,
    enabled SMALLINT NOT NULL DEFAULT 1,
    secret TEXT NOT NULL,
    previous_secret TEXT,
    previous_secret_expires_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE TABLE webhook_deliveries (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    lease_owner TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'`,
  `CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (organization_id, endpoint_id, status)`,
  `CREATE TABLE webhook_attempts (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    endpoint_id TEXT NOT NULL,
    event_id TEXT NOT NULL,
    event_type TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL,
    response_status INTEGER,
    response_body TEXT NOT NULL,
    duration_ms INTEGER NOT NULL,
    error TEXT,
    next_attempt_at BIGINT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE INDEX webhook_attempts_endpoint ON webhook_attempts (organization_id, endpoint_id, id)`
)
