import { statements } from "./statements.ts"

// A customer's discount (decisions.md §15): one coupon at a time, applied by `POST /v1/customers/{id}/discount`.
// `invoices_left` counts the invoices it still discounts (1 for `once`, N for `repeating`), NULL for `forever`; an
// invoice that takes a discount decrements it in its own transaction.
export default statements(
  `CREATE TABLE customer_discounts (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    customer_id TEXT NOT NULL,
    coupon_id TEXT NOT NULL,
    promotion_code_id TEXT,
    invoices_left INTEGER,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, customer_id)
  )`
)
