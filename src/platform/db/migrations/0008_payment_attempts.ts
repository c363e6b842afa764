import { statements } from "./statements.ts"

// Money moves once (decisions.md §7). A `payments` row is now the attempt itself, written before the provider is
// called: `processing` until the provider's answer, webhook, a verify call or the reconciler settles it. Its
// reference is spent when claimed and never reused. At most one attempt is in flight per invoice or pending
// subscription (the partial unique index); a pack purchase is one attempt per request, or per Idempotency-Key.
// Saved methods are de-duplicated by a hash of the provider's token (the token itself is encrypted with a random
// IV); a method the provider refuses as gone is `unusable`.
export default statements(
  `UPDATE payments SET status = 'processing' WHERE status = 'pending'`,
  `ALTER TABLE payments ADD COLUMN quantity INTEGER NOT NULL DEFAULT 1`,
  `ALTER TABLE payments ADD COLUMN method_id TEXT`,
  `ALTER TABLE payments ADD COLUMN idempotency_key TEXT`,
  `ALTER TABLE payments ADD COLUMN request_hash TEXT`,
  `ALTER TABLE payments ADD COLUMN checked_at BIGINT`,
  `ALTER TABLE payments ADD COLUMN settled_at BIGINT`,
  `ALTER TABLE payments ADD COLUMN applied SMALLINT NOT NULL DEFAULT 1`,
  `ALTER TABLE payments ADD COLUMN amount_refunded TEXT NOT NULL DEFAULT '0'`,
  `ALTER TABLE payments ADD COLUMN disputed SMALLINT NOT NULL DEFAULT 0`,
  `CREATE UNIQUE INDEX payments_in_flight ON payments (organization_id, target_id)
    WHERE status = 'processing' AND purpose IN ('invoice', 'subscription')`,
  `CREATE UNIQUE INDEX payments_idempotency ON payments (organization_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL`,
  `CREATE INDEX payments_target ON payments (organization_id, target_id, status)`,
  `CREATE INDEX payments_processing ON payments (status, checked_at) WHERE status = 'processing'`,
  `ALTER TABLE checkouts ADD COLUMN idempotency_key TEXT`,
  `CREATE UNIQUE INDEX checkouts_idempotency ON checkouts (organization_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL`,
  `CREATE INDEX checkouts_target ON checkouts (organization_id, target_id, status)`,
  `CREATE INDEX checkouts_open ON checkouts (status, updated_at) WHERE status = 'open'`,
  `ALTER TABLE payment_methods ADD COLUMN token_hash TEXT`,
  `CREATE UNIQUE INDEX payment_methods_token ON payment_methods (organization_id, provider, token_hash)
    WHERE token_hash IS NOT NULL AND status = 'active'`
)
