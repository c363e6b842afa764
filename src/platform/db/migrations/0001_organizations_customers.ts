import { statements } from "./statements.ts"

export default statements(
  `CREATE TABLE organizations (
    id TEXT PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
  )`,
  `CREATE TABLE api_keys (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    key_hash TEXT NOT NULL UNIQUE,
    display_prefix TEXT NOT NULL,
    environment TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE TABLE customers (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    external_id TEXT,
    email TEXT,
    email_lower TEXT,
    name TEXT,
    metadata TEXT NOT NULL DEFAULT '{}',
    overage_max_amount TEXT,
    overage_on_limit TEXT,
    overage_created_at BIGINT,
    overage_updated_at BIGINT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE UNIQUE INDEX customers_external_id ON customers (organization_id, external_id)`,
  `CREATE UNIQUE INDEX customers_email ON customers (organization_id, email_lower)`,
  `CREATE INDEX customers_newest ON customers (organization_id, created_at DESC, id DESC)`
)
