/**
 * The hot statements and their readers have one source (src/entitlements/hotStatements.ts, docs/decisions.md
 * "Performance"). These tests fail when they drift apart:
 * - the text the module generates for PostgreSQL's functions differs from the text the latest migration installs;
 * - on a database, the function PostgreSQL runs differs from the module's;
 * - on each database, a read's JSON has other keys than its reader's schema (the inline SQLite statement included),
 *   or a recorded event's columns differ from what the step was given.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Option } from "effect"
import { readdirSync } from "node:fs"
import { join } from "node:path"
import { EntitlementsRepo } from "../src/entitlements/EntitlementsRepo.ts"
import { PgPool } from "../src/platform/db/PgPool.ts"
import {
  commitBalancesFunction,
  contextReadMany,
  ENTITLEMENT_READS,
  LOCK_BALANCES_SELECT_PG,
  entitlementReadsFunction,
  HotBalance,
  HotConfig,
  HotCustomer,
  HotSubscription,
  keysOf,
  readsParameter,
  SQLITE_ENTITLEMENT_READ,
  sqliteReadParameters
} from "../src/entitlements/hotStatements.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const MIGRATIONS = join(import.meta.dir, "..", "src", "platform", "db", "migrations")

/** Per function name, the text of the latest migration that defines it (exported as a string constant). */
const latestDefinitions = async () => {
  const latest = new Map<string, { readonly migration: string; readonly text: string }>()
  const files = readdirSync(MIGRATIONS)
    .filter((f) => /^\d{4}_.*\.ts$/.test(f))
    .sort()
  for (const file of files) {
    const module = (await import(join(MIGRATIONS, file))) as Record<string, unknown>
    for (const value of Object.values(module)) {
      if (typeof value !== "string") continue
      const name = value.match(/^CREATE (?:OR REPLACE )?FUNCTION (\w+)\(/)?.[1]
      if (name !== undefined) latest.set(name, { migration: file, text: value })
    }
  }
  return latest
}

const body = (text: string) => text.slice(text.indexOf("$$") + 2, text.lastIndexOf("$$"))

describe("the hot statements' one source", () => {
  test("what the module generates is what the latest migration installs (a change there needs a migration)", async () => {
    const latest = await latestDefinitions()
    expect(latest.get("entitlement_reads")?.text).toBe(entitlementReadsFunction())
    expect(latest.get("commit_balances")?.text).toBe(commitBalancesFunction())
  })

  test("the generated statements carry every key of their readers, and only those", () => {
    const keysIn = (sql: string, builder: string) =>
      [...sql.matchAll(new RegExp(`${builder}\\(([^()]*(?:\\([^()]*\\)[^()]*)*)\\)`, "g"))].map((m) =>
        [...m[1]!.matchAll(/'(\w+)', /g)].map((k) => k[1])
      )
    for (const [sql, builder] of [
      [entitlementReadsFunction(), "json_build_object"],
      [SQLITE_ENTITLEMENT_READ, "json_object"],
      [contextReadMany("pg"), "json_build_object"],
      [contextReadMany("sqlite"), "json_object"]
    ] as const) {
      const objects = keysIn(sql, builder).filter((keys) => !keys.includes("catalogVersion"))
      expect(objects).toEqual(
        [keysOf(HotCustomer), keysOf(HotSubscription), keysOf(HotConfig), keysOf(HotBalance)].map((k) => [...k])
      )
    }
    // A batch's locked balances are read as the hot read reads balances.
    expect(keysIn(LOCK_BALANCES_SELECT_PG, "json_build_object")).toEqual([[...keysOf(HotBalance)]])
  })
})

for (const database of databases()) {
  describe(`the hot statements on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    /** A customer with a subscription, a config of the feature and a balance: every part of a read is present. */
    const setUp = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [
          { slug: "p", name: "P", autoEnable: true, features: [{ slug: "calls", limit: 100, overage: "charge" }] }
        ]
      })
      const created = await post(server, org.apiKey, "/v1/customers", {
        id: "c1",
        email: "C1@example.com",
        name: "C 1"
      })
      expect(created.status).toBe(200)
      const config = await post(server, org.apiKey, "/v1/customers/feature-config", {
        customer: "c1",
        feature: "calls",
        overage: "charge",
        maxOverageUnits: 5
      })
      expect(config.status).toBe(200)
      const tracked = await post(server, org.apiKey, "/v1/track", { customer: "c1", feature: "calls", value: 2 })
      expect(tracked.body).toMatchObject({ allowed: true })
      const ids = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{ customerId: string; featureId: string }>`SELECT c.id AS customer_id, f.id AS feature_id
          FROM customers c JOIN features f ON f.organization_id = c.organization_id
          WHERE c.organization_id = ${org.id} AND f.slug = 'calls'`
        )
      )
      return { org, customerId: ids[0]!.customerId, featureId: ids[0]!.featureId }
    }

    test("a read's JSON has exactly its reader's keys, and the reader reads it", async () => {
      const { customerId, featureId, org } = await setUp()
      // By email, lower-cased as the read looks it up.
      const read = {
        org: org.id,
        ref: "c1@example.com",
        refLower: "c1@example.com",
        feature: featureId,
        subjects: [featureId]
      }
      const json = await server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql.onDialectOrElse({
            pg: () =>
              Effect.map(
                sql
                  .withoutTransforms()
                  .unsafe<{ contexts: Array<Record<string, Array<Record<string, unknown>>>> }>(ENTITLEMENT_READS, [
                    readsParameter([read])
                  ]),
                (rows) => rows[0]!.contexts[0]!
              ),
            orElse: () =>
              Effect.map(
                sql
                  .withoutTransforms()
                  .unsafe<{ context: string }>(SQLITE_ENTITLEMENT_READ, sqliteReadParameters(read)),
                (rows) => JSON.parse(rows[0]!.context) as Record<string, Array<Record<string, unknown>>>
              )
          })
        )
      )
      expect(Object.keys(json)).toEqual(["catalogVersion", "customers", "subscriptions", "configs", "balances"])
      for (const [part, schema] of [
        ["customers", HotCustomer],
        ["subscriptions", HotSubscription],
        ["configs", HotConfig],
        ["balances", HotBalance]
      ] as const) {
        expect(json[part]!.length).toBe(1)
        expect(Object.keys(json[part]![0]!)).toEqual([...keysOf(schema)])
      }
      const context = await server.run(
        Effect.flatMap(EntitlementsRepo, (repo) => repo.context(org.id, "c1@example.com", featureId, [featureId]))
      )
      expect(context).toMatchObject({
        customers: [{ id: customerId, externalId: "c1", email: "C1@example.com", overageMaxAmount: null }],
        subscriptions: [{ customerId, status: "active", cancelAtPeriodEnd: false }],
        configs: [{ customerId, overage: "charge", maxOverageUnits: 5_000_000n }],
        balances: [{ customerId, subjectId: featureId, used: 2_000_000n, overage: 0n, bonus: 0n, addon: 0n }]
      })
    })

    for (const locked of [false, true]) {
      test(`a step records its events column for column, and its rollups${locked ? " (a batch's, rows locked)" : ""}`, async () => {
        const { customerId, featureId, org } = await setUp()
        const [before] = (
          await server.run(
            Effect.flatMap(EntitlementsRepo, (repo) => repo.context(org.id, customerId, featureId, [featureId]))
          )
        ).balances
        const event = {
          organizationId: org.id,
          id: `evt_${crypto.randomUUID().replaceAll("-", "").slice(0, 26)}`,
          customerId,
          featureId,
          subjectId: featureId,
          entityId: "seat-1",
          value: 3_000_000n,
          cost: 3_000_000n,
          fromPlan: 2_000_000n,
          fromBonus: 0n,
          fromAddon: 0n,
          overage: 1_000_000n,
          billable: 1_000_000n,
          planId: "plan_x",
          // Quotes, a backslash, braces, a comma and NULL as text: what an array literal must escape.
          metadata: { source: 'a "quoted" \\ {x,y} NULL', unicode: "é✓" },
          createdAt: before!.windowStart + 1
        }
        // A second event sharing some columns and not others: SQLite binds a column of one value once (the first
        // event's columns, each from its own row or from the shared ones, must land where they belong).
        const other = {
          ...event,
          id: `evt_${crypto.randomUUID().replaceAll("-", "").slice(0, 26)}`,
          entityId: null,
          value: 1_000_000n,
          cost: 1_000_000n,
          fromPlan: 1_000_000n,
          overage: 0n,
          billable: 0n,
          metadata: {}
        }
        const commit = (expectedVersion: number) => ({
          organizationId: org.id,
          customerId,
          subjectId: featureId,
          expectedVersion,
          next: { ...before!, used: before!.used + 3_000_000n, overage: 1_000_000n },
          events: [event, other],
          now: event.createdAt
        })
        const step = (expectedVersion: number) =>
          server.run(
            Effect.flatMap(EntitlementsRepo, (repo) =>
              locked
                ? Effect.flatMap(SqlClient.SqlClient, (sql) =>
                    sql.withTransaction(
                      Effect.zipRight(
                        repo.lockBalances(
                          org.id,
                          [{ customerId, subjectId: featureId, init: { windowStart: 0, windowEnd: null } }],
                          event.createdAt
                        ),
                        repo.commitBalances([commit(expectedVersion)], true)
                      )
                    )
                  )
                : repo.commitBalances([commit(expectedVersion)])
            )
          )
        // A stale version writes nothing, then the current one writes it all.
        expect(await step(before!.version - 1)).toEqual([Option.none()])
        expect(await step(before!.version)).toEqual([Option.some(before!.version + 1)])
        const rows = await server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql`SELECT * FROM usage_events WHERE organization_id = ${org.id}
              AND id IN (${event.id}, ${other.id}) ORDER BY value DESC`
          )
        )
        expect(
          rows.map((r) => ({
            ...r,
            value: BigInt(r.value as number),
            cost: BigInt(r.cost as number),
            fromPlan: BigInt(r.fromPlan as number),
            fromBonus: BigInt(r.fromBonus as number),
            fromAddon: BigInt(r.fromAddon as number),
            overage: BigInt(r.overage as number),
            billable: BigInt(r.billable as number),
            metadata: JSON.parse(r.metadata as string),
            createdAt: Number(r.createdAt)
          }))
        ).toEqual([
          { ...event, invoiceId: null },
          { ...other, invoiceId: null }
        ] as never)
        const rollups = await server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql<{ value: number; records: number }>`SELECT value, records FROM usage_rollups
          WHERE organization_id = ${org.id} AND customer_id = ${customerId}`
          )
        )
        expect(rollups.reduce((sum, r) => sum + Number(r.value), 0)).toBe(6_000_000)
        expect(rollups.reduce((sum, r) => sum + Number(r.records), 0)).toBe(3)
      })
    }

    if (database.name === "postgresql") {
      test("a batch's lock and set-based write are prepared statements of the transaction's connection", async () => {
        const { customerId, featureId, org } = await setUp()
        const prepared = () =>
          server.run(
            Effect.flatMap(EntitlementsRepo, (repo) =>
              Effect.flatMap(SqlClient.SqlClient, (sql) =>
                sql.withTransaction(
                  Effect.zipRight(
                    repo.lockBalances(
                      org.id,
                      [{ customerId, subjectId: featureId, init: { windowStart: 0, windowEnd: null } }],
                      Date.now()
                    ),
                    Effect.zipRight(
                      repo.commitBalances([], true),
                      sql<{ name: string }>`SELECT name FROM pg_prepared_statements
                        WHERE name IN ('lock_balances', 'commit_locked') ORDER BY name`
                    )
                  )
                )
              )
            )
          )
        // Behind a transaction pooler (CI's run through PgBouncer) nothing is prepared under a name: the server
        // connection is another client's after the transaction.
        const pooled = Option.exists(await server.run(Effect.serviceOption(PgPool)), (p) => p.pooled)
        expect((await prepared()).map((r) => r.name)).toEqual(pooled ? [] : ["commit_locked", "lock_balances"])
      })

      test("a batch's set-based write refuses balances of two organizations, and writes nothing", async () => {
        const [a, b] = [await setUp(), await setUp()]
        const commit = (s: typeof a) => ({
          organizationId: s.org.id,
          customerId: s.customerId,
          subjectId: s.featureId,
          expectedVersion: 1,
          next: { windowStart: 0, windowEnd: null, used: 1n, overage: 0n, bonus: 0n, addon: 0n },
          events: [],
          now: Date.now()
        })
        const written = server.run(
          Effect.flatMap(EntitlementsRepo, (repo) =>
            Effect.flatMap(SqlClient.SqlClient, (sql) =>
              sql.withTransaction(repo.commitBalances([commit(a), commit(b)], true))
            )
          )
        )
        await expect(written).rejects.toThrow("one organization")
        const [balance] = await server
          .run(
            Effect.flatMap(EntitlementsRepo, (repo) => repo.context(a.org.id, a.customerId, a.featureId, [a.featureId]))
          )
          .then((c) => c.balances)
        expect(balance?.used).toBe(2_000_000n)
      })

      test("the functions PostgreSQL runs are the module's", async () => {
        const installed = await server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql<{ proname: string; prosrc: string }>`SELECT proname, prosrc FROM pg_proc
            WHERE proname IN ('entitlement_reads', 'commit_balances')`
          )
        )
        const byName = new Map(installed.map((p) => [p.proname, p.prosrc]))
        expect(byName.get("entitlement_reads")).toBe(body(entitlementReadsFunction()))
        expect(byName.get("commit_balances")).toBe(body(commitBalancesFunction()))
      })
    }
  })
}
