import { statements } from "./statements.ts"

// Usage history reads these, never raw events: the track transaction adds each event to its 15-minute bucket,
// fine enough for every time zone's day boundaries (all offsets are multiples of 15 minutes).
export default statements(
  `CREATE TABLE usage_rollups (
    organization_id TEXT NOT NULL REFERENCES organizations (id),
    customer_id TEXT NOT NULL,
    feature_id TEXT NOT NULL,
    bucket_start BIGINT NOT NULL,
    value BIGINT NOT NULL,
    records INTEGER NOT NULL,
    PRIMARY KEY (organization_id, customer_id, feature_id, bucket_start)
  )`
)
