import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { COUNT_MAX_MICRO, storedCapMicro } from "../domain/bounds.ts"
import { microParam } from "../domain/quantity.ts"
import { PgPool, poolQuery, transactionQuery } from "../platform/db/PgPool.ts"
import { makeCommitBalances, makeCommitGuarded, makeCommitGuardedSqlite } from "./hotCommit.ts"
import { fastBalances } from "./hotDecode.ts"
import { makeContextReader } from "./hotRead.ts"
import {
  type EntitlementContext,
  HotBalance,
  LOCK_BALANCES_INSERT_PG,
  LOCK_BALANCES_INSERT_SQLITE,
  LOCK_BALANCES_SELECT_PG,
  LOCK_BALANCES_SELECT_SQLITE,
  type ManyRead,
  pgArrayLiteral,
  READ_CHANGED_BALANCES_PG,
  READ_CHANGED_BALANCES_SQLITE,
  ROLLUP_MS,
  ROLLUP_SUM_PG,
  ROLLUP_SUM_SQLITE,
  StoredBalanceRow,
  type UsageEventRow
} from "./hotStatements.ts"

import type {
  BalanceCommit,
  BalanceRow,
  BalancesNamed,
  FeatureConfigRow,
  GuardedBatches,
  IdempotencyClaim,
  KeyedBalance,
  StoredBalance
} from "./records.ts"

// The records live in ./records.ts (a leaf of the folder's imports); named here too for the features outside it.
export type {
  BalanceCommit,
  BalanceRow,
  BalancesNamed,
  EntitlementContext,
  FeatureConfigRow,
  GuardedBatches,
  IdempotencyClaim,
  KeyedBalance,
  StoredBalance,
  UsageEventRow
} from "./records.ts"
export { ROLLUP_MS } from "./hotStatements.ts"

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
   * Many references of one feature in one statement, outside any transaction (a batch's items, resolved before its
   * transaction): one context holding every customer they match.
   */
  readonly contexts: (read: ManyRead) => Effect.Effect<EntitlementContext>
  /**
   * One step (one statement on PostgreSQL, one short transaction on SQLite) for several balances: each one's `next`
   * only if it is still at its `expectedVersion`, and with it its events and their rollups. For each, in order, its
   * new version, or none when its guard failed (nothing of it was written).
   */
  readonly commitBalances: (
    commits: ReadonlyArray<BalanceCommit>,
    /** Inside the caller's transaction, on its connection (a batch's balances, locked by `lockBalances`). */
    inTransaction?: boolean
  ) => Effect.Effect<ReadonlyArray<Option.Option<number>>>
  /**
   * Creates the missing rows, then locks every balance named for the rest of the transaction (PostgreSQL `FOR
   * UPDATE`, in key order so that two batches never wait on each other in a cycle): two statements for a batch.
   */
  readonly lockBalances: (
    org: string,
    balances: BalancesNamed,
    now: number
  ) => Effect.Effect<ReadonlyArray<KeyedBalance>>
  /**
   * A batch decided over what the service knows of its balances and written only if each is still that state
   * (src/entitlements/guardedBatch.ts): on PostgreSQL (with its pool) one statement that commits by itself; on SQLite
   * one short transaction.
   */
  readonly guarded: Option.Option<GuardedBatches>
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
  /** Claims a key (a claim older than `expiredBefore` is replaced); else returns what the first request stored. */
  readonly claimIdempotencyKey: (
    org: string,
    key: string,
    requestHash: string,
    now: number,
    expiredBefore: number
  ) => Effect.Effect<IdempotencyClaim>
  readonly saveIdempotentResponse: (org: string, key: string, response: string) => Effect.Effect<void>
  /** A batch's claims in one step per 500 keys (in key order): each key's claim or what its first request stored. */
  readonly claimIdempotencyKeys: (
    org: string,
    claims: ReadonlyArray<{ readonly key: string; readonly requestHash: string }>,
    now: number,
    expiredBefore: number
  ) => Effect.Effect<ReadonlyMap<string, IdempotencyClaim>>
  /** The answers of a batch's claimed keys, in one statement. */
  readonly saveIdempotentResponses: (
    org: string,
    responses: ReadonlyArray<{ readonly key: string; readonly response: string }>
  ) => Effect.Effect<void>
}

/** Byte order of ASCII ids and keys (what PostgreSQL's "C" collation and SQLite's BINARY sort by). */
const byKey = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0)

export class EntitlementsRepo extends Context.Tag("EntitlementsRepo")<EntitlementsRepo, EntitlementsRepoShape>() {}

/** A balance row, by the hot read's schema of a balance (quantities read without a defect whatever was stored). */
const toBalance = Schema.decodeUnknownSync(StoredBalanceRow)
const decodeBalances = Schema.decodeUnknownSync(Schema.Array(HotBalance))

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
     * read events, stay exact (docs/decisions.md "Numbers"). `commit_balances` does the same (./hotStatements.ts).
     */
    const rollupSum = sql.onDialectOrElse({
      pg: () => sql.literal(ROLLUP_SUM_PG),
      orElse: () => sql.literal(ROLLUP_SUM_SQLITE)
    })

    // The hot statements (./hotStatements.ts): the read and the balance writer's step.
    const pool = yield* Effect.serviceOption(PgPool)
    const reader = makeContextReader(sql, pool)
    const commitBalances = makeCommitBalances(sql, pool)
    const context: EntitlementsRepoShape["context"] = (org, ref, featureId, subjectIds, inTransaction = false) =>
      reader.read(
        { org, ref, refLower: ref.toLowerCase(), feature: featureId ?? "", subjects: subjectIds },
        inTransaction
      )

    const claimIdempotencyKeys: EntitlementsRepoShape["claimIdempotencyKeys"] = (org, claims, now, expiredBefore) =>
      Effect.gen(function* () {
        const answers = new Map<string, IdempotencyClaim>()
        // Key order, as the balances: two batches claiming the same keys never wait on each other in a cycle.
        const sorted = [...claims].sort((a, b) => byKey(a.key, b.key))
        for (let i = 0; i < sorted.length; i += 500) {
          const chunk = sorted.slice(i, i + 500)
          const keys = chunk.map((c) => c.key)
          yield* sql`DELETE FROM idempotency_keys WHERE organization_id = ${org} AND ${sql.in("key", keys)}
                     AND created_at < ${expiredBefore}`
          const claimed = yield* sql<{ key: string }>`INSERT INTO idempotency_keys ${sql.insert(
            chunk.map((c) => ({
              organizationId: org,
              key: c.key,
              requestHash: c.requestHash,
              response: null,
              createdAt: now
            }))
          )} ON CONFLICT DO NOTHING RETURNING key`
          for (const row of claimed) answers.set(row.key, { _tag: "Claimed" })
          const existing = keys.filter((k) => !answers.has(k))
          if (existing.length === 0) continue
          const rows = yield* sql<{ key: string; requestHash: string; response: string | null }>`SELECT key,
              request_hash, response FROM idempotency_keys WHERE organization_id = ${org} AND ${sql.in("key", existing)}`
          for (const row of rows) {
            answers.set(row.key, { _tag: "Existing", requestHash: row.requestHash, response: row.response })
          }
        }
        return answers
      }).pipe(Effect.orDie)

    const saveIdempotentResponses: EntitlementsRepoShape["saveIdempotentResponses"] = (org, responses) => {
      if (responses.length === 0) return Effect.void
      const one = ({ key, response }: { readonly key: string; readonly response: string }) =>
        sql`UPDATE idempotency_keys SET response = ${response} WHERE organization_id = ${org} AND key = ${key}`
      return sql
        .onDialectOrElse({
          // One statement for a batch's answers, the keys and answers as one JSON parameter.
          pg: () => {
            const json = JSON.stringify(responses)
            return Effect.asVoid(sql`UPDATE idempotency_keys SET response = v.response
                FROM json_to_recordset(${json}::JSON) AS v(key TEXT, response TEXT)
                WHERE idempotency_keys.organization_id = ${org} AND idempotency_keys.key = v.key`)
          },
          // SQLite's UPDATE … FROM scanned the organization's keys for each answer (bench/batch.ts: ~3 ms an
          // item); its statements are in-process calls, so one indexed UPDATE per key is the cheap way.
          orElse: () => Effect.forEach(responses, one, { discard: true })
        })
        .pipe(Effect.asVoid, Effect.orDie)
    }

    const decodeAny = (balances: unknown) => fastBalances(balances) ?? decodeBalances(balances)
    const sortedByKey = <B extends { readonly customerId: string; readonly subjectId: string }>(
      balances: ReadonlyArray<B>
    ) => [...balances].sort((a, b) => byKey(a.customerId, b.customerId) || byKey(a.subjectId, b.subjectId))
    /** The missing rows of `balances` created (each with its window); nothing of an existing row changes. */
    const createMissing = (org: string, missing: BalancesNamed, now: number, pg: boolean) =>
      sql.unsafe(pg ? LOCK_BALANCES_INSERT_PG : LOCK_BALANCES_INSERT_SQLITE, [
        org,
        JSON.stringify(
          missing.map((b) => ({ c: b.customerId, s: b.subjectId, ws: b.init.windowStart, we: b.init.windowEnd }))
        ),
        now
      ])

    const lockBalances: EntitlementsRepoShape["lockBalances"] = (org, balances, now) =>
      Effect.gen(function* () {
        // One order for every batch and every writer step (byte order, as "C" collates): locks taken in it never
        // form a cycle between two transactions.
        const sorted = sortedByKey(balances)
        const pg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })
        // Two statements of one text whatever the batch's size, on either database.
        const lock = (chunk: typeof sorted) =>
          pg
            ? transactionQuery<{ balances: unknown }>(
                sql,
                pool,
                LOCK_BALANCES_SELECT_PG,
                [org, pgArrayLiteral(chunk.map((b) => b.customerId)), pgArrayLiteral(chunk.map((b) => b.subjectId))],
                "lock_balances"
              ).pipe(Effect.map(([locked]) => locked?.balances))
            : sql
                .unsafe<{ balances: string }>(LOCK_BALANCES_SELECT_SQLITE, [
                  org,
                  JSON.stringify(chunk.map((b) => [b.customerId, b.subjectId]))
                ])
                .pipe(Effect.map(([locked]) => JSON.parse(locked?.balances ?? "[]") as unknown))
        const decoded = (chunk: typeof sorted) => Effect.map(lock(chunk), decodeAny)
        // The rows that exist (locked on PostgreSQL); then the missing ones created and read (a customer's first
        // draws; on PostgreSQL a lock taken out of byte order there may deadlock, and the batch's transaction then
        // runs again).
        const existing = yield* decoded(sorted)
        if (existing.length === sorted.length) return existing
        const found = new Set(existing.map((b) => `${b.customerId}\u0000${b.subjectId}`))
        const missing = sorted.filter((b) => !found.has(`${b.customerId}\u0000${b.subjectId}`))
        yield* createMissing(org, missing, now, pg)
        return [...existing, ...(yield* decoded(missing))]
      }).pipe(Effect.orDie)

    /** SQLite, a guarded batch's read (`READ_CHANGED_BALANCES_SQLITE`); missing rows created first. */
    const readChangedSqlite: GuardedBatches["readChanged"] = (org, balances, now) =>
      Effect.gen(function* () {
        const read = (chunk: typeof balances) =>
          sql
            .unsafe<{ balances: string }>(READ_CHANGED_BALANCES_SQLITE, [
              org,
              JSON.stringify(chunk.map((b) => [b.customerId, b.subjectId, b.version ?? -1]))
            ])
            .pipe(Effect.map(([row]) => decodeAny(JSON.parse(row?.balances ?? "[]"))))
        return yield* withMissing(org, balances, now, false, read)
      }).pipe(Effect.orDie)

    /** The rows `read` answers; the missing ones among those unknown (`version` null) created first and read. */
    const withMissing = <E>(
      org: string,
      balances: Parameters<GuardedBatches["readChanged"]>[1],
      now: number,
      pg: boolean,
      read: (chunk: Parameters<GuardedBatches["readChanged"]>[1]) => Effect.Effect<ReadonlyArray<KeyedBalance>, E>
    ) =>
      Effect.gen(function* () {
        const changed = yield* read(balances)
        const found = new Set(changed.map((b) => `${b.customerId}\u0000${b.subjectId}`))
        const missing = balances.filter((b) => b.version === null && !found.has(`${b.customerId}\u0000${b.subjectId}`))
        if (missing.length === 0) return changed
        yield* createMissing(org, sortedByKey(missing), now, pg)
        return [...changed, ...(yield* read(missing))]
      })

    /** PostgreSQL, a guarded batch's read (`READ_CHANGED_BALANCES_PG`), on the pool; missing rows created first. */
    const makeReadChanged =
      (readPool: PgPool["Type"]): GuardedBatches["readChanged"] =>
      (org, balances, now) =>
        Effect.gen(function* () {
          const read = (chunk: typeof balances) =>
            poolQuery<{ balances: unknown }>(
              readPool,
              READ_CHANGED_BALANCES_PG,
              [
                org,
                pgArrayLiteral(chunk.map((b) => b.customerId)),
                pgArrayLiteral(chunk.map((b) => b.subjectId)),
                pgArrayLiteral(chunk.map((b) => b.version ?? -1))
              ]
              // Unnamed: planned for its arrays each time. Prepared, PostgreSQL switched to a generic plan that took
              // ~5.3 ms for 100 balances instead of ~0.8 (pg_stat_statements, bench/batch.ts).
            ).pipe(Effect.map(([row]) => decodeAny(row?.balances)))
          return yield* withMissing(org, balances, now, true, read)
        }).pipe(Effect.orDie)

    return {
      context,
      contexts: reader.readMany,
      commitBalances,
      readBalance: (org, customerId, subjectId) =>
        selectBalance(org, customerId, subjectId, false).pipe(
          Effect.map((rows) => Option.fromNullable(rows[0]).pipe(Option.map(toBalance))),
          Effect.orDie
        ),
      lockBalances,
      guarded: sql.onDialectOrElse({
        pg: () => Option.map(pool, (pool) => ({ readChanged: makeReadChanged(pool), commit: makeCommitGuarded(pool) })),
        orElse: () => Option.some({ readChanged: readChangedSqlite, commit: makeCommitGuardedSqlite(sql) })
      }),
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
      // A single request's key is a batch of one: one way to claim and to answer.
      claimIdempotencyKey: (org, key, requestHash, now, expiredBefore) =>
        Effect.map(claimIdempotencyKeys(org, [{ key, requestHash }], now, expiredBefore), (claims) => claims.get(key)!),
      claimIdempotencyKeys,
      saveIdempotentResponse: (org, key, response) => saveIdempotentResponses(org, [{ key, response }]),
      saveIdempotentResponses
    }
  })
)
