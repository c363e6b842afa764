import { statements } from "./statements.ts"

// Plan changes (decisions.md §14). A subscription carries at most one change in waiting, on its own row, so the row
// lock that serialises changes also guards it: a scheduled one (`scheduled_plan_id`, switched by the renewal at
// `scheduled_at`) or a pending one (`pending_plan_id`, applied when its invoice `pending_invoice_id` is paid, voided
// at `pending_expires_at`). The customer's credit balance is one row per currency (money as a decimal string of
// whole minor units, changed only by a compare-and-set on its previous value), and every movement of it is a ledger
// row with its cause and the object that caused it. An invoice shows the balance it consumed as `credit_applied`.
export default statements(
  `ALTER TABLE subscriptions ADD COLUMN scheduled_plan_id TEXT`,
  `ALTER TABLE subscriptions ADD COLUMN scheduled_at BIGINT`,
  `ALTER TABLE subscriptions ADD COLUMN pending_plan_id TEXT`,
  `ALTER TABLE subscriptions ADD COLUMN pending_invoice_id TEXT`,
  `ALTER TABLE subscriptions ADD COLUMN pending_expires_at BIGINT`,
  `CREATE INDEX subscriptions_pending_expiry ON subscriptions (pending_expires_at) WHERE pending_expires_at IS NOT NULL`,
  `ALTER TABLE invoices ADD COLUMN credit_applied TEXT NOT NULL DEFAULT '0'`,
  `CREATE TABLE credit_balances (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    customer_id TEXT NOT NULL,
    currency TEXT NOT NULL,
    balance TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, customer_id, currency)
  )`,
  `CREATE TABLE credit_balance_ledger (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    currency TEXT NOT NULL,
    amount TEXT NOT NULL,
    balance_after TEXT NOT NULL,
    cause TEXT NOT NULL,
    subject_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE INDEX credit_balance_ledger_customer ON credit_balance_ledger (organization_id, customer_id, id)`
)
