/**
 * The hot statements of check/track, and their columns, declared once (docs/decisions.md, "Performance"):
 *
 * - the read of everything a decision needs (`EntitlementContext`): each part's columns are the fields of its schema
 *   below, and from them come PostgreSQL's function `entitlement_reads` (all the reads of a batch in one set-based
 *   statement), SQLite's inline statement, and the reader, which is the schema itself;
 * - the guarded write of a step of the balance writer (`commit_balances` on PostgreSQL, a few statements in one
 *   transaction on SQLite): the columns of its items, events and rollups, from which come the function's JSON record
 *   types, SQLite's statements and the TypeScript that writes the items.
 *
 * PostgreSQL's functions are installed by migrations, which are never edited: the text a migration installed is kept
 * in it as written, and test/hot-statements.test.ts fails while what this module generates differs from the latest
 * migration's text (a change here needs a new migration with the new text) or while a statement's JSON keys differ
 * from its reader's fields, on both databases.
 */
import { Schema, SchemaAST } from "effect"
import { COUNT_MAX_MICRO, INT64_MAX, storedCapMicro, storedMicro, storedMoney } from "../domain/bounds.ts"
import { SubscriptionStatus } from "../api/subscriptions.ts"
import type { SubscriptionRecord } from "../subscriptions/model.ts"

// ---------------------------------------------------------------- column types

/**
 * A BIGINT of micro-units: written as text by both databases (exact past 2^53, where a JSON number is not) and read
 * as a bigint; a value stored before the bounds is read as its bound, never as a defect (src/domain/bounds.ts).
 */
const Stored = Schema.Union(Schema.String, Schema.Number, Schema.BigIntFromSelf)
const Micro = Schema.transform(Stored, Schema.BigIntFromSelf, {
  strict: true,
  decode: (stored) => storedMicro(stored),
  encode: (micro) => micro.toString()
})
/** `maxOverageUnits`: micro-units as text, read as at most its bound. */
const CapMicro = Schema.transform(Stored, Schema.BigIntFromSelf, {
  strict: true,
  decode: (stored) => storedCapMicro(stored, COUNT_MAX_MICRO),
  encode: (micro) => micro.toString()
})
/** A decimal string of money; a cap stored before the bounds ("1e+100") is read as the bound. */
const Money = Schema.transform(Schema.Union(Schema.String, Schema.Number), Schema.String, {
  strict: true,
  decode: (stored) => storedMoney(String(stored)),
  encode: (money) => money
})
/** SMALLINT 0/1. */
const Flag = Schema.transform(Schema.Number, Schema.Boolean, {
  strict: true,
  decode: (n) => n === 1,
  encode: (b) => (b ? 1 : 0)
})
/** Epoch milliseconds, or any other BIGINT within 2^53: a JSON number. */
const Instant = Schema.Number
/** Columns the databases write as text (the SQL below casts them), nullable or not. */
const TEXT_COLUMNS: ReadonlySet<SchemaAST.AST> = new Set([Micro.ast, CapMicro.ast])
const writtenAsText = (schema: Schema.Schema.Any): boolean =>
  TEXT_COLUMNS.has(schema.ast) ||
  (SchemaAST.isUnion(schema.ast) && schema.ast.types.some((member) => TEXT_COLUMNS.has(member)))

// ---------------------------------------------------------------- the read: its parts' columns

/** A customer the reference matched: what resolution and the decision use of it. */
export const HotCustomer = Schema.Struct({
  id: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  overageMaxAmount: Schema.NullOr(Money),
  overageOnLimit: Schema.NullOr(Schema.Literal("block", "notify")),
  createdAt: Instant
})
export type HotCustomer = typeof HotCustomer.Type

/** A live subscription of one of them, whole (grants and resolution read all of it). */
export const HotSubscription = Schema.Struct({
  organizationId: Schema.String,
  id: Schema.String,
  customerId: Schema.String,
  planId: Schema.String,
  status: SubscriptionStatus,
  startedAt: Instant,
  currentPeriodStart: Instant,
  currentPeriodEnd: Schema.NullOr(Instant),
  trialEndsAt: Schema.NullOr(Instant),
  cancelAtPeriodEnd: Flag,
  canceledAt: Schema.NullOr(Instant),
  graceEndsAt: Schema.NullOr(Instant),
  createdAt: Instant,
  updatedAt: Instant,
  /** A plan change waiting for the period end: the state's `details` says so (decisions.md §14). */
  scheduledPlanId: Schema.NullOr(Schema.String),
  scheduledAt: Schema.NullOr(Instant),
  /** The reset windows' anchor when an interval change moved `startedAt` (decisions.md, "Plan changes"). */
  resetAnchor: Schema.NullOr(Instant)
})
/** The reader's type is the domain's record, field for field. */
const _subscription: SubscriptionRecord = {} as typeof HotSubscription.Type
void _subscription

/** A customer's override of the feature's overage terms. */
export const HotConfig = Schema.Struct({
  customerId: Schema.String,
  overage: Schema.Literal("block", "charge"),
  maxOverageUnits: Schema.NullOr(CapMicro)
})
export type HotConfig = typeof HotConfig.Type

/** A customer's balance of the feature or of one of its credit systems, at its `version`. */
export const HotBalance = Schema.Struct({
  customerId: Schema.String,
  subjectId: Schema.String,
  windowStart: Instant,
  windowEnd: Schema.NullOr(Instant),
  used: Micro,
  overage: Micro,
  bonus: Micro,
  addon: Micro,
  version: Instant
})
export type HotBalance = typeof HotBalance.Type
/** A balance row by itself (the balance writer reads one again when its version moved; locked writers read it). */
export const StoredBalanceRow = HotBalance.pipe(Schema.omit("customerId", "subjectId"))

/**
 * Everything `check`/`track` reads, in one statement: the organization's catalog version, the customers the
 * reference matches (by id, external id, lower-cased email: three index lookups), and of those customers their live
 * subscriptions, their config of the feature and their balances of the feature and of its credit systems.
 */
export const EntitlementContext = Schema.Struct({
  catalogVersion: Instant,
  customers: Schema.Array(HotCustomer),
  subscriptions: Schema.Array(HotSubscription),
  configs: Schema.Array(HotConfig),
  balances: Schema.Array(HotBalance)
})
export type EntitlementContext = typeof EntitlementContext.Type

/** One read as both databases take it: `subjects` are the feature's id and its credit systems' ids. */
export interface ContextRead {
  readonly org: string
  readonly ref: string
  readonly refLower: string
  readonly feature: string
  readonly subjects: ReadonlyArray<string>
}

/** The keys of a part, in order, and the table columns they come from (snake case of the key). */
export const keysOf = (struct: { readonly fields: Schema.Struct.Fields }): ReadonlyArray<string> =>
  Object.keys(struct.fields)
const snake = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)

type Dialect = "pg" | "sqlite"

/** `json_build_object` (PostgreSQL) / `json_object` (SQLite) of a part's columns of `alias`. */
const objectOf = (dialect: Dialect, struct: { readonly fields: Schema.Struct.Fields }, alias: string) => {
  const pairs = Object.entries(struct.fields).map(([key, schema]) => {
    const column = `${alias}.${snake(key)}`
    const value = writtenAsText(schema as Schema.Schema.Any)
      ? dialect === "pg"
        ? `${column}::TEXT`
        : `CAST(${column} AS TEXT)`
      : column
    return `'${key}', ${value}`
  })
  return `${dialect === "pg" ? "json_build_object" : "json_object"}(${pairs.join(", ")})`
}

const LIVE = `('active', 'trialing', 'past_due')`

/**
 * PostgreSQL: the reads of a batch (`ContextRead`s as a JSON array, subjects comma-separated), answered in order by
 * one set-based statement, planned once per connection (a PL/pgSQL function). One read is a batch of one.
 */
export const entitlementReadsFunction = () => {
  const indent = (text: string, by: string) => text.split("\n").join(`\n${by}`)
  const part = (name: string, body: string) => `'${name}', COALESCE((${body}), '[]')`
  return `CREATE OR REPLACE FUNCTION entitlement_reads(p_reads JSON)
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
      ${indent(
        part(
          "customers",
          `SELECT json_agg(${objectOf("pg", HotCustomer, "c")})
        FROM m JOIN customers c ON c.organization_id = r.org AND c.id = m.id WHERE m.ord = r.ord`
        ),
        "      "
      )},
      ${indent(
        part(
          "subscriptions",
          `SELECT json_agg(${objectOf("pg", HotSubscription, "s")})
        FROM m JOIN subscriptions s ON s.organization_id = r.org AND s.customer_id = m.id AND s.status IN ${LIVE}
        WHERE m.ord = r.ord`
        ),
        "      "
      )},
      ${indent(
        part(
          "configs",
          `SELECT json_agg(${objectOf("pg", HotConfig, "f")})
        FROM m JOIN customer_feature_configs f ON f.organization_id = r.org AND f.customer_id = m.id
          AND f.feature_id = r.feature WHERE m.ord = r.ord`
        ),
        "      "
      )},
      ${indent(
        part(
          "balances",
          `SELECT json_agg(${objectOf("pg", HotBalance, "b")})
        FROM m JOIN balances b ON b.organization_id = r.org AND b.customer_id = m.id AND b.subject_id = ANY (r.subjects)
        WHERE m.ord = r.ord`
        ),
        "      "
      )}
    ) ORDER BY r.ord) FROM r
  );
END
$$`
}

/** PostgreSQL: the statement that sends reads, and its one parameter. */
export const ENTITLEMENT_READS = "SELECT entitlement_reads($1) AS contexts"
export const readsParameter = (reads: ReadonlyArray<ContextRead>) =>
  JSON.stringify(reads.map((r) => ({ ...r, subjects: r.subjects.join(",") })))

/**
 * SQLite: one read inline (bun:sqlite keeps the statement prepared; every part is an index lookup), one JSON object
 * of the same keys. Parameters: `sqliteReadParameters`. (SQLite answers the customers' `OR` form with a scan, hence
 * the three lookups.)
 */
export const SQLITE_ENTITLEMENT_READ = `WITH c AS (
    SELECT * FROM customers WHERE organization_id = ?1 AND id = ?2
    UNION ALL SELECT * FROM customers WHERE organization_id = ?1 AND external_id = ?2
    UNION ALL SELECT * FROM customers WHERE organization_id = ?1 AND email_lower = ?3
  )
  SELECT json_object(
    'catalogVersion', COALESCE((SELECT catalog_version FROM organizations WHERE id = ?1), 0),
    'customers', json((SELECT json_group_array(json(${objectOf("sqlite", HotCustomer, "c")})) FROM c)),
    'subscriptions', json((SELECT json_group_array(json(${objectOf("sqlite", HotSubscription, "s")}))
      FROM subscriptions s WHERE s.organization_id = ?1 AND s.customer_id IN (SELECT id FROM c)
        AND s.status IN ${LIVE})),
    'configs', json((SELECT json_group_array(json(${objectOf("sqlite", HotConfig, "f")}))
      FROM customer_feature_configs f WHERE f.organization_id = ?1 AND f.customer_id IN (SELECT id FROM c)
        AND f.feature_id = ?4)),
    'balances', json((SELECT json_group_array(json(${objectOf("sqlite", HotBalance, "b")}))
      FROM balances b WHERE b.organization_id = ?1 AND b.customer_id IN (SELECT id FROM c)
        AND b.subject_id IN (SELECT value FROM json_each(?5))))
  ) AS context`
export const sqliteReadParameters = (r: ContextRead) => [
  r.org,
  r.ref,
  r.refLower,
  r.feature,
  JSON.stringify(r.subjects)
]

/**
 * The read of a batch's items naming one feature: every customer any of `refs` matches (by id, external id,
 * lower-cased email: three index lookups of the whole set, not three per reference), and of those customers what the
 * single read gives of one. One context for all of them; the caller picks each reference's customers (`matchesOf`).
 * Both databases, one statement, parameters `manyReadParameters`: on PostgreSQL a prepared statement (planned once
 * per connection, like `entitlement_reads`), on SQLite a statement bun:sqlite keeps prepared.
 */
export const contextReadMany = (dialect: Dialect) => (dialect === "pg" ? PG_CONTEXT_READ_MANY : sqliteContextReadMany())

/**
 * PostgreSQL: every lookup a nested loop over the references or the customers matched, each an index probe by the
 * whole key (`OFFSET 0` keeps the planner from flattening the lateral subqueries into joins). Planned over stale
 * statistics, the lists of an earlier form (`= ANY (ARRAY(…))`, chosen over `IN` because a set was hashed) were read
 * through an index by organization alone, filtering every customer of the organization (bench/new-customers.ts
 * prints the plan).
 */
const PG_CONTEXT_READ_MANY = (() => {
  const agg = (object: string) => `json_agg(${object})`
  const part = (body: string) => `COALESCE((${body}), '[]')`
  const each = (table: string, alias: string, where: string) =>
    `FROM m CROSS JOIN LATERAL (SELECT * FROM ${table} ${alias} WHERE ${alias}.organization_id = $1 AND ${where}
        OFFSET 0) ${alias}`
  return `WITH r AS (
    SELECT * FROM unnest(ARRAY(SELECT json_array_elements_text($2::json)),
      ARRAY(SELECT json_array_elements_text($3::json))) AS r(ref, ref_lower)
  ), m AS (
    SELECT DISTINCT c.id FROM r CROSS JOIN LATERAL (
      SELECT id FROM customers WHERE organization_id = $1 AND id = r.ref
      UNION ALL SELECT id FROM customers WHERE organization_id = $1 AND external_id = r.ref
      UNION ALL SELECT id FROM customers WHERE organization_id = $1 AND email_lower = r.ref_lower
      OFFSET 0
    ) c
  )
  SELECT json_build_object(
    'catalogVersion', COALESCE((SELECT catalog_version FROM organizations WHERE id = $1), 0),
    'customers', ${part(`SELECT ${agg(objectOf("pg", HotCustomer, "c"))}
      ${each("customers", "c", "c.id = m.id")}`)},
    'subscriptions', ${part(`SELECT ${agg(objectOf("pg", HotSubscription, "s"))}
      ${each("subscriptions", "s", `s.customer_id = m.id AND s.status IN ${LIVE}`)}`)},
    'configs', ${part(`SELECT ${agg(objectOf("pg", HotConfig, "f"))}
      ${each("customer_feature_configs", "f", "f.customer_id = m.id AND f.feature_id = $4")}`)},
    'balances', ${part(`SELECT ${agg(objectOf("pg", HotBalance, "b"))}
      ${each("balances", "b", "b.customer_id = m.id AND b.subject_id = ANY (ARRAY(SELECT json_array_elements_text($5::json)))")}`)}
  ) AS context`
})()

const sqliteContextReadMany = () => {
  const p = (n: number) => `?${n}`
  const list = (n: number) => `IN (SELECT value FROM json_each(${p(n)}))`
  const agg = (object: string) => `json_group_array(json(${object}))`
  const part = (body: string) => `json((${body}))`
  const ids = `IN (SELECT id FROM m)`
  // Each reference looked up by the index (CROSS JOIN keeps the references the outer loop; as a list, the planner
  // scanned the organization's customers for the external ids and emails).
  const match = (column: string, n: number) =>
    `SELECT c.id FROM json_each(${p(n)}) j CROSS JOIN customers c WHERE c.organization_id = ${p(1)} AND c.${column} = j.value`
  return `WITH m AS (
    ${match("id", 2)}
    UNION ${match("external_id", 2)}
    UNION ${match("email_lower", 3)}
  )
  SELECT json_object(
    'catalogVersion', COALESCE((SELECT catalog_version FROM organizations WHERE id = ${p(1)}), 0),
    'customers', ${part(`SELECT ${agg(objectOf("sqlite", HotCustomer, "c"))}
      FROM customers c WHERE c.organization_id = ${p(1)} AND c.id ${ids}`)},
    'subscriptions', ${part(`SELECT ${agg(objectOf("sqlite", HotSubscription, "s"))}
      FROM subscriptions s WHERE s.organization_id = ${p(1)} AND s.customer_id ${ids} AND s.status IN ${LIVE}`)},
    'configs', ${part(`SELECT ${agg(objectOf("sqlite", HotConfig, "f"))}
      FROM customer_feature_configs f WHERE f.organization_id = ${p(1)} AND f.customer_id ${ids}
        AND f.feature_id = ${p(4)}`)},
    'balances', ${part(`SELECT ${agg(objectOf("sqlite", HotBalance, "b"))}
      FROM balances b WHERE b.organization_id = ${p(1)} AND b.customer_id ${ids}
        AND b.subject_id ${list(5)}`)}
  ) AS context`
}
/**
 * The organization's catalog and context versions (migration 0019), one row: what a batch's kept reads are checked
 * against (src/entitlements/contextCache.ts). Parameter: the organization.
 */
export const contextVersions = (dialect: Dialect) => {
  const org = dialect === "pg" ? "$1" : "?1"
  return `SELECT COALESCE((SELECT catalog_version FROM organizations WHERE id = ${org}), 0) AS "catalogVersion",
    COALESCE((SELECT version FROM context_versions WHERE organization_id = ${org}), 0) AS "contextVersion"`
}

/**
 * PostgreSQL, a batch's `lockBalances`: the missing rows created, then every row locked in byte order (one order for
 * every batch and writer step, so that locks never wait in a cycle) and read as the hot read reads balances. Each is
 * one text whatever the batch's size (a list of row values in the text was planned anew for every batch, ~4 ms for
 * 100 rows). The insert takes the rows as one JSON parameter; the lock, which every batch sends, two arrays of the
 * rows' customers and subjects (half of the JSON form's PostgreSQL CPU: ~7 µs a row of 100). The lists are subqueries
 * (`ARRAY(SELECT …)`), which make index lookups whatever their length: an array parameter the planner sees the size
 * of, it scanned the organization's balances for 1,000 rows (and as a set, it may hash it and scan them too).
 */
export const LOCK_BALANCES_INSERT_PG = `INSERT INTO balances (organization_id, customer_id, subject_id, window_start,
    window_end, used, overage, bonus, addon, updated_at)
  SELECT $1, x.c, x.s, x.ws, x.we, 0, 0, 0, 0, $3 FROM json_to_recordset($2::json) AS x(c TEXT, s TEXT, ws BIGINT, we BIGINT)
  ON CONFLICT DO NOTHING`
export const LOCK_BALANCES_SELECT_PG = `SELECT COALESCE(json_agg(${objectOf("pg", HotBalance, "b")}
    ORDER BY b.customer_id COLLATE "C", b.subject_id COLLATE "C"), '[]') AS balances
  FROM (
    SELECT * FROM balances
    WHERE organization_id = $1 AND customer_id = ANY (ARRAY(SELECT unnest($2::text[])))
      AND subject_id = ANY (ARRAY(SELECT DISTINCT unnest($3::text[])))
      AND (customer_id, subject_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))
    ORDER BY customer_id COLLATE "C", subject_id COLLATE "C" FOR UPDATE
  ) b`
/**
 * A guarded batch's read (src/entitlements/guardedBatch.ts), without a lock: of the balances named, those whose
 * version is not the one given (`$4`, -1 for a balance the service knows nothing of), as `LOCK_BALANCES_SELECT_PG`
 * reads them. What the service last wrote is usually still there: then only the lookups, and nothing to send back.
 */
export const READ_CHANGED_BALANCES_PG = `SELECT COALESCE(json_agg(${objectOf("pg", HotBalance, "b")}), '[]') AS balances
  FROM balances b
  WHERE b.organization_id = $1 AND b.customer_id = ANY (ARRAY(SELECT unnest($2::text[])))
    AND b.subject_id = ANY (ARRAY(SELECT DISTINCT unnest($3::text[])))
    AND (b.customer_id, b.subject_id) IN (SELECT * FROM unnest($2::text[], $3::text[]))
    AND (b.customer_id, b.subject_id, b.version) NOT IN (SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[]))`

/**
 * SQLite, a batch's `lockBalances` (one writer at a time: nothing to lock, only to read and create): the rows of the
 * pairs `[customer, subject]` of one JSON parameter, each by its key, read as the hot read reads balances; the missing
 * ones created first from JSON rows (`c`, `s`, `ws`, `we`) only when some are missing. Each is one text whatever the
 * batch's size, prepared once (the row-value lists they replace were compiled anew for each size, and their
 * parameters named and transformed one by one: ~16 µs an item).
 */
export const LOCK_BALANCES_SELECT_SQLITE = `SELECT COALESCE(json_group_array(json(${objectOf("sqlite", HotBalance, "b")})), '[]')
    AS balances
  FROM (
    SELECT b.* FROM json_each(?2) j CROSS JOIN balances b
    WHERE b.organization_id = ?1 AND b.customer_id = json_extract(j.value, '$[0]')
      AND b.subject_id = json_extract(j.value, '$[1]')
  ) b`
export const LOCK_BALANCES_INSERT_SQLITE = `INSERT INTO balances (organization_id, customer_id, subject_id, window_start,
    window_end, used, overage, bonus, addon, updated_at)
  SELECT ?1, json_extract(j.value, '$.c'), json_extract(j.value, '$.s'), json_extract(j.value, '$.ws'),
    json_extract(j.value, '$.we'), 0, 0, 0, 0, ?3
  FROM json_each(?2) j WHERE true
  ON CONFLICT DO NOTHING`

/** One read of many references of one feature, as both databases take it. */
export interface ManyRead {
  readonly org: string
  readonly refs: ReadonlyArray<string>
  readonly feature: string
  readonly subjects: ReadonlyArray<string>
}
export const manyReadParameters = (r: ManyRead) => [
  r.org,
  JSON.stringify(r.refs),
  JSON.stringify(r.refs.map((ref) => ref.toLowerCase())),
  r.feature,
  JSON.stringify(r.subjects)
]

// ---------------------------------------------------------------- the write: its items' columns

/** A recorded draw as `usage_events` stores it; quantities in micro-units. */
export interface UsageEventRow {
  readonly organizationId: string
  readonly id: string
  readonly customerId: string
  readonly featureId: string
  readonly subjectId: string
  readonly entityId: string | null
  readonly value: bigint
  readonly cost: bigint
  readonly fromPlan: bigint
  readonly fromBonus: bigint
  readonly fromAddon: bigint
  readonly overage: bigint
  readonly billable: bigint
  /** The plan whose terms apply to the billable part; null when nothing is billable. */
  readonly planId: string | null
  readonly metadata: Record<string, unknown>
  readonly createdAt: number
}

type SqlType = "TEXT" | "BIGINT" | "INTEGER"

/** A column's value as a step holds it: each database's driver takes BIGINTs of micro-units its own way. */
type ColumnValue = bigint | string | number | null
/** PostgreSQL's: BIGINTs of micro-units as decimal text (exact at any size), in the item's JSON and in arrays. */
const pgValue = (v: ColumnValue): string | number | null => (typeof v === "bigint" ? v.toString() : v)

/** An event's metadata as stored; most events carry none, whose text needs no serialiser. */
const metadataText = (metadata: Record<string, unknown>) => {
  for (const _ in metadata) return JSON.stringify(metadata)
  return "{}"
}

/**
 * The columns of an event as a step writes it (beyond its organization, customer and subject, which are its item's):
 * the column, its SQL type in the function's record, and its value (`pgValue`, `sqliteValue` convert it).
 */
export const EVENT_COLUMNS: ReadonlyArray<readonly [string, SqlType, (e: UsageEventRow) => ColumnValue]> = [
  ["id", "TEXT", (e) => e.id],
  ["feature_id", "TEXT", (e) => e.featureId],
  ["entity_id", "TEXT", (e) => e.entityId],
  ["value", "BIGINT", (e) => e.value],
  ["cost", "BIGINT", (e) => e.cost],
  ["from_plan", "BIGINT", (e) => e.fromPlan],
  ["from_bonus", "BIGINT", (e) => e.fromBonus],
  ["from_addon", "BIGINT", (e) => e.fromAddon],
  ["overage", "BIGINT", (e) => e.overage],
  ["billable", "BIGINT", (e) => e.billable],
  ["plan_id", "TEXT", (e) => e.planId],
  ["metadata", "TEXT", (e) => metadataText(e.metadata)],
  ["created_at", "BIGINT", (e) => e.createdAt]
]

/** A usage rollup bucket's increment: the sum of a step's events of one feature in one 15-minute bucket. */
export interface RollupIncrement {
  readonly featureId: string
  readonly bucketStart: number
  readonly value: bigint
  readonly records: number
}
export const ROLLUP_COLUMNS: ReadonlyArray<readonly [string, SqlType, (r: RollupIncrement) => ColumnValue]> = [
  ["feature_id", "TEXT", (r) => r.featureId],
  ["bucket_start", "BIGINT", (r) => r.bucketStart],
  ["value", "BIGINT", (r) => r.value],
  ["records", "INTEGER", (r) => r.records]
]

/** One balance of a step: its new state, written only if still at `expected` (null: only if it does not exist). */
export interface CommitItem {
  readonly org: string
  readonly customer: string
  readonly subject: string
  readonly expected: number | null
  readonly windowStart: number
  readonly windowEnd: number | null
  readonly used: bigint
  readonly overage: bigint
  readonly bonus: bigint
  readonly addon: bigint
  readonly now: number
  readonly events: ReadonlyArray<UsageEventRow>
  readonly rollups: ReadonlyArray<RollupIncrement>
  /** A guarded write's (`COMMIT_GUARDED`): the state decided over, which the balance must still be. */
  readonly base?: Pick<CommitItem, (typeof BALANCE_SET)[number]>
}

/** An item as the function reads it: keys of `CommitItem`, quantities as text, events and rollups as records. */
export const itemJson = (c: CommitItem) => ({
  org: c.org,
  customer: c.customer,
  subject: c.subject,
  expected: c.expected,
  windowStart: c.windowStart,
  windowEnd: c.windowEnd,
  used: c.used.toString(),
  overage: c.overage.toString(),
  bonus: c.bonus.toString(),
  addon: c.addon.toString(),
  now: c.now,
  events: c.events.map((e) =>
    Object.fromEntries(EVENT_COLUMNS.map(([column, , value]) => [column, pgValue(value(e))]))
  ),
  rollups: c.rollups.map((r) =>
    Object.fromEntries(ROLLUP_COLUMNS.map(([column, , value]) => [column, pgValue(value(r))]))
  )
})

/** The balance columns an item sets, with the item key each comes from (snake case of the key). */
const BALANCE_SET = ["windowStart", "windowEnd", "used", "overage", "bonus", "addon"] as const

/** A 15-minute rollup adds its events' values held at BIGINT's maximum instead of overflowing (migration 0010). */
export const ROLLUP_SUM_PG = `LEAST(usage_rollups.value::NUMERIC + excluded.value, ${INT64_MAX})::BIGINT`
export const ROLLUP_SUM_SQLITE = `MIN(usage_rollups.value + excluded.value, ${INT64_MAX})`

/**
 * PostgreSQL: one step of the balance writer (src/entitlements/BalanceWriter.ts): for each item, the balance's new
 * state only if it is still at `expected` (null: only if it does not exist yet), and then, only if that matched, its
 * events and their rollups. The new versions in item order (null where nothing was written). All in the caller's
 * statement, so the row locks last as long as the call.
 */
export const commitBalancesFunction = () => {
  const record = (columns: ReadonlyArray<readonly [string, SqlType, unknown]>) =>
    columns.map(([column, type]) => `${column} ${type}`).join(", ")
  const eventColumns = EVENT_COLUMNS.map(([column]) => column)
  const cast = (key: string) => `(item->>'${key}')::BIGINT`
  // The item's keys are read once into variables: `item->>'org'` in a row of the events' SELECT parsed the whole item
  // (all its events) again for every event, quadratic in a batch's events on one balance (bench/batch.ts).
  return `CREATE OR REPLACE FUNCTION commit_balances(p_items JSON)
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
      INSERT INTO balances (organization_id, customer_id, subject_id, ${BALANCE_SET.map(snake).join(", ")}, updated_at,
        version)
      VALUES (v_org, v_customer, v_subject, ${BALANCE_SET.map(cast).join(", ")}, ${cast("now")}, 1)
      ON CONFLICT DO NOTHING
      RETURNING version INTO written;
    ELSE
      UPDATE balances SET ${BALANCE_SET.map((k) => `${snake(k)} = ${cast(k)}`).join(", ")},
        updated_at = ${cast("now")}, version = version + 1
      WHERE organization_id = v_org AND customer_id = v_customer AND subject_id = v_subject
        AND version = ${cast("expected")}
      RETURNING version INTO written;
    END IF;
    IF written IS NOT NULL THEN
      INSERT INTO usage_events (organization_id, customer_id, subject_id, ${eventColumns.join(", ")})
      SELECT v_org, v_customer, v_subject, ${eventColumns.map((c) => `e.${c}`).join(", ")}
      FROM json_to_recordset(item->'events') AS e(${record(EVENT_COLUMNS)});
      INSERT INTO usage_rollups (organization_id, customer_id, ${ROLLUP_COLUMNS.map(([c]) => c).join(", ")})
      SELECT v_org, v_customer, ${ROLLUP_COLUMNS.map(([c]) => `r.${c}`).join(", ")}
      FROM json_to_recordset(item->'rollups') AS r(${record(ROLLUP_COLUMNS)})
      ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
      DO UPDATE SET value = ${ROLLUP_SUM_PG}, records = usage_rollups.records + excluded.records;
    END IF;
    versions := versions || to_json(written);
  END LOOP;
  RETURN array_to_json(versions);
END
$$`
}

/** PostgreSQL: the statement of a step, and what it answers (each item's new version, or null). */
export const COMMIT_BALANCES = "SELECT commit_balances($1) AS versions"
export const CommitVersions = Schema.Array(Schema.NullOr(Schema.Number))

/**
 * PostgreSQL: the same write as `commit_balances` for balances a transaction holds locked (a batch's, by
 * `lockBalances`), set-based: one guarded UPDATE of every balance, one INSERT of every event, one upsert of every
 * rollup (summed per bucket first: one statement may not update a row twice). `commit_balances` loops over its items,
 * three statements each; over a batch of 100 balances that was ~220 µs of PostgreSQL's CPU an event (bench/batch.ts).
 * The same answer. Parameters (`commitLockedParameters`): the organization, then one array per column: of the items,
 * of their events and of their rollups (each event and rollup naming its item by position). As typed arrays, not JSON
 * records, PostgreSQL spent ~20–25% less CPU on the lock and write of 100 balances (docs/benchmarks.md up to
 * e5592d1, "2026-11-24 (night)").
 * The customers and subjects as subqueries make the UPDATE index lookups (joined as a set, or as an array whose
 * length the planner sees, it scanned the organization's balances). Items must name existing rows (`expected` not
 * null).
 */
export const commitLockedStatement = () => commitSetBased(false)

/**
 * The batch write of `commitLockedStatement` for balances no transaction holds (a batch decided over the states this
 * process last wrote or read: src/entitlements/guardedBatch.ts), all or nothing, in one statement that commits by
 * itself: every balance the batch decided over (written or only checked, `write` 1 or 0) locked in byte order, as every
 * writer locks; if each is still the state it was decided over (`base_…`, at version `expected`), the written ones are
 * written with their events and rollups, else nothing is. Answers `held` and how many balances it wrote.
 * - The whole state is compared, not only the version: a batch may be decided over the state a write still on its way
 *   will leave, and if that write fails, another writer may bring the balance to the same version in another state.
 *   A decision is a function of the state alone, so over an equal state it holds whatever the history.
 * - The lock answers each row's newest version (it waits for a writer still holding it), so the guard is decided
 *   there, not in the UPDATE: the UPDATE's snapshot predates that wait, and would skip, not re-check, a row that
 *   moved meanwhile to the state expected.
 */
export const commitGuardedStatement = () => commitSetBased(true)

const commitSetBased = (guarded: boolean) => {
  let n = 1
  const next = (type: string) => `$${++n}::${type}[]`
  const itemColumns: ReadonlyArray<readonly [string, string]> = [
    ["customer", "TEXT"],
    ["subject", "TEXT"],
    ["expected", "BIGINT"],
    ...BALANCE_SET.map((k) => [snake(k), "BIGINT"] as const),
    ["now", "BIGINT"],
    ...(guarded
      ? [["write", "INTEGER"] as const, ...BALANCE_SET.map((k) => [`base_${snake(k)}`, "BIGINT"] as const)]
      : [])
  ]
  const items = itemColumns.map(([, type]) => next(type))
  const events = ["INTEGER", ...EVENT_COLUMNS.map(([, type]) => type)].map(next)
  const rollups = ["INTEGER", ...ROLLUP_COLUMNS.map(([, type]) => type)].map(next)
  const eventColumns = EVENT_COLUMNS.map(([column]) => column)
  // A column whose values are all equal comes as an array of one (`commitLockedParameters`): that value on every row.
  const rowsOf = (arrays: ReadonlyArray<string>, columns: ReadonlyArray<string>, ordinality: boolean) =>
    `(SELECT ${columns
      .map((c, k) => `CASE WHEN cardinality(${arrays[k]}) = 1 THEN (${arrays[k]})[1] ELSE u.${c} END AS ${c}`)
      .join(",\n      ")}${ordinality ? ", u.ord" : ""}
    FROM unnest(${arrays.join(", ")})${ordinality ? " WITH ORDINALITY" : ""} AS u(${columns.join(", ")}${
      ordinality ? ", ord" : ""
    }))`
  const byRows = (rows: string) => `b.organization_id = $1 AND b.customer_id = ANY (ARRAY(SELECT customer FROM ${rows}))
      AND b.subject_id = ANY (ARRAY(SELECT DISTINCT subject FROM ${rows}))`
  const guard = guarded
    ? `, l AS (
    SELECT b.customer_id, b.subject_id, b.version, ${BALANCE_SET.map((k) => `b.${snake(k)}`).join(", ")}
    FROM balances b
    WHERE ${byRows("i")} AND (b.customer_id, b.subject_id) IN (SELECT customer, subject FROM i)
    ORDER BY b.customer_id COLLATE "C", b.subject_id COLLATE "C" FOR UPDATE
  ), g AS (
    SELECT count(*) = (SELECT count(*) FROM i) AS held
    FROM l JOIN i ON i.customer = l.customer_id AND i.subject = l.subject_id AND i.expected = l.version
      AND ${BALANCE_SET.map((k) => `l.${snake(k)} IS NOT DISTINCT FROM i.base_${snake(k)}`).join(" AND ")}
  )`
    : ""
  // The guarded UPDATE finds each row by its key alone. With the lists of `byRows` beside the key, each of its index
  // lookups also compared the row with every customer of the list: quadratic, ~7 ms of 1,000 balances' 13. Its plan
  // stays index lookups whatever PostgreSQL estimates (custom or generic), as `i` comes filtered by `write`.
  const written = guarded
    ? `(SELECT held FROM g) AND i.write = 1 AND b.organization_id = $1
      AND b.customer_id = i.customer AND b.subject_id = i.subject`
    : `${byRows("i")}
      AND b.customer_id = i.customer AND b.subject_id = i.subject AND b.version = i.expected`
  const answer = guarded
    ? `SELECT (SELECT held FROM g) AS held, (SELECT count(*) FROM w)::INTEGER AS written`
    : `SELECT COALESCE(json_agg(w.version ORDER BY i.ord), '[]') AS versions FROM i LEFT JOIN w ON w.ord = i.ord`
  return `WITH i AS (
    SELECT * FROM ${rowsOf(
      items,
      itemColumns.map(([c]) => c),
      true
    )} x
  )${guard}, w AS (
    UPDATE balances b SET ${BALANCE_SET.map((k) => `${snake(k)} = i.${snake(k)}`).join(", ")},
      updated_at = i.now, version = b.version + 1
    FROM i
    WHERE ${written}
    RETURNING i.ord, b.version, i.customer, i.subject
  ), e AS (
    INSERT INTO usage_events (organization_id, customer_id, subject_id, ${eventColumns.join(", ")})
    SELECT $1, w.customer, w.subject, ${eventColumns.map((c) => `ev.${c}`).join(", ")}
    FROM ${rowsOf(events, ["item", ...eventColumns], false)} AS ev
    JOIN w ON w.ord = ev.item
  ), r AS (
    INSERT INTO usage_rollups (organization_id, customer_id, ${ROLLUP_COLUMNS.map(([c]) => c).join(", ")})
    SELECT $1, w.customer, ru.feature_id, ru.bucket_start, LEAST(SUM(ru.value::NUMERIC), ${INT64_MAX})::BIGINT,
      SUM(ru.records)
    FROM ${rowsOf(rollups, ["item", ...ROLLUP_COLUMNS.map(([c]) => c)], false)} AS ru
    JOIN w ON w.ord = ru.item
    GROUP BY w.customer, ru.feature_id, ru.bucket_start
    ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
    DO UPDATE SET value = ${ROLLUP_SUM_PG}, records = usage_rollups.records + excluded.records
  )
  ${answer}`
}
/**
 * A PostgreSQL array literal of text or whole numbers: every text element quoted, a quote or backslash escaped, null
 * as NULL. What the driver builds of an array parameter, faster: a column of numbers, or of texts none of which holds a
 * quote or backslash (ids, most metadata), is one native join (the driver's two replacements an element were ~5% of
 * the service's CPU on a batch's write).
 */
export const pgArrayLiteral = (values: ReadonlyArray<string | number | null>): string => {
  if (values.length === 0) return "{}"
  if (values.every((v) => typeof v === "number")) return `{${values.join(",")}}`
  if (values.every((v) => typeof v === "string")) {
    const joined = values.join('","')
    if (!ESCAPED.test(joined)) return `{"${joined}"}`
  }
  let out = "{"
  for (let i = 0; i < values.length; i++) {
    const v = values[i]
    if (i > 0) out += ","
    if (v === null || v === undefined) out += "NULL"
    else if (typeof v === "number") out += String(v)
    else out += ESCAPED.test(v) ? `"${v.replace(ESCAPED_ALL, "\\$&")}"` : `"${v}"`
  }
  return out + "}"
}
const ESCAPED = /["\\]/
const ESCAPED_ALL = /["\\]/g

/**
 * `COMMIT_LOCKED`'s parameters for items of one organization: the organization, then array literals
 * (`pgArrayLiteral`) of the items' columns, the events' (by item position, from 1) and the rollups'. Quantities as
 * decimal text (exact at any size). With `writes` (`COMMIT_GUARDED`'s): whether each item is written or only checked
 * (an item only checked has no events), then the columns of each item's `base`.
 */
export const commitLockedParameters = (
  org: string,
  items: ReadonlyArray<CommitItem>,
  writes?: ReadonlyArray<boolean>
) => {
  const itemValues: ReadonlyArray<(c: CommitItem, i: number) => string | number | null> = [
    (c) => c.customer,
    (c) => c.subject,
    (c) => c.expected,
    ...BALANCE_SET.map((k) => (c: CommitItem) => pgValue(c[k])),
    (c) => c.now,
    ...(writes === undefined
      ? []
      : [
          (_: CommitItem, i: number) => (writes[i] === true ? 1 : 0),
          ...BALANCE_SET.map((k) => (c: CommitItem) => pgValue(c.base![k]))
        ])
  ]
  const columns = (count: number) => Array.from({ length: count }, (): Array<string | number | null> => [])
  const events = columns(1 + EVENT_COLUMNS.length)
  const rollups = columns(1 + ROLLUP_COLUMNS.length)
  items.forEach((c, i) => {
    for (const e of c.events) {
      events[0]!.push(i + 1)
      EVENT_COLUMNS.forEach(([, , value], k) => events[k + 1]!.push(pgValue(value(e))))
    }
    for (const r of c.rollups) {
      rollups[0]!.push(i + 1)
      ROLLUP_COLUMNS.forEach(([, , value], k) => rollups[k + 1]!.push(pgValue(value(r))))
    }
  })
  return [org, ...[...itemValues.map((value) => items.map(value)), ...events, ...rollups].map(compactArray)]
}
/**
 * A column's array literal; of its one value when all are equal (the statement repeats it on every row). A batch's
 * events mostly share their feature, plan, metadata, instant and zero columns, sent once instead of once an event.
 * Measured (bench/batch.ts, two interleaved pairs): the service's CPU an event on the hot balance 28–30 → 25–26 µs;
 * over 10,000 balances within the runs' noise.
 */
const compactArray = (values: ReadonlyArray<string | number | null>) => {
  const first = values[0]
  for (let i = 1; i < values.length; i++) if (values[i] !== first) return pgArrayLiteral(values)
  return pgArrayLiteral(values.length === 0 ? values : [first!])
}
export const COMMIT_LOCKED = commitLockedStatement()
export const COMMIT_GUARDED = commitGuardedStatement()

/** SQLite: `READ_CHANGED_BALANCES_PG`, the balances as `[customer, subject, version]` rows of one JSON parameter. */
export const READ_CHANGED_BALANCES_SQLITE = `SELECT
    COALESCE(json_group_array(json(${objectOf("sqlite", HotBalance, "b")})), '[]') AS balances
  FROM json_each(?2) j CROSS JOIN balances b
  WHERE b.organization_id = ?1 AND b.customer_id = json_extract(j.value, '$[0]')
    AND b.subject_id = json_extract(j.value, '$[1]') AND b.version IS NOT json_extract(j.value, '$[2]')`

/**
 * SQLite: a guarded batch's guard (src/entitlements/hotCommit.ts `makeCommitGuardedSqlite`): how many of the balances
 * of one JSON parameter (`sqliteGuardJson`) are still exactly the state given, version and all.
 */
export const SQLITE_GUARD = `SELECT count(*) AS n
  FROM json_each(?2) j CROSS JOIN balances b
  WHERE b.organization_id = ?1 AND b.customer_id = json_extract(j.value, '$[0]')
    AND b.subject_id = json_extract(j.value, '$[1]') AND b.version = json_extract(j.value, '$[2]')
    AND ${BALANCE_SET.map((k, i) => `b.${snake(k)} IS json_extract(j.value, '$[${3 + i}]')`).join("\n    AND ")}`
/** `SQLITE_GUARD`'s rows: each item's key, expected version and base state (quantities as exact JSON integers). */
export const sqliteGuardJson = (items: ReadonlyArray<CommitItem>) =>
  `[${items
    .map((c) => {
      const base = c.base!
      const state = BALANCE_SET.map((k) => {
        const v = base[k]
        return v === null ? "null" : String(v)
      })
      return `[${JSON.stringify(c.customer)},${JSON.stringify(c.subject)},${c.expected},${state.join(",")}]`
    })
    .join(",")}]`

/**
 * SQLite: a step's statements, run in one transaction (its one connection serialises writers anyway): one guarded
 * UPDATE of up to `SQLITE_ROWS` existing balances (RETURNING says whose guard held), an INSERT of each new one, then
 * the events and the rollups of those written.
 */
export const SQLITE_ROWS = 200
/**
 * SQLite: existing balances' new states as one UPDATE (`sqliteCompactRows`), each only if still at its expected
 * version; `guarded`: and still the state it was decided over (`CommitItem.base`, a guarded batch's), in the same
 * statement, at no extra read. RETURNING says whose guard held.
 */
export const sqliteUpdateBalances = (
  items: ReadonlyArray<CommitItem>,
  guarded = false
): readonly [string, Array<unknown>] => {
  // Parameter columns: org, customer, subject, expected, the balance's columns, now[, the base state's columns].
  const rows = sqliteCompactRows(
    items.map((c) => [
      c.org,
      c.customer,
      c.subject,
      c.expected,
      ...BALANCE_SET.map((k) => sqliteValue(c[k])),
      c.now,
      ...(guarded ? BALANCE_SET.map((k) => sqliteValue(c.base![k])) : [])
    ])
  )
  const set = BALANCE_SET.map((k, i) => `${snake(k)} = ${rows.column(4 + i)}`).join(", ")
  const base = guarded
    ? BALANCE_SET.map((k, i) => `\n      AND balances.${snake(k)} IS ${rows.column(5 + BALANCE_SET.length + i)}`).join(
        ""
      )
    : ""
  return [
    `UPDATE balances SET ${set}, updated_at = ${rows.column(4 + BALANCE_SET.length)}, version = balances.version + 1
    FROM ${rows.values}
    WHERE balances.organization_id = ${rows.column(0)} AND balances.customer_id = ${rows.column(1)}
      AND balances.subject_id = ${rows.column(2)} AND balances.version = ${rows.column(3)}${base}
    RETURNING balances.organization_id AS o, balances.customer_id AS c, balances.subject_id AS s, balances.version AS v`,
    rows.parameters
  ]
}
export const SQLITE_INSERT_BALANCE = `INSERT INTO balances (organization_id, customer_id, subject_id,
    ${BALANCE_SET.map(snake).join(", ")}, updated_at, version)
  VALUES (?, ?, ?, ${BALANCE_SET.map(() => "?").join(", ")}, ?, 1)
  ON CONFLICT DO NOTHING RETURNING version`
export const sqliteInsertParameters = (c: CommitItem) => [
  c.org,
  c.customer,
  c.subject,
  ...BALANCE_SET.map((k) => sqliteValue(c[k])),
  c.now
]
export const SQLITE_EVENT_ROWS = 500
export const sqliteEventParameters = (e: UsageEventRow) => [
  e.organizationId,
  e.customerId,
  e.subjectId,
  ...EVENT_COLUMNS.map(([, , value]) => sqliteValue(value(e)))
]
/**
 * SQLite: rows of parameters as one `VALUES` list aliased `v`, whose columns of one value across the rows are bound
 * once, the way `compactArray` sends them to PostgreSQL. A batch's rows mostly share their organization, feature,
 * subject, plan, metadata, window, instant and zero columns. `column(j)` is column j's expression (`?k`, or `v.columnN`
 * for a column of several values); every parameter is numbered (`?k`), so the statement may use any of them before
 * or after the list. Measured on events (1,000 of a hot balance a transaction, 30 rounds): 8.4–8.9 → 4.2 µs an event,
 * binding included.
 */
export const sqliteCompactRows = (rows: ReadonlyArray<ReadonlyArray<unknown>>) => {
  const first = rows[0]!
  const same = first.map((value, j) => j > 0 && rows.every((row) => row[j] === value))
  // Column 0 always goes in the list: a list needs a column, even when every row is the same.
  const varying = first.flatMap((_, j) => (same[j] ? [] : [j]))
  const parameters: Array<unknown> = []
  const expressions = first.map((value, j) => {
    if (!same[j]) return `v.column${varying.indexOf(j) + 1}`
    parameters.push(value)
    return `?${parameters.length}`
  })
  const list = rows.map((row) => {
    const slots = varying.map((j) => {
      parameters.push(row[j])
      return `?${parameters.length}`
    })
    return `(${slots.join(", ")})`
  })
  return { column: (j: number) => expressions[j]!, values: `(VALUES ${list.join(", ")}) AS v`, parameters }
}

/** SQLite: a chunk of events as one INSERT (`sqliteCompactRows`). */
export const sqliteEventInsert = (events: ReadonlyArray<UsageEventRow>): readonly [string, Array<unknown>] => {
  const columns = ["organization_id", "customer_id", "subject_id", ...EVENT_COLUMNS.map(([c]) => c)]
  const rows = sqliteCompactRows(events.map(sqliteEventParameters))
  return [
    `INSERT INTO usage_events (${columns.join(", ")}) SELECT ${columns.map((_, j) => rows.column(j)).join(", ")}
      FROM ${rows.values}`,
    rows.parameters
  ]
}

/** SQLite: rollup increments, one parameter row each (`sqliteRollupParameters`), as one upsert. */
export const sqliteRollupUpsert = (
  increments: ReadonlyArray<ReadonlyArray<unknown>>
): readonly [string, Array<unknown>] => {
  const columns = ["organization_id", "customer_id", ...ROLLUP_COLUMNS.map(([c]) => c)]
  const rows = sqliteCompactRows(increments)
  // `WHERE true`: SQLite's grammar reads an ON after a SELECT's FROM as a join's unless a WHERE ends the SELECT.
  return [
    `INSERT INTO usage_rollups (${columns.join(", ")}) SELECT ${columns.map((_, j) => rows.column(j)).join(", ")}
      FROM ${rows.values} WHERE true
    ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
    DO UPDATE SET value = ${ROLLUP_SUM_SQLITE}, records = usage_rollups.records + excluded.records`,
    rows.parameters
  ]
}
export const sqliteRollupParameters = (org: string, customer: string, r: RollupIncrement) => [
  org,
  customer,
  ...ROLLUP_COLUMNS.map(([, , value]) => sqliteValue(value(r)))
]

const SAFE_MAX = BigInt(Number.MAX_SAFE_INTEGER)
/** A bigint as SQLite binds it exactly: a number while safe, else its decimal text (an INTEGER column converts it). */
const sqliteValue = (v: ColumnValue): number | string | null =>
  typeof v === "bigint" ? (v <= SAFE_MAX && v >= -SAFE_MAX ? Number(v) : v.toString()) : v

/** Usage rollup resolution: 15 minutes, the finest step of any time zone's offset. */
export const ROLLUP_MS = 15 * 60_000

/** Adds a balance's events up per (feature, 15-minute bucket): one upsert per rollup row. */
export const rollupsOf = (events: ReadonlyArray<UsageEventRow>): Array<RollupIncrement> => {
  const byKey = new Map<string, { featureId: string; bucketStart: number; value: bigint; records: number }>()
  for (const e of events) {
    const bucketStart = e.createdAt - (e.createdAt % ROLLUP_MS)
    const key = `${e.featureId} ${bucketStart}`
    const current = byKey.get(key)
    if (current === undefined) byKey.set(key, { featureId: e.featureId, bucketStart, value: e.value, records: 1 })
    else {
      current.value += e.value
      current.records += 1
    }
  }
  return [...byKey.values()]
}
