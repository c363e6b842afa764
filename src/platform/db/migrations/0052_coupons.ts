import { statements } from "./statements.ts"

// Coupons and promotion codes (decisions.md §15), catalog items synced by slug and by code. `redemptions` counts
// what was redeemed; a redemption is one guarded UPDATE (`WHERE max_redemptions IS NULL OR redemptions <
// max_redemptions`), so the limit holds under concurrency on both databases. `code_key` is the lower-cased code:
// codes are case-insensitive and unique per organization. `plans` is a JSON array of plan slugs, NULL for all.
export default statements(
  `CREATE TABLE coupons (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    slug TEXT NOT NULL,
    name TEXT NOT NULL,
    percent_off TEXT,
    amount_off TEXT,
    currency TEXT,
    duration TEXT NOT NULL,
    duration_in_cycles INTEGER,
    max_redemptions BIGINT,
    redemptions BIGINT NOT NULL DEFAULT 0,
    redeem_by BIGINT,
    plans TEXT,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id),
    UNIQUE (organization_id, slug)
  )`,
  `CREATE TABLE promotion_codes (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    id TEXT NOT NULL,
    code TEXT NOT NULL,
    code_key TEXT NOT NULL,
    coupon_id TEXT NOT NULL,
    max_redemptions BIGINT,
    redemptions BIGINT NOT NULL DEFAULT 0,
    expires_at BIGINT,
    active SMALLINT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_id, id),
    UNIQUE (organization_id, code_key)
  )`
)
