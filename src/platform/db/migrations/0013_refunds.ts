import { statements } from "./statements.ts"

// Refunds and lost disputes (decisions.md §7). Each money-back the provider reports about a payment is one row,
// named by the provider's own id for it, so that reports of different refunds add up while the same one reported
// again (or Stripe's running total of a charge's refunds) does not. `payments.amount_refunded` is their sum, capped
// at the payment's amount.
export default statements(
  `CREATE TABLE payment_reversals (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    payment_reference TEXT NOT NULL,
    reversal_key TEXT NOT NULL,
    cause TEXT NOT NULL,
    amount TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, payment_reference, reversal_key)
  )`
)
