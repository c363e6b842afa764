import { statements } from "./statements.ts"

/**
 * Every secret an endpoint retired in the last 24 h keeps signing (issue 37; docs/decisions.md, "Security pass"):
 * `retired_secrets` holds them as JSON, `[{"secret": <encrypted>, "expiresAt": <epoch ms>}]`, newest first. The
 * columns of 0015 (one previous secret) are still read for a rotation made before this migration, and emptied by the
 * next rotation, which moves their secret into the list.
 */
export default statements(`ALTER TABLE webhook_endpoints ADD COLUMN retired_secrets TEXT`)
