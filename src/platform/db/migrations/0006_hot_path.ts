import { Effect } from "effect"
import { onPostgres, statements } from "./statements.ts"

/**
 * Everything `check`/`track` reads, as one JSON object (see `EntitlementContext`): the catalog version, the customers
 * the reference matches (by id, external id, lower-cased email: three index lookups), and for those customers their
 * live subscriptions (oldest first), their config of the feature and their balances of the given subjects.
 */
export const ENTITLEMENT_CONTEXT_FUNCTION = `
CREATE FUNCTION entitlement_context(p_org TEXT, p_ref TEXT, p_ref_lower TEXT, p_feature TEXT, p_subjects TEXT)
RETURNS JSON LANGUAGE plpgsql STABLE AS $$
DECLARE
  ids TEXT[];
  subjects TEXT[] := string_to_array(p_subjects, ',');
  result JSON;
BEGIN
  SELECT array_agg(DISTINCT m.id) INTO ids FROM (
    SELECT id FROM customers WHERE organization_id = p_org AND id = p_ref
    UNION ALL SELECT id FROM customers WHERE organization_id = p_org AND external_id = p_ref
    UNION ALL SELECT id FROM customers WHERE organization_id = p_org AND email_lower = p_ref_lower
  ) m;
  SELECT json_build_object(
    'catalogVersion', (SELECT catalog_version FROM organizations WHERE id = p_org),
    'customers', (SELECT json_agg(json_build_object('organizationId', organization_id, 'id', id,
        'externalId', external_id, 'email', email, 'name', name, 'metadata', metadata,
        'overageMaxAmount', overage_max_amount, 'overageOnLimit', overage_on_limit,
        'overageCreatedAt', overage_created_at, 'overageUpdatedAt', overage_updated_at,
        'createdAt', created_at, 'updatedAt', updated_at))
      FROM customers WHERE organization_id = p_org AND id = ANY (ids)),
    'subscriptions', (SELECT json_agg(json_build_object('organizationId', organization_id, 'id', id,
        'customerId', customer_id, 'planId', plan_id, 'status', status, 'startedAt', started_at,
        'currentPeriodStart', current_period_start, 'currentPeriodEnd', current_period_end,
        'trialEndsAt', trial_ends_at, 'cancelAtPeriodEnd', cancel_at_period_end, 'canceledAt', canceled_at,
        'graceEndsAt', grace_ends_at, 'createdAt', created_at, 'updatedAt', updated_at) ORDER BY started_at, id)
      FROM subscriptions WHERE organization_id = p_org AND customer_id = ANY (ids)
        AND status IN ('active', 'trialing', 'past_due')),
    'configs', (SELECT json_agg(json_build_object('customerId', customer_id, 'overage', overage,
        'maxOverageUnits', max_overage_units::TEXT))
      FROM customer_feature_configs WHERE organization_id = p_org AND customer_id = ANY (ids)
        AND feature_id = p_feature),
    'balances', (SELECT json_agg(json_build_object('customerId', customer_id, 'subjectId', subject_id,
        'windowStart', window_start, 'windowEnd', window_end, 'used', used::TEXT, 'overage', overage::TEXT,
        'bonus', bonus::TEXT, 'addon', addon::TEXT, 'version', version))
      FROM balances WHERE organization_id = p_org AND customer_id = ANY (ids) AND subject_id = ANY (subjects))
  ) INTO result;
  RETURN result;
END
$$`

/** Several reads of `entitlement_context` in one call (concurrent requests, src/entitlements/Batcher.ts), in order. */

/**
 * One step of the balance writer (src/entitlements/BalanceWriter.ts): for each item, the balance's new state only if
 * it is still at `expected` (null: only if it does not exist yet), and then, only if that matched, its events and
 * their rollups. The new versions in item order (null where nothing was written). All in the caller's statement, so
 * the row locks last as long as the call.
 */
export const COMMIT_BALANCES_FUNCTION = `
CREATE FUNCTION commit_balances(p_items JSON)
RETURNS JSON LANGUAGE plpgsql AS $$
DECLARE
  item JSON;
  written BIGINT;
  versions JSON[] := '{}';
BEGIN
  FOR item IN SELECT value FROM json_array_elements(p_items) LOOP
    written := NULL;
    IF item->>'expected' IS NULL THEN
      INSERT INTO balances (organization_id, customer_id, subject_id, window_start, window_end, used, overage, bonus,
        addon, updated_at, version)
      VALUES (item->>'org', item->>'customer', item->>'subject', (item->>'windowStart')::BIGINT,
        (item->>'windowEnd')::BIGINT, (item->>'used')::BIGINT, (item->>'overage')::BIGINT, (item->>'bonus')::BIGINT,
        (item->>'addon')::BIGINT, (item->>'now')::BIGINT, 1)
      ON CONFLICT DO NOTHING
      RETURNING version INTO written;
    ELSE
      UPDATE balances SET window_start = (item->>'windowStart')::BIGINT, window_end = (item->>'windowEnd')::BIGINT,
        used = (item->>'used')::BIGINT, overage = (item->>'overage')::BIGINT, bonus = (item->>'bonus')::BIGINT,
        addon = (item->>'addon')::BIGINT, updated_at = (item->>'now')::BIGINT, version = version + 1
      WHERE organization_id = item->>'org' AND customer_id = item->>'customer' AND subject_id = item->>'subject'
        AND version = (item->>'expected')::BIGINT
      RETURNING version INTO written;
    END IF;
    IF written IS NOT NULL THEN
      INSERT INTO usage_events (organization_id, id, customer_id, feature_id, subject_id, entity_id, value, cost,
        from_plan, from_bonus, from_addon, overage, billable, plan_id, metadata, created_at)
      SELECT item->>'org', e.id, item->>'customer', e.feature_id, item->>'subject', e.entity_id, e.value, e.cost,
        e.from_plan, e.from_bonus, e.from_addon, e.overage, e.billable, e.plan_id, e.metadata, e.created_at
      FROM json_to_recordset(item->'events') AS e(id TEXT, feature_id TEXT, entity_id TEXT, value BIGINT, cost BIGINT,
        from_plan BIGINT, from_bonus BIGINT, from_addon BIGINT, overage BIGINT, billable BIGINT, plan_id TEXT,
        metadata TEXT, created_at BIGINT);
      INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
      SELECT item->>'org', item->>'customer', r.feature_id, r.bucket_start, r.value, r.records
      FROM json_to_recordset(item->'rollups') AS r(feature_id TEXT, bucket_start BIGINT, value BIGINT, records INTEGER)
      ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
      DO UPDATE SET value = usage_rollups.value + excluded.value, records = usage_rollups.records + excluded.records;
    END IF;
    versions := versions || to_json(written);
  END LOOP;
  RETURN array_to_json(versions);
END
$$`

// The hot path (issue 7). `catalog_version` is bumped by every sync that changes the catalog, so each process's
// cached catalog is checked against it (in the same query that reads the customer) and stays correct across
// processes. `balances.version` is bumped by every write of a balance: writers compare it instead of holding a row
// lock across client round trips (a guarded UPDATE … WHERE version = the one the decision was made on).
// On PostgreSQL the two statements of a check/track are functions: their plans are prepared once per connection
// (planning the read inline cost more than running it), and the write holds the balance's row lock only while the
// function runs. SQLite runs the same statements inline (src/entitlements/EntitlementsRepo.ts).
export default Effect.andThen(
  statements(
    `ALTER TABLE organizations ADD COLUMN catalog_version BIGINT NOT NULL DEFAULT 0`,
    `ALTER TABLE balances ADD COLUMN version BIGINT NOT NULL DEFAULT 0`
  ),
  onPostgres(ENTITLEMENT_CONTEXT_FUNCTION, COMMIT_BALANCES_FUNCTION)
)
