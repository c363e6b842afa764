import { statements } from "./statements.ts"

// Who sells and who buys (decisions.md §16). The organization's billing profile is one row per organization (its
// legal name, address, tax id, invoice prefix and footer); a customer's billing details (address, tax ids, tax
// status) are one row per customer beside `customers`, so the customer row the hot path reads stays as it is.
// Addresses and tax ids are JSON text.
export default statements(
  `CREATE TABLE billing_profiles (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    legal_name TEXT,
    address TEXT,
    email TEXT,
    tax_id TEXT,
    invoice_prefix TEXT NOT NULL,
    footer TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id)
  )`,
  `CREATE TABLE customer_billing_details (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    customer_id TEXT NOT NULL,
    address TEXT,
    tax_ids TEXT NOT NULL DEFAULT '[]',
    tax_exempt TEXT NOT NULL DEFAULT 'none',
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, customer_id)
  )`
)
