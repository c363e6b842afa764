import { statements } from "./statements.ts"

// The customer portal (decisions.md §17). `plans.portal` marks the plans a customer may change to there. A portal link
// and the session it opens belong to one customer of one organization: both are found by the SHA-256 of their secret
// together with the organization (the token and the cookie carry both), and the session row names its customer, so
// nothing a session reaches can be another customer's. The link is used once; the session ends when the link would
// have (1 hour from creation). Every change made in the portal is one `portal_audit` row.
export default statements(
  `ALTER TABLE plans ADD COLUMN portal SMALLINT NOT NULL DEFAULT 0`,
  `CREATE TABLE portal_links (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    token_hash TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    return_url TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    PRIMARY KEY (organization_id, token_hash)
  )`,
  `CREATE TABLE portal_sessions (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    token_hash TEXT NOT NULL,
    csrf_token TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    return_url TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    ended_at BIGINT,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE UNIQUE INDEX portal_sessions_token ON portal_sessions (organization_id, token_hash)`,
  `CREATE TABLE portal_audit (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    action TEXT NOT NULL,
    object_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`
)
