/**
 * Several processes on one database, as a deployment behind a connection pooler runs them (issue 38). Run as every
 * contract suite is (SQLite in a file shared by two instances; PostgreSQL when DATABASE_URL is set), and a second
 * time in CI through PgBouncer in transaction mode (`.ci/run`, scripts/pgbouncer.sh: DATABASE_URL is PgBouncer's,
 * DATABASE_POOLER=transaction), where statements prepared on one server connection would meet other clients'.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Option, Redacted } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { KEY_CACHE_MS } from "../src/organizations/OrganizationsRepo.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import type { AppConfigShape } from "../src/platform/config.ts"
import { PgPool } from "../src/platform/db/PgPool.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const MICRO = 1_000_000
const shared = databases().map((d) => (d.name === "sqlite" ? { ...d, config: { dataDir: "" } } : d))

for (const database of shared) {
  describe(`two instances on one ${database.name} database (through the pooler when one is configured)`, () => {
    let a: TestServer
    let b: TestServer
    let dir: string | undefined
    beforeAll(async () => {
      const config =
        database.name === "sqlite"
          ? { dataDir: (dir = mkdtempSync(join(tmpdir(), "billing-pooler-"))) }
          : database.config
      a = await startServer(config)
      b = await startServer(config)
    })
    afterAll(async () => {
      await a?.close()
      await b?.close()
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    })

    /** A balance against its events (micro-units), and the events' count, for one customer. */
    const ledger = (orgId: string, customer: string) =>
      a.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql<{ used: string | number; total: string | number | null; n: string | number }>`
            SELECT b.used, (SELECT SUM(e.value) FROM usage_events e WHERE e.organization_id = b.organization_id
                AND e.customer_id = b.customer_id) AS total,
              (SELECT COUNT(*) FROM usage_events e WHERE e.organization_id = b.organization_id
                AND e.customer_id = b.customer_id) AS n
            FROM balances b JOIN customers c ON c.organization_id = b.organization_id AND c.id = b.customer_id
            WHERE b.organization_id = ${orgId} AND c.external_id = ${customer}`.pipe(
            Effect.map(([row]) => ({ used: Number(row!.used), total: Number(row!.total ?? 0), n: Number(row!.n) }))
          )
        )
      )

    test("200 concurrent tracks against a limit of 10, through both instances, admit 10; no 5xx", async () => {
      const org = await a.createOrg()
      await syncCatalog(a, org.apiKey, {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "calls", limit: 10 }] }]
      })
      expect((await post(a, org.apiKey, "/v1/customers", { id: "hot", email: "hot@example.com" })).status).toBe(200)
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, i) =>
          post(i % 2 === 0 ? a : b, org.apiKey, "/v1/track", { customer: "hot", feature: "calls", value: 1 })
        )
      )
      expect(answers.filter((r) => r.status !== 200).map((r) => r.status)).toEqual([])
      expect(answers.filter((r) => r.body.allowed === true).length).toBe(10)
      expect(await ledger(org.id, "hot")).toEqual({ used: 10 * MICRO, total: 10 * MICRO, n: 10 })
    })

    test("batches of 200 through both instances, new customers among them: every answer 200, balances equal events", async () => {
      const org = await a.createOrg()
      await syncCatalog(a, org.apiKey, {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "calls", limit: 50 }] }]
      })
      const customers = Array.from({ length: 8 }, (_, i) => `c${i}`)
      // 6 batches of 200 items over 8 customers: 150 draws of 1 per customer against a limit of 50.
      const batches = Array.from({ length: 6 }, (_, n) =>
        Array.from({ length: 200 }, (_, k) => ({
          customer: customers[(n + k) % customers.length]!,
          feature: "calls",
          value: 1,
          customerData: {}
        }))
      )
      const answers = await Promise.all(
        batches.map((events, n) => post(n % 2 === 0 ? a : b, org.apiKey, "/v1/track/batch", { events }))
      )
      expect(answers.map((r) => r.status)).toEqual(batches.map(() => 200))
      const admitted = answers.flatMap((r) => r.body.results).filter((r: { allowed?: boolean }) => r.allowed === true)
      expect(admitted.length).toBe(customers.length * 50)
      for (const customer of customers) {
        expect(await ledger(org.id, customer)).toEqual({ used: 50 * MICRO, total: 50 * MICRO, n: 50 })
      }
    })
  })
}

/**
 * Revocations reach other processes before their key cache expires (KEY_CACHE_MS), however their session is
 * configured: LISTEN on a direct session, or (behind a transaction pooler without one) a poll every second.
 */
const postgres = databases().find((d) => d.name === "postgresql")
if (postgres !== undefined) {
  // CI's second run says it goes through PgBouncer (TEST_THROUGH_POOLER=1); DATABASE_POOLER is left to `auto` there.
  const throughPooler = process.env.TEST_THROUGH_POOLER === "1"
  test(`DATABASE_POOLER=auto ${throughPooler ? "recognises the pooler" : "sees PostgreSQL's own sessions"}`, async () => {
    const server = await startServer({ ...postgres.config, databasePooler: "auto" })
    try {
      const pool = await server.run(Effect.serviceOption(PgPool))
      expect(Option.map(pool, (p) => p.pooled)).toEqual(Option.some(throughPooler))
    } finally {
      await server.close()
    }
  })

  // A direct session: DATABASE_DIRECT_URL (CI's run through the pooler sets it), else DATABASE_URL itself.
  const direct = process.env.DATABASE_DIRECT_URL?.trim() || process.env.DATABASE_URL!.trim()
  const modes: ReadonlyArray<{ readonly name: string; readonly config: Partial<AppConfigShape> }> = [
    { name: "polled (DATABASE_POOLER=transaction, no direct URL)", config: { databasePooler: "transaction" } },
    {
      name: "LISTEN over DATABASE_DIRECT_URL",
      config: { databaseDirectUrl: Option.some(Redacted.make(direct)) }
    }
  ]
  for (const mode of modes) {
    describe(`key revocations ${mode.name}`, () => {
      let a: TestServer
      let b: TestServer
      beforeAll(async () => {
        a = await startServer({ ...postgres.config, ...mode.config })
        b = await startServer({ ...postgres.config, ...mode.config })
      })
      afterAll(async () => {
        await a?.close()
        await b?.close()
      })

      test("a key revoked through one instance stops working on the other before its cache would expire", async () => {
        const org = await a.createOrg()
        const status = () => b.fetch("/v1/customers", { apiKey: org.apiKey }).then((r) => r.status)
        expect(await status()).toBe(200) // B has the key cached now
        const revoked = performance.now()
        await a.run(Effect.flatMap(Organizations, (o) => o.revokeKey(org.keyId)))
        let seen = 200
        while (seen === 200 && performance.now() - revoked < KEY_CACHE_MS - 1_000) {
          await Bun.sleep(100)
          seen = await status()
        }
        expect(seen).toBe(401)
      })
    })
  }
}
