import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { statements } from "./statements.ts"

/**
 * A version per organization of what a batch's read of its customers returns (customers, their subscriptions, their
 * feature configs), moved by the database itself whenever one of those rows changes, whoever writes it: any process,
 * the CLI, an operator's SQL. A service keeps what it read of a customer while the version it read stays put
 * (src/entitlements/contextCache.ts). No foreign key: the row is written by triggers, and the organization's other
 * rows already say it exists.
 *
 * PostgreSQL: constraint triggers deferred to the commit, so the version row's lock is the last one a transaction
 * takes and is held only while it commits. A transaction holding it waits for nothing else, so it can close no cycle
 * of waits (no new deadlock), and writers of one organization's customers queue only for that moment. The version
 * moves in the same transaction as the rows: a reader sees both or neither.
 *
 * SQLite: one writer at a time; plain triggers in the writing statement.
 */
const CUSTOMER_COLUMNS = [
  "id",
  "external_id",
  "email",
  "email_lower",
  "overage_max_amount",
  "overage_on_limit",
  "created_at"
]
const TABLES = ["customers", "subscriptions", "customer_feature_configs"] as const

const postgres = [
  `CREATE TABLE context_versions (organization_id TEXT PRIMARY KEY, version BIGINT NOT NULL)`,
  `CREATE FUNCTION bump_context_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  v_org TEXT;
BEGIN
  IF TG_OP = 'DELETE' THEN v_org := OLD.organization_id; ELSE v_org := NEW.organization_id; END IF;
  INSERT INTO context_versions AS v (organization_id, version) VALUES (v_org, 1)
  ON CONFLICT (organization_id) DO UPDATE SET version = v.version + 1;
  RETURN NULL;
END
$$`,
  ...TABLES.flatMap((table) => {
    const changed =
      table === "customers"
        ? CUSTOMER_COLUMNS.map((c) => `OLD.${c} IS DISTINCT FROM NEW.${c}`).join(" OR ")
        : "OLD.* IS DISTINCT FROM NEW.*"
    const trigger = (name: string, events: string, when: string) =>
      `CREATE CONSTRAINT TRIGGER ${table}_context_${name} AFTER ${events} ON ${table}
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW ${when}EXECUTE FUNCTION bump_context_version()`
    return [trigger("written", "INSERT OR DELETE", ""), trigger("updated", "UPDATE", `WHEN (${changed}) `)]
  })
]

const sqlite = [
  `CREATE TABLE context_versions (organization_id TEXT PRIMARY KEY, version BIGINT NOT NULL)`,
  ...TABLES.flatMap((table) => {
    // Not `INSERT OR IGNORE`: inside a trigger, the writing statement's conflict handling replaces the trigger's.
    const bump = (row: "NEW" | "OLD") => `INSERT INTO context_versions SELECT ${row}.organization_id, 0
    WHERE NOT EXISTS (SELECT 1 FROM context_versions WHERE organization_id = ${row}.organization_id);
  UPDATE context_versions SET version = version + 1 WHERE organization_id = ${row}.organization_id;`
    const changed =
      table === "customers" ? ` WHEN ${CUSTOMER_COLUMNS.map((c) => `OLD.${c} IS NOT NEW.${c}`).join(" OR ")}` : ""
    return [
      `CREATE TRIGGER ${table}_context_inserted AFTER INSERT ON ${table} BEGIN
  ${bump("NEW")}
END`,
      `CREATE TRIGGER ${table}_context_updated AFTER UPDATE ON ${table}${changed} BEGIN
  ${bump("NEW")}
END`,
      `CREATE TRIGGER ${table}_context_deleted AFTER DELETE ON ${table} BEGIN
  ${bump("OLD")}
END`
    ]
  })
]

export default Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({ pg: () => statements(...postgres), orElse: () => statements(...sqlite) })
)
