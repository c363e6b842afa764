import { onPostgres } from "./statements.ts"

/**
 * The hot statements from their one source (src/entitlements/hotStatements.ts, docs/decisions.md "Performance"), as
 * that module generated them when this migration landed: test/hot-statements.test.ts fails when the module's text
 * and the latest migration's differ, so a change of columns there is a new migration with the new text here.
 *
 * 1. `entitlement_reads`: every read of a batch in one set-based statement (planned once per connection), a batch of
 *    one for a single read. It replaces, for this version's processes, `entitlement_context` (0006) and its loop
 *    `entitlement_contexts` (0007), which ran six statements per read (~250 µs of PostgreSQL CPU per read against
 *    ~50 here, measured with pgbench over 20-read batches); those stay for processes of the previous version during
 *    a deploy. Its customers carry only what resolution and the decision use (no name, metadata or audit instants).
 * 2. `commit_balances`: the same function as 0010's, its columns from the same source.
 */
export const ENTITLEMENT_READS_0014 = `CREATE OR REPLACE FUNCTION entitlement_reads(p_reads JSON)
RETURNS JSON LANGUAGE plpgsql STABLE AS $$
BEGIN
  RETURN (
    WITH r AS (
      SELECT x.ord, x.org, x.ref, x."refLower" AS ref_lower, x.feature, string_to_array(x.subjects, ',') AS subjects
      FROM ROWS FROM (json_to_recordset(p_reads) AS (org TEXT, ref TEXT, "refLower" TEXT, feature TEXT, subjects TEXT))
        WITH ORDINALITY AS x(org, ref, "refLower", feature, subjects, ord)
    ), m AS (
      SELECT DISTINCT r.ord, c.id FROM r CROSS JOIN LATERAL (
        SELECT id FROM customers WHERE organization_id = r.org AND id = r.ref
        UNION ALL SELECT id FROM customers WHERE organization_id = r.org AND external_id = r.ref
        UNION ALL SELECT id FROM customers WHERE organization_id = r.org AND email_lower = r.ref_lower
      ) c
    )
    SELECT json_agg(json_build_object(
      'catalogVersion', COALESCE((SELECT o.catalog_version FROM organizations o WHERE o.id = r.org), 0),
      'customers', COALESCE((SELECT json_agg(json_build_object('id', c.id, 'externalId', c.external_id, 'email', c.email, 'overageMaxAmount', c.overage_max_amount, 'overageOnLimit', c.overage_on_limit, 'createdAt', c.created_at))
              FROM m JOIN customers c ON c.organization_id = r.org AND c.id = m.id WHERE m.ord = r.ord), '[]'),
      'subscriptions', COALESCE((SELECT json_agg(json_build_object('organizationId', s.organization_id, 'id', s.id, 'customerId', s.customer_id, 'planId', s.plan_id, 'status', s.status, 'startedAt', s.started_at, 'currentPeriodStart', s.current_period_start, 'currentPeriodEnd', s.current_period_end, 'trialEndsAt', s.trial_ends_at, 'cancelAtPeriodEnd', s.cancel_at_period_end, 'canceledAt', s.canceled_at, 'graceEndsAt', s.grace_ends_at, 'createdAt', s.created_at, 'updatedAt', s.updated_at))
              FROM m JOIN subscriptions s ON s.organization_id = r.org AND s.customer_id = m.id AND s.status IN ('active', 'trialing', 'past_due')
              WHERE m.ord = r.ord), '[]'),
      'configs', COALESCE((SELECT json_agg(json_build_object('customerId', f.customer_id, 'overage', f.overage, 'maxOverageUnits', f.max_overage_units::TEXT))
              FROM m JOIN customer_feature_configs f ON f.organization_id = r.org AND f.customer_id = m.id
                AND f.feature_id = r.feature WHERE m.ord = r.ord), '[]'),
      'balances', COALESCE((SELECT json_agg(json_build_object('customerId', b.customer_id, 'subjectId', b.subject_id, 'windowStart', b.window_start, 'windowEnd', b.window_end, 'used', b.used::TEXT, 'overage', b.overage::TEXT, 'bonus', b.bonus::TEXT, 'addon', b.addon::TEXT, 'version', b.version))
              FROM m JOIN balances b ON b.organization_id = r.org AND b.customer_id = m.id AND b.subject_id = ANY (r.subjects)
              WHERE m.ord = r.ord), '[]')
    ) ORDER BY r.ord) FROM r
  );
END
$$`

export const COMMIT_BALANCES_0014 = `CREATE OR REPLACE FUNCTION commit_balances(p_items JSON)
RETURNS JSON LANGUAGE plpgsql AS $$
DECLARE
  item JSON;
  written BIGINT;
  versions JSON[] := '{}';
BEGIN
  FOR item IN SELECT value FROM json_array_elements(p_items) LOOP
    written := NULL;
    IF item->>'expected' IS NULL THEN
      INSERT INTO balances (organization_id, customer_id, subject_id, window_start, window_end, used, overage, bonus, addon, updated_at,
        version)
      VALUES (item->>'org', item->>'customer', item->>'subject', (item->>'windowStart')::BIGINT, (item->>'windowEnd')::BIGINT, (item->>'used')::BIGINT, (item->>'overage')::BIGINT, (item->>'bonus')::BIGINT, (item->>'addon')::BIGINT, (item->>'now')::BIGINT, 1)
      ON CONFLICT DO NOTHING
      RETURNING version INTO written;
    ELSE
      UPDATE balances SET window_start = (item->>'windowStart')::BIGINT, window_end = (item->>'windowEnd')::BIGINT, used = (item->>'used')::BIGINT, overage = (item->>'overage')::BIGINT, bonus = (item->>'bonus')::BIGINT, addon = (item->>'addon')::BIGINT,
        updated_at = (item->>'now')::BIGINT, version = version + 1
      WHERE organization_id = item->>'org' AND customer_id = item->>'customer' AND subject_id = item->>'subject'
        AND version = (item->>'expected')::BIGINT
      RETURNING version INTO written;
    END IF;
    IF written IS NOT NULL THEN
      INSERT INTO usage_events (organization_id, customer_id, subject_id, id, feature_id, entity_id, value, cost, from_plan, from_bonus, from_addon, overage, billable, plan_id, metadata, created_at)
      SELECT item->>'org', item->>'customer', item->>'subject', e.id, e.feature_id, e.entity_id, e.value, e.cost, e.from_plan, e.from_bonus, e.from_addon, e.overage, e.billable, e.plan_id, e.metadata, e.created_at
      FROM json_to_recordset(item->'events') AS e(id TEXT, feature_id TEXT, entity_id TEXT, value BIGINT, cost BIGINT, from_plan BIGINT, from_bonus BIGINT, from_addon BIGINT, overage BIGINT, billable BIGINT, plan_id TEXT, metadata TEXT, created_at BIGINT);
      INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
      SELECT item->>'org', item->>'customer', r.feature_id, r.bucket_start, r.value, r.records
      FROM json_to_recordset(item->'rollups') AS r(feature_id TEXT, bucket_start BIGINT, value BIGINT, records INTEGER)
      ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
      DO UPDATE SET value = LEAST(usage_rollups.value::NUMERIC + excluded.value, 9223372036854775807)::BIGINT, records = usage_rollups.records + excluded.records;
    END IF;
    versions := versions || to_json(written);
  END LOOP;
  RETURN array_to_json(versions);
END
$$`

export default onPostgres(ENTITLEMENT_READS_0014, COMMIT_BALANCES_0014)
