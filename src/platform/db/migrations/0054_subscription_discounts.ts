import { statements } from "./statements.ts"

// A subscription's discount (decisions.md §15): the coupon given by `coupon` or `promotionCode` on `POST /v1/attach`,
// bound to the subscription it created or changed, one at a time. `invoices_left` counts the subscription's invoices
// it still discounts (NULL: forever), decremented in the invoice's own transaction. Its own table, not columns of
// `subscriptions`: the hot read hand-maps that row, and only invoices and the first charge read this one.
export default statements(
  `CREATE TABLE subscription_discounts (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    subscription_id TEXT NOT NULL,
    coupon_id TEXT NOT NULL,
    promotion_code_id TEXT,
    invoices_left INTEGER,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, subscription_id)
  )`
)
