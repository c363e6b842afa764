import { statements } from "./statements.ts"

/**
 * One row: a check value of the key this database's secrets are encrypted with (an HMAC of a fixed label under it,
 * never the key), so that a process started with another key refuses to start instead of failing on every secret it
 * reads (src/platform/encryptionCheck.ts). Global, not per organization: the key is the deployment's. The first
 * process that starts on the database writes it.
 */
export default statements(
  `CREATE TABLE encryption_key_check (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    check_value TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    rotated_at BIGINT
  )`
)
