import { onPostgres } from "./statements.ts"

/**
 * PostgreSQL: an organization's context version (0019) moves once a transaction, not once a row. Its triggers are
 * deferred to the commit and ran once per row written: a batch creating 1,000 customers with 20 `autoEnable` plans
 * (21,000 rows) updated the one version row 21,000 times at its commit, each update a new version of that row that
 * the next had to walk past: 7.9 s of the commit (docs/decisions.md, "New customers in batches"). A row this
 * transaction has already written (its `xmin` is the transaction's id) needs no second move: readers see the version
 * and the rows together either way. The test is the upsert's own condition, so the row is still found through its
 * key. A version moved by a subtransaction has that one's id and is moved again (harmless); one rolled back with it
 * is not this transaction's row any more.
 *
 * SQLite: unchanged (plain triggers in the writing statement, each an update in place).
 */
const postgres = `CREATE OR REPLACE FUNCTION bump_context_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_org TEXT;
BEGIN
  IF TG_OP = 'DELETE' THEN v_org := OLD.organization_id; ELSE v_org := NEW.organization_id; END IF;
  INSERT INTO context_versions AS v (organization_id, version) VALUES (v_org, 1)
  ON CONFLICT (organization_id) DO UPDATE SET version = v.version + 1 WHERE v.xmin <> pg_current_xact_id()::xid;
  RETURN NULL;
END
$$`

export default onPostgres(postgres)
