import { onPostgres } from "./statements.ts"

/**
 * `commit_balances` from its one source (src/entitlements/hotStatements.ts) with the item's organization, customer
 * and subject read once per item into variables: 0014's read them from the item's JSON for every event row, which
 * parsed the whole item (every event of the balance) again per event, quadratic in the events of one balance in a
 * step (measured by bench/batch.ts: 16 ms for 100 events on one balance, 285–442 ms for 1,000). Same answers.
 */
export const COMMIT_BALANCES_0016 = `CREATE OR REPLACE FUNCTION commit_balances(p_items JSON)
RETURNS JSON LANGUAGE plpgsql AS $$
DECLARE
  item JSON;
  v_org TEXT;
  v_customer TEXT;
  v_subject TEXT;
  written BIGINT;
  versions JSON[] := '{}';
BEGIN
  FOR item IN SELECT value FROM json_array_elements(p_items) LOOP
    written := NULL;
    v_org := item->>'org';
    v_customer := item->>'customer';
    v_subject := item->>'subject';
    IF item->>'expected' IS NULL THEN
      INSERT INTO balances (organization_id, customer_id, subject_id, window_start, window_end, used, overage, bonus, addon, updated_at,
        version)
      VALUES (v_org, v_customer, v_subject, (item->>'windowStart')::BIGINT, (item->>'windowEnd')::BIGINT, (item->>'used')::BIGINT, (item->>'overage')::BIGINT, (item->>'bonus')::BIGINT, (item->>'addon')::BIGINT, (item->>'now')::BIGINT, 1)
      ON CONFLICT DO NOTHING
      RETURNING version INTO written;
    ELSE
      UPDATE balances SET window_start = (item->>'windowStart')::BIGINT, window_end = (item->>'windowEnd')::BIGINT, used = (item->>'used')::BIGINT, overage = (item->>'overage')::BIGINT, bonus = (item->>'bonus')::BIGINT, addon = (item->>'addon')::BIGINT,
        updated_at = (item->>'now')::BIGINT, version = version + 1
      WHERE organization_id = v_org AND customer_id = v_customer AND subject_id = v_subject
        AND version = (item->>'expected')::BIGINT
      RETURNING version INTO written;
    END IF;
    IF written IS NOT NULL THEN
      INSERT INTO usage_events (organization_id, customer_id, subject_id, id, feature_id, entity_id, value, cost, from_plan, from_bonus, from_addon, overage, billable, plan_id, metadata, created_at)
      SELECT v_org, v_customer, v_subject, e.id, e.feature_id, e.entity_id, e.value, e.cost, e.from_plan, e.from_bonus, e.from_addon, e.overage, e.billable, e.plan_id, e.metadata, e.created_at
      FROM json_to_recordset(item->'events') AS e(id TEXT, feature_id TEXT, entity_id TEXT, value BIGINT, cost BIGINT, from_plan BIGINT, from_bonus BIGINT, from_addon BIGINT, overage BIGINT, billable BIGINT, plan_id TEXT, metadata TEXT, created_at BIGINT);
      INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
      SELECT v_org, v_customer, r.feature_id, r.bucket_start, r.value, r.records
      FROM json_to_recordset(item->'rollups') AS r(feature_id TEXT, bucket_start BIGINT, value BIGINT, records INTEGER)
      ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
      DO UPDATE SET value = LEAST(usage_rollups.value::NUMERIC + excluded.value, 9223372036854775807)::BIGINT, records = usage_rollups.records + excluded.records;
    END IF;
    versions := versions || to_json(written);
  END LOOP;
  RETURN array_to_json(versions);
END
$$`

export default onPostgres(COMMIT_BALANCES_0016)
