import { statements } from "./statements.ts"

// Taxes on invoices (decisions.md §16). Tax rates are catalog items synced by slug; `percentage` is a decimal
// string (0–100, up to 4 decimals). An invoice keeps what was computed when it was finalized: its discount and tax
// sums and, for an exempt or reverse-charge customer, the note saying why it carries none (each line's discounts and
// taxes ride in its JSON line).
export default statements(
  `CREATE TABLE tax_rates (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    slug TEXT NOT NULL,
    name TEXT NOT NULL,
    percentage TEXT NOT NULL,
    inclusive SMALLINT NOT NULL,
    country TEXT NOT NULL,
    state TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id),
    UNIQUE (organization_id, slug)
  )`,
  `ALTER TABLE invoices ADD COLUMN discount TEXT NOT NULL DEFAULT '0'`,
  `ALTER TABLE invoices ADD COLUMN tax TEXT NOT NULL DEFAULT '0'`,
  `ALTER TABLE invoices ADD COLUMN tax_note TEXT`
)
