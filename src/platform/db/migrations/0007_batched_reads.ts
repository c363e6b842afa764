import { onPostgres } from "./statements.ts"

/** Several reads of `entitlement_context` in one call (concurrent requests, src/entitlements/Batcher.ts), in order. */
export const ENTITLEMENT_CONTEXTS_FUNCTION = `
CREATE FUNCTION entitlement_contexts(p_reads JSON)
RETURNS JSON LANGUAGE plpgsql STABLE AS $$
DECLARE
  r JSON;
  results JSON[] := '{}';
BEGIN
  FOR r IN SELECT value FROM json_array_elements(p_reads) LOOP
    results := results || entitlement_context(r->>'org', r->>'ref', r->>'refLower', r->>'feature', r->>'subjects');
  END LOOP;
  RETURN array_to_json(results);
END
$$`

// Concurrent reads batched into one call (src/entitlements/Batcher.ts); PostgreSQL only, as the read itself.
export default onPostgres(ENTITLEMENT_CONTEXTS_FUNCTION)
