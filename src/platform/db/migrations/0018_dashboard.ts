import { statements } from "./statements.ts"

// The dashboard (decisions.md §13). A session belongs to one organization and is found by the SHA-256 of its secret
// together with that organization (the cookie carries both), so its key leads with `organization_id` like every
// other table's. `key_id` is the API key it signed in with (null for a one-time link): the session ends when that key
// is revoked. A one-time link is stored the same way and used once. Every change made from the dashboard is one
// `dashboard_audit` row: organization, action, object, session.
export default statements(
  `CREATE TABLE dashboard_sessions (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    token_hash TEXT NOT NULL,
    csrf_token TEXT NOT NULL,
    key_id TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    ended_at BIGINT,
    PRIMARY KEY (organization_id, id)
  )`,
  `CREATE UNIQUE INDEX dashboard_sessions_token ON dashboard_sessions (organization_id, token_hash)`,
  `CREATE TABLE dashboard_links (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    token_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT,
    PRIMARY KEY (organization_id, token_hash)
  )`,
  `CREATE TABLE dashboard_audit (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    action TEXT NOT NULL,
    object_id TEXT NOT NULL,
    outcome TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id)
  )`
)
