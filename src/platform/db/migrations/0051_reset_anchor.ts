import { onPostgres, statements } from "./statements.ts"
import { Effect } from "effect"

/**
 * §14 "usage carries over" across an interval change too: the change restarts the billing anchor (`started_at`), and
 * the reset windows keep theirs in `reset_anchor` (null until an interval change: `started_at`). The hot read
 * carries it, so `entitlement_reads` is installed again as src/entitlements/hotStatements.ts generates it now.
 */
export const ENTITLEMENT_READS_0051 = `CREATE OR REPLACE FUNCTION entitlement_reads(p_reads JSON)
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
      'subscriptions', COALESCE((SELECT json_agg(json_build_object('organizationId', s.organization_id, 'id', s.id, 'customerId', s.customer_id, 'planId', s.plan_id, 'status', s.status, 'startedAt', s.started_at, 'currentPeriodStart', s.current_period_start, 'currentPeriodEnd', s.current_period_end, 'trialEndsAt', s.trial_ends_at, 'cancelAtPeriodEnd', s.cancel_at_period_end, 'canceledAt', s.canceled_at, 'graceEndsAt', s.grace_ends_at, 'createdAt', s.created_at, 'updatedAt', s.updated_at, 'scheduledPlanId', s.scheduled_plan_id, 'scheduledAt', s.scheduled_at, 'resetAnchor', s.reset_anchor))
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

export default Effect.andThen(
  statements(`ALTER TABLE subscriptions ADD COLUMN reset_anchor BIGINT`),
  onPostgres(ENTITLEMENT_READS_0051)
)
