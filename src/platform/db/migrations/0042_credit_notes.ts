import { statements } from "./statements.ts"

// Credit notes (decisions.md §16): one per refund or lost dispute of an invoice's payment, numbered
// `{invoicePrefix}-CN-000001` from the organization's own credit-note sequence. Issued where the payment's reversal is
// recorded (src/payments/settlement.ts), which counts each reversal once however often it is reported.
export default statements(
  `CREATE TABLE credit_notes (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    number TEXT NOT NULL,
    invoice_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    currency TEXT NOT NULL,
    amount TEXT NOT NULL,
    cause TEXT NOT NULL,
    reason TEXT,
    payment_reference TEXT NOT NULL,
    reversal_key TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id),
    UNIQUE (organization_id, number)
  )`,
  `CREATE INDEX credit_notes_invoice ON credit_notes (organization_id, invoice_id, created_at)`,
  `CREATE TABLE credit_note_sequences (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    next_number BIGINT NOT NULL,
    PRIMARY KEY (organization_id)
  )`
)
