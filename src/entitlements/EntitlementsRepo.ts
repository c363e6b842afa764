import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option } from "effect"
import { type CustomerRecord, matching, toCustomerRecord } from "../customers/CustomersRepo.ts"
import { COUNT_MAX_MICRO, INT64_MAX, storedCapMicro, storedMicro } from "../domain/bounds.ts"
import { microParam } from "../domain/quantity.ts"
import { makeBatcher } from "./Batcher.ts"
import { PgPool, poolQuery } from "../platform/db/PgPool.ts"
import type { SubscriptionRecord } from "../subscriptions/model.ts"
import { toSubscriptionRecord } from "../subscriptions/SubscriptionsRepo.ts"

/** One customer's balance of one feature or credit system, in micro-units. */
export interface BalanceRow {
  readonly windowStart: number
  readonly windowEnd: number | null
  readonly used: bigint
  readonly overage: bigint
  readonly bonus: bigint
  readonly addon: bigint
}

/** A balance as stored: `version` grows with every write, so a writer can check nothing moved since it read. */
export interface StoredBalance extends BalanceRow {
  readonly version: number
}

/**
 * Everything `check`/`track` reads, in one query: the organization's catalog version, the customers the reference
 * matches, their live subscriptions (oldest first), their config of the feature and their balances of the feature
 * and of its credit systems.
 */
export interface EntitlementContext {
  readonly catalogVersion: number
  readonly customers: ReadonlyArray<CustomerRecord>
  readonly subscriptions: ReadonlyArray<SubscriptionRecord>
  readonly configs: ReadonlyArray<{ readonly customerId: string; readonly config: FeatureConfigRow }>
  readonly balances: ReadonlyArray<{
    readonly customerId: string
    readonly subjectId: string
    readonly balance: StoredBalance
  }>
}

/** What one guarded write of a balance records: its new state and the events (and rollups) of the draws. */
export interface BalanceCommit {
  readonly organizationId: string
  readonly customerId: string
  readonly subjectId: string
  /** The version the decisions were made on; `null` = the row did not exist. */
  readonly expectedVersion: number | null
  readonly next: BalanceRow
  readonly events: ReadonlyArray<UsageEventRow>
  readonly now: number
}

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

export interface FeatureConfigRow {
  readonly overage: "block" | "charge"
  readonly maxOverageUnits: bigint | null
}

export type IdempotencyClaim =
  | { readonly _tag: "Claimed" }
  | { readonly _tag: "Existing"; readonly requestHash: string; readonly response: string | null }

/**
 * Storage of the entitlement engine. Writes that must be atomic (balance, event, spend, idempotency record)
 * are separate statements here and are composed inside one transaction by the engine.
 */
export interface EntitlementsRepoShape {
  readonly readBalance: (
    org: string,
    customerId: string,
    subjectId: string
  ) => Effect.Effect<Option.Option<StoredBalance>>
  /**
   * Concurrent reads are answered together (one statement for several on PostgreSQL); `inTransaction` reads on the
   * caller's own transaction instead.
   */
  readonly context: (
    org: string,
    customerRef: string,
    featureId: string | null,
    subjectIds: ReadonlyArray<string>,
    inTransaction?: boolean
  ) => Effect.Effect<EntitlementContext>
  /**
   * One step (one statement on PostgreSQL, one short transaction on SQLite) for several balances: each one's `next`
   * only if it is still at its `expectedVersion`, and with it its events and their rollups. For each, in order, its
   * new version, or none when its guard failed (nothing of it was written).
   */
  readonly commitBalances: (
    commits: ReadonlyArray<BalanceCommit>
  ) => Effect.Effect<ReadonlyArray<Option.Option<number>>>
  /** Creates the row if missing, then locks it for the rest of the transaction (PostgreSQL `FOR UPDATE`). */
  readonly lockBalance: (
    org: string,
    customerId: string,
    subjectId: string,
    init: { readonly windowStart: number; readonly windowEnd: number | null },
    now: number
  ) => Effect.Effect<BalanceRow>
  readonly writeBalance: (
    org: string,
    customerId: string,
    subjectId: string,
    row: BalanceRow,
    now: number
  ) => Effect.Effect<void>
  /** Records the event and adds it to its usage rollup bucket (same transaction as the caller's). */
  readonly insertEvent: (event: UsageEventRow) => Effect.Effect<void>
  readonly featureConfig: (
    org: string,
    customerId: string,
    featureId: string
  ) => Effect.Effect<Option.Option<FeatureConfigRow>>
  /** The customer's live entity of that name (any feature): active, or pending removal not yet due. */
  readonly findEntity: (
    org: string,
    customerId: string,
    entity: string,
    now: number
  ) => Effect.Effect<Option.Option<string>>
  readonly countEntities: (org: string, customerId: string, featureId: string, now: number) => Effect.Effect<number>
  /** Locks the customer's overage spend of the period starting `periodStart` (a new period starts at zero). */
  readonly lockSpend: (org: string, customerId: string, periodStart: number, now: number) => Effect.Effect<string>
  readonly writeSpend: (
    org: string,
    customerId: string,
    periodStart: number,
    spent: string,
    now: number
  ) => Effect.Effect<void>
  readonly insertNotification: (
    org: string,
    id: string,
    customerId: string,
    kind: string,
    payload: Record<string, unknown>,
    now: number
  ) => Effect.Effect<void>
  /** Claims a key (a claim older than `expiredBefore` is replaced); else returns what the first request stored. */
  readonly claimIdempotencyKey: (
    org: string,
    key: string,
    requestHash: string,
    now: number,
    expiredBefore: number
  ) => Effect.Effect<IdempotencyClaim>
  readonly saveIdempotentResponse: (org: string, key: string, response: string) => Effect.Effect<void>
}

export class EntitlementsRepo extends Context.Tag("EntitlementsRepo")<EntitlementsRepo, EntitlementsRepoShape>() {}

/** Usage rollup resolution: 15 minutes, the finest step of any time zone's offset. */
export const ROLLUP_MS = 15 * 60_000

/** A BIGINT of micro-units, read without a defect whatever was stored (src/domain/bounds.ts). */
const big = (v: unknown): bigint => storedMicro(v)

const toBalance = (row: any): StoredBalance => ({
  windowStart: Number(row.windowStart),
  windowEnd: row.windowEnd === null ? null : Number(row.windowEnd),
  used: big(row.used),
  overage: big(row.overage),
  bonus: big(row.bonus),
  addon: big(row.addon),
  version: Number(row.version ?? 0)
})

const toFeatureConfig = (r: any): FeatureConfigRow => ({
  overage: r.overage,
  maxOverageUnits: r.maxOverageUnits === null ? null : storedCapMicro(r.maxOverageUnits, COUNT_MAX_MICRO)
})

/** An event as `json_to_recordset` reads it: quantities as decimal strings (exact at any size). */
const eventJson = (e: UsageEventRow) => ({
  id: e.id,
  feature_id: e.featureId,
  entity_id: e.entityId,
  value: e.value.toString(),
  cost: e.cost.toString(),
  from_plan: e.fromPlan.toString(),
  from_bonus: e.fromBonus.toString(),
  from_addon: e.fromAddon.toString(),
  overage: e.overage.toString(),
  billable: e.billable.toString(),
  plan_id: e.planId,
  metadata: JSON.stringify(e.metadata),
  created_at: e.createdAt
})
const rollupJson = (r: { featureId: string; bucketStart: number; value: bigint; records: number }) => ({
  feature_id: r.featureId,
  bucket_start: r.bucketStart,
  value: r.value.toString(),
  records: r.records
})

/** JSON objects built in SQL, with the keys the row mappers expect; BIGINT quantities as text (exact past 2^53). */
const json = (fn: string, pairs: ReadonlyArray<readonly [string, string]>) =>
  `${fn}(${pairs.map(([key, expression]) => `'${key}', ${expression}`).join(", ")})`
const customerColumns = [
  ["organizationId", "organization_id"],
  ["id", "id"],
  ["externalId", "external_id"],
  ["email", "email"],
  ["name", "name"],
  ["metadata", "metadata"],
  ["overageMaxAmount", "overage_max_amount"],
  ["overageOnLimit", "overage_on_limit"],
  ["overageCreatedAt", "overage_created_at"],
  ["overageUpdatedAt", "overage_updated_at"],
  ["createdAt", "created_at"],
  ["updatedAt", "updated_at"]
] as const
const subscriptionColumns = [
  ["organizationId", "organization_id"],
  ["id", "id"],
  ["customerId", "customer_id"],
  ["planId", "plan_id"],
  ["status", "status"],
  ["startedAt", "started_at"],
  ["currentPeriodStart", "current_period_start"],
  ["currentPeriodEnd", "current_period_end"],
  ["trialEndsAt", "trial_ends_at"],
  ["cancelAtPeriodEnd", "cancel_at_period_end"],
  ["canceledAt", "canceled_at"],
  ["graceEndsAt", "grace_ends_at"],
  ["createdAt", "created_at"],
  ["updatedAt", "updated_at"]
] as const
const balanceColumns = (text: (e: string) => string) =>
  [
    ["customerId", "customer_id"],
    ["subjectId", "subject_id"],
    ["windowStart", "window_start"],
    ["windowEnd", "window_end"],
    ["used", text("used")],
    ["overage", text("overage")],
    ["bonus", text("bonus")],
    ["addon", text("addon")],
    ["version", "version"]
  ] as const
const configColumns = (text: (e: string) => string) =>
  [
    ["customerId", "customer_id"],
    ["overage", "overage"],
    ["maxOverageUnits", text("max_overage_units")]
  ] as const

/** Adds each (feature, 15-minute bucket) of the events up once: one upsert per rollup row. */
const rollupsOf = (events: ReadonlyArray<UsageEventRow>) => {
  const byKey = new Map<string, { featureId: string; bucketStart: number; value: bigint; records: number }>()
  for (const e of events) {
    const bucketStart = e.createdAt - (e.createdAt % ROLLUP_MS)
    const key = `${e.featureId} ${bucketStart}`
    const current = byKey.get(key)
    if (current === undefined) byKey.set(key, { featureId: e.featureId, bucketStart, value: e.value, records: 1 })
    else byKey.set(key, { ...current, value: current.value + e.value, records: current.records + 1 })
  }
  return [...byKey.values()]
}

const eventRow = (e: UsageEventRow) => ({
  organizationId: e.organizationId,
  id: e.id,
  customerId: e.customerId,
  featureId: e.featureId,
  subjectId: e.subjectId,
  entityId: e.entityId,
  value: microParam(e.value),
  cost: microParam(e.cost),
  fromPlan: microParam(e.fromPlan),
  fromBonus: microParam(e.fromBonus),
  fromAddon: microParam(e.fromAddon),
  overage: microParam(e.overage),
  billable: microParam(e.billable),
  planId: e.planId,
  metadata: JSON.stringify(e.metadata),
  createdAt: e.createdAt
})

export const EntitlementsRepoSql = Layer.effect(
  EntitlementsRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const forUpdate = sql.onDialectOrElse({ pg: () => sql.literal("FOR UPDATE"), orElse: () => sql.literal("") })

    const selectBalance = (org: string, customerId: string, subjectId: string, lock: boolean) =>
      sql`SELECT window_start, window_end, used, overage, bonus, addon, version FROM balances
          WHERE organization_id = ${org} AND customer_id = ${customerId} AND subject_id = ${subjectId}
          ${lock ? forUpdate : sql.literal("")}`

    /**
     * A 15-minute rollup adds its events' values, held at BIGINT's maximum (9.2e12 units of one feature for one
     * customer in 15 minutes) instead of overflowing: past it PostgreSQL raised an error (a 500, for every draw of the
     * writer's step) and SQLite kept a REAL. Usage history then under-counts that bucket; events and invoices, which
     * read events, stay exact (docs/decisions.md "Numbers"). Migration 0010 does the same in `commit_balances`.
     */
    const sqliteRollupSum = sql.literal(`MIN(usage_rollups.value + excluded.value, ${INT64_MAX})`)
    const rollupSum = sql.onDialectOrElse({
      pg: () => sql.literal(`LEAST(usage_rollups.value::NUMERIC + excluded.value, ${INT64_MAX})::BIGINT`),
      orElse: () => sqliteRollupSum
    })

    // The functions' JSON already has the keys the mappers expect: no name transformation of (every key of) it.
    const raw = sql.withoutTransforms()
    const sqliteText = (e: string) => `CAST(${e} AS TEXT)`
    const sqliteCustomer = json("json_object", customerColumns)
    const sqliteSubscription = json("json_object", subscriptionColumns)
    const sqliteConfig = json("json_object", configColumns(sqliteText))
    const sqliteBalance = json("json_object", balanceColumns(sqliteText))

    const list = (value: unknown): Array<any> =>
      value === null || value === undefined ? [] : typeof value === "string" ? JSON.parse(value) : (value as Array<any>)
    const decode = (row: any): EntitlementContext => ({
      catalogVersion: Number(row.catalogVersion ?? 0),
      customers: list(row.customers).map(toCustomerRecord),
      // Oldest first, as `listLive` orders them (sorted here: an ORDER BY in SQLite's subquery costs more than the
      // whole rest of the read).
      subscriptions: list(row.subscriptions)
        .map(toSubscriptionRecord)
        .sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
      configs: list(row.configs).map((c) => ({ customerId: c.customerId, config: toFeatureConfig(c) })),
      balances: list(row.balances).map((b) => ({
        customerId: b.customerId,
        subjectId: b.subjectId,
        balance: toBalance(b)
      }))
    })

    interface ContextRead {
      readonly org: string
      readonly ref: string
      readonly refLower: string
      readonly feature: string
      readonly subjects: string
    }
    // Functions (migration 0006): their statements' plans are prepared once per connection. Reads that arrive while
    // others are in flight go together, in one call.
    // Outside a transaction, straight on the pool when it is ours to use (src/platform/db/PgPool.ts); the same
    // statement through the SqlClient otherwise.
    const pool = yield* Effect.serviceOption(PgPool)
    const pgCall = <Row extends object>(text: string, values: ReadonlyArray<unknown>) =>
      Option.isSome(pool) ? poolQuery<Row>(pool.value, text, values) : raw.unsafe<Row>(text, values)
    const CONTEXT_STATEMENT = `SELECT entitlement_context($1, $2, $3, $4, $5) AS context`
    const readOne = (r: ContextRead) => [r.org, r.ref, r.refLower, r.feature, r.subjects]
    // Inside a transaction, on the transaction's own connection (the SqlClient finds it).
    const pgContext = (r: ContextRead, inTransaction: boolean) =>
      Effect.map(
        inTransaction
          ? raw.unsafe<{ context: unknown }>(CONTEXT_STATEMENT, readOne(r))
          : pgCall<{ context: unknown }>(CONTEXT_STATEMENT, readOne(r)),
        (rows) => decode(rows[0]!.context)
      )
    const pgContexts = makeBatcher<ContextRead, EntitlementContext>({
      // One read in flight, gathering what arrives meanwhile and in its turn: measured against 2 and 4 lanes, fewer
      // round trips and busy backends gave both the higher peak and the lower p99 at half of it.
      lanes: 1,
      gather: true,
      maxBatch: 128,
      run: (reads) =>
        reads.length === 1
          ? Effect.map(Effect.orDie(pgContext(reads[0]!, false)), (one) => [one])
          : Effect.map(
              pgCall<{ contexts: ReadonlyArray<unknown> }>(`SELECT entitlement_contexts($1) AS contexts`, [
                JSON.stringify(reads)
              ]),
              (rows) => rows[0]!.contexts.map(decode)
            ).pipe(Effect.orDie)
    })

    const context: EntitlementsRepoShape["context"] = (org, ref, featureId, subjectIds, inTransaction = false) => {
      return sql
        .onDialectOrElse({
          pg: () => {
            const read = {
              org,
              ref,
              refLower: ref.toLowerCase(),
              feature: featureId ?? "",
              subjects: subjectIds.join(",")
            }
            return inTransaction ? pgContext(read, true) : pgContexts.submit(read)
          },
          // The same read inline (bun:sqlite keeps the prepared statement); every part is an index lookup.
          orElse: () => {
            const subjects = subjectIds.length === 0 ? sql`0` : sql`subject_id IN ${sql.in(subjectIds)}`
            return Effect.map(
              sql`WITH c AS (${matching(sql, org, ref)})
              SELECT (SELECT catalog_version FROM organizations WHERE id = ${org}) AS catalog_version,
                (SELECT json_group_array(json(${sql.literal(sqliteCustomer)})) FROM c) AS customers,
                (SELECT json_group_array(json(${sql.literal(sqliteSubscription)}))
                  FROM subscriptions WHERE organization_id = ${org} AND customer_id IN (SELECT id FROM c)
                  AND status IN ('active', 'trialing', 'past_due')) AS subscriptions,
                (SELECT json_group_array(json(${sql.literal(sqliteConfig)}))
                  FROM customer_feature_configs WHERE organization_id = ${org} AND customer_id IN (SELECT id FROM c)
                  AND feature_id = ${featureId ?? ""}) AS configs,
                (SELECT json_group_array(json(${sql.literal(sqliteBalance)}))
                  FROM balances WHERE organization_id = ${org} AND customer_id IN (SELECT id FROM c)
                  AND ${subjects}) AS balances`,
              (rows) => decode(rows[0])
            )
          }
        })
        .pipe(Effect.orDie)
    }

    const commitItem = (c: BalanceCommit) => ({
      org: c.organizationId,
      customer: c.customerId,
      subject: c.subjectId,
      expected: c.expectedVersion,
      windowStart: c.next.windowStart,
      windowEnd: c.next.windowEnd,
      used: c.next.used.toString(),
      overage: c.next.overage.toString(),
      bonus: c.next.bonus.toString(),
      addon: c.next.addon.toString(),
      now: c.now,
      events: c.events.map(eventJson),
      rollups: rollupsOf(c.events).map(rollupJson)
    })

    /** SQLite: a balance that did not exist, unless it does by now (inside the step's transaction). */
    const sqliteInsert = (c: BalanceCommit) => {
      const { next } = c
      return Effect.map(
        sql`INSERT INTO balances (organization_id, customer_id, subject_id, window_start, window_end, used, overage,
              bonus, addon, updated_at, version)
            VALUES (${c.organizationId}, ${c.customerId}, ${c.subjectId}, ${next.windowStart}, ${next.windowEnd},
              ${microParam(next.used)}, ${microParam(next.overage)}, ${microParam(next.bonus)}, ${microParam(next.addon)},
              ${c.now}, 1)
            ON CONFLICT DO NOTHING RETURNING version`,
        (rows) => Option.fromNullable(rows[0]?.version).pipe(Option.map((v) => Number(v)))
      )
    }

    const commitBalances: EntitlementsRepoShape["commitBalances"] = (commits) =>
      sql
        .onDialectOrElse({
          // One call (migration 0006's commit_balances): each balance's guarded write, then its events and rollups only
          // if it matched; the statement commits on its own, so no row lock outlives it.
          pg: () =>
            Effect.map(
              pgCall<{ versions: ReadonlyArray<number | null> }>(`SELECT commit_balances($1) AS versions`, [
                JSON.stringify(commits.map(commitItem))
              ]),
              (rows) => rows[0]!.versions.map((v) => Option.fromNullable(v).pipe(Option.map(Number)))
            ),
          // The same in one transaction (SQLite's one connection serialises writers anyway), in a few statements for the
          // whole step: one guarded UPDATE of every existing balance (RETURNING says whose guard held), an INSERT for
          // each new one, then the events and the rollups of those written.
          orElse: () =>
            sql.withTransaction(
              Effect.gen(function* () {
                const keyOf = (org: string, customer: string, subject: string) =>
                  `${org}\u0000${customer}\u0000${subject}`
                const written = new Map<string, number>()
                const existing = commits.filter((c) => c.expectedVersion !== null)
                for (let i = 0; i < existing.length; i += 200) {
                  const rows = existing.slice(i, i + 200).map(
                    (c) =>
                      sql`(${c.organizationId}, ${c.customerId}, ${c.subjectId}, ${c.expectedVersion}, ${c.next.windowStart},
                  ${c.next.windowEnd}, ${microParam(c.next.used)}, ${microParam(c.next.overage)},
                  ${microParam(c.next.bonus)}, ${microParam(c.next.addon)}, ${c.now})`
                  )
                  const updated = yield* sql<{ o: string; c: string; s: string; v: number }>`UPDATE balances SET
                  window_start = v.column5, window_end = v.column6, used = v.column7, overage = v.column8,
                  bonus = v.column9, addon = v.column10, updated_at = v.column11, version = balances.version + 1
                FROM (VALUES ${sql.csv(rows)}) AS v
                WHERE balances.organization_id = v.column1 AND balances.customer_id = v.column2
                  AND balances.subject_id = v.column3 AND balances.version = v.column4
                RETURNING balances.organization_id AS o, balances.customer_id AS c, balances.subject_id AS s,
                  balances.version AS v`
                  for (const u of updated) written.set(keyOf(u.o, u.c, u.s), Number(u.v))
                }
                for (const c of commits) {
                  if (c.expectedVersion !== null) continue
                  const inserted = yield* sqliteInsert(c)
                  if (Option.isSome(inserted))
                    written.set(keyOf(c.organizationId, c.customerId, c.subjectId), inserted.value)
                }
                const versions = commits.map((c) =>
                  Option.fromNullable(written.get(keyOf(c.organizationId, c.customerId, c.subjectId)))
                )
                const events = commits.flatMap((c, i) => (Option.isSome(versions[i]!) ? c.events : []))
                for (let i = 0; i < events.length; i += 500) {
                  yield* sql`INSERT INTO usage_events ${sql.insert(events.slice(i, i + 500).map(eventRow))}`
                }
                const rollups = new Map<
                  string,
                  { e: UsageEventRow; bucketStart: number; value: bigint; records: number }
                >()
                for (const e of events) {
                  const bucketStart = e.createdAt - (e.createdAt % ROLLUP_MS)
                  const key = `${e.organizationId}\u0000${e.customerId}\u0000${e.featureId}\u0000${bucketStart}`
                  const current = rollups.get(key)
                  if (current === undefined) rollups.set(key, { e, bucketStart, value: e.value, records: 1 })
                  else rollups.set(key, { ...current, value: current.value + e.value, records: current.records + 1 })
                }
                const sums = [...rollups.values()]
                for (let i = 0; i < sums.length; i += 500) {
                  const rows = sums.slice(i, i + 500).map(
                    (r) =>
                      sql`(${r.e.organizationId}, ${r.e.customerId}, ${r.e.featureId}, ${r.bucketStart}, ${microParam(r.value)},
                  ${r.records})`
                  )
                  yield* sql`INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
                VALUES ${sql.csv(rows)}
                ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
                DO UPDATE SET value = ${sqliteRollupSum}, records = usage_rollups.records + excluded.records`
                }
                return versions
              })
            )
        })
        .pipe(Effect.orDie)

    return {
      context,
      commitBalances,
      readBalance: (org, customerId, subjectId) =>
        selectBalance(org, customerId, subjectId, false).pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toBalance))),
          Effect.orDie
        ),
      lockBalance: (org, customerId, subjectId, init, now) =>
        Effect.gen(function* () {
          yield* sql`INSERT INTO balances (organization_id, customer_id, subject_id, window_start, window_end, used,
                       overage, bonus, addon, updated_at)
                     VALUES (${org}, ${customerId}, ${subjectId}, ${init.windowStart}, ${init.windowEnd}, 0, 0, 0, 0, ${now})
                     ON CONFLICT DO NOTHING`
          const rows = yield* selectBalance(org, customerId, subjectId, true)
          return toBalance(rows[0])
        }).pipe(Effect.orDie),
      writeBalance: (org, customerId, subjectId, row, now) =>
        sql`UPDATE balances SET window_start = ${row.windowStart}, window_end = ${row.windowEnd},
              used = ${microParam(row.used)}, overage = ${microParam(row.overage)}, bonus = ${microParam(row.bonus)},
              addon = ${microParam(row.addon)}, updated_at = ${now}, version = version + 1
            WHERE organization_id = ${org} AND customer_id = ${customerId} AND subject_id = ${subjectId}`.pipe(
          Effect.asVoid,
          Effect.orDie
        ),
      insertEvent: (e) =>
        Effect.zipRight(
          sql`INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
              VALUES (${e.organizationId}, ${e.customerId}, ${e.featureId}, ${e.createdAt - (e.createdAt % ROLLUP_MS)},
                ${microParam(e.value)}, 1)
              ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
              DO UPDATE SET value = ${rollupSum}, records = usage_rollups.records + 1`,
          sql`INSERT INTO usage_events ${sql.insert(eventRow(e))}`
        ).pipe(Effect.asVoid, Effect.orDie),
      featureConfig: (org, customerId, featureId) =>
        sql`SELECT overage, max_overage_units FROM customer_feature_configs
            WHERE organization_id = ${org} AND customer_id = ${customerId} AND feature_id = ${featureId}`.pipe(
          Effect.map((rows) =>
            Option.fromNullable(rows[0]).pipe(
              Option.map((r: any): FeatureConfigRow => ({
                overage: r.overage,
                maxOverageUnits: r.maxOverageUnits === null ? null : storedCapMicro(r.maxOverageUnits, COUNT_MAX_MICRO)
              }))
            )
          ),
          Effect.orDie
        ),
      findEntity: (org, customerId, entity, now) =>
        sql<{ id: string }>`SELECT id FROM entities WHERE organization_id = ${org} AND customer_id = ${customerId}
            AND entity = ${entity} AND (status = 'active' OR (status = 'pending_removal' AND remove_at > ${now}))
            ORDER BY created_at LIMIT 1`.pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]?.id)),
          Effect.orDie
        ),
      countEntities: (org, customerId, featureId, now) =>
        sql<{ n: number }>`SELECT COUNT(*) AS n FROM entities WHERE organization_id = ${org}
            AND customer_id = ${customerId} AND feature_id = ${featureId}
            AND (status = 'active' OR (status = 'pending_removal' AND remove_at > ${now}))`.pipe(
          Effect.map((rows) => Number(rows[0]?.n ?? 0)),
          Effect.orDie
        ),
      lockSpend: (org, customerId, periodStart, now) =>
        Effect.gen(function* () {
          yield* sql`INSERT INTO customer_spend (organization_id, customer_id, period_start, spent, updated_at)
                     VALUES (${org}, ${customerId}, ${periodStart}, '0', ${now}) ON CONFLICT DO NOTHING`
          const rows = yield* sql<{ periodStart: number; spent: string }>`SELECT period_start, spent FROM customer_spend
              WHERE organization_id = ${org} AND customer_id = ${customerId} ${forUpdate}`
          const row = rows[0]!
          return Number(row.periodStart) === periodStart ? row.spent : "0"
        }).pipe(Effect.orDie),
      writeSpend: (org, customerId, periodStart, spent, now) =>
        sql`UPDATE customer_spend SET period_start = ${periodStart}, spent = ${spent}, updated_at = ${now}
            WHERE organization_id = ${org} AND customer_id = ${customerId}`.pipe(Effect.asVoid, Effect.orDie),
      insertNotification: (org, id, customerId, kind, payload, now) =>
        sql`INSERT INTO notifications ${sql.insert({
          organizationId: org,
          id,
          customerId,
          kind,
          payload: JSON.stringify(payload),
          createdAt: now
        })}`.pipe(Effect.asVoid, Effect.orDie),
      claimIdempotencyKey: (org, key, requestHash, now, expiredBefore) =>
        Effect.gen(function* () {
          yield* sql`DELETE FROM idempotency_keys WHERE organization_id = ${org} AND key = ${key}
                     AND created_at < ${expiredBefore}`
          const claimed =
            yield* sql`INSERT INTO idempotency_keys (organization_id, key, request_hash, response, created_at)
              VALUES (${org}, ${key}, ${requestHash}, NULL, ${now}) ON CONFLICT DO NOTHING RETURNING key`
          if (claimed.length === 1) return { _tag: "Claimed" } as const
          const rows = yield* sql<{ requestHash: string; response: string | null }>`SELECT request_hash, response
              FROM idempotency_keys WHERE organization_id = ${org} AND key = ${key}`
          return { _tag: "Existing", requestHash: rows[0]!.requestHash, response: rows[0]!.response } as const
        }).pipe(Effect.orDie),
      saveIdempotentResponse: (org, key, response) =>
        sql`UPDATE idempotency_keys SET response = ${response} WHERE organization_id = ${org} AND key = ${key}`.pipe(
          Effect.asVoid,
          Effect.orDie
        )
    }
  })
)
