import { statements } from "./statements.ts"

// A subscription's first payment is an invoice (docs/decisions.md "The first payment is an invoice (h18)"). The
// attempt carries the priced quote it charges (`invoice_quote`, JSON: lines, discounts, taxes, sums), so the invoice
// written when it settles has exactly the numbers that were charged; `invoice_id` names that invoice once written.
// A hosted page keeps its quote in `checkouts.data`. The unique index: one payment is the payment of one first
// invoice at most, and never written twice.
export default statements(
  `ALTER TABLE payments ADD COLUMN invoice_quote TEXT`,
  `ALTER TABLE payments ADD COLUMN invoice_id TEXT`,
  `CREATE UNIQUE INDEX payments_invoice ON payments (organization_id, invoice_id) WHERE invoice_id IS NOT NULL`
)
