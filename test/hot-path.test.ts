/**
 * The hot path of check/track when several processes share one database (docs/decisions.md, "Performance"): two
 * instances of the service on the same database (SQLite in a file; PostgreSQL when DATABASE_URL is set), each with
 * its own caches, batches and balance writer, as two processes would be.
 */
import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Credits } from "../src/credits/Credits.ts"
import { Organizations } from "../src/organizations/Organizations.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const shared = databases().map((d) => (d.name === "sqlite" ? { ...d, config: { dataDir: "" } } : d))

for (const database of shared) {
  describe(`two instances on one ${database.name} database`, () => {
    let a: TestServer
    let b: TestServer
    let dir: string | undefined
    beforeAll(async () => {
      const config =
        database.name === "sqlite"
          ? { dataDir: (dir = mkdtempSync(join(tmpdir(), "billing-hot-path-"))) }
          : database.config
      a = await startServer(config)
      b = await startServer(config)
    })
    afterAll(async () => {
      await a.close()
      await b.close()
      if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
    })

    const events = (server: TestServer, orgId: string) =>
      server
        .run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql<{ n: number; total: number | null }>`SELECT COUNT(*) AS n, SUM(value) AS total FROM usage_events
          WHERE organization_id = ${orgId}`
          )
        )
        .then((rows) => ({ n: Number(rows[0]!.n), total: Number(rows[0]!.total ?? 0) }))

    test("concurrent tracks through both, on many balances and on one: exact to the last unit", async () => {
      const org = await a.createOrg()
      await syncCatalog(a, org.apiKey, {
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "calls", limit: 40 }] }]
      })
      for (const id of ["hot", "c1", "c2", "c3"]) {
        expect((await post(a, org.apiKey, "/v1/customers", { id, email: `${id}@example.com` })).status).toBe(200)
      }
      // 120 on the hot balance (limit 40) and 30 on each of three others, half through each instance, all at once.
      const requests = [
        ...Array.from({ length: 120 }, (_, i) => ({ server: i % 2 === 0 ? a : b, customer: "hot" })),
        ...Array.from({ length: 90 }, (_, i) => ({ server: i % 2 === 0 ? b : a, customer: `c${(i % 3) + 1}` }))
      ]
      // Every other request through check with sendEvent, the rest through track: both record.
      const answers = await Promise.all(
        requests.map(({ customer, server }, k) =>
          k % 4 < 2
            ? post(server, org.apiKey, "/v1/check", { customer, feature: "calls", value: 1, sendEvent: true })
            : post(server, org.apiKey, "/v1/track", { customer, feature: "calls", value: 1 })
        )
      )
      expect(answers.every((r) => r.status === 200)).toBe(true)
      const allowed = (customer: string) =>
        answers.filter((r, k) => r.body.allowed && requests[k]!.customer === customer).length
      expect(allowed("hot")).toBe(40)
      for (const c of ["c1", "c2", "c3"]) expect(allowed(c)).toBe(30)
      expect(await events(b, org.id)).toEqual({ n: 130, total: 130_000_000 })
      for (const server of [a, b]) {
        const hot = await post(server, org.apiKey, "/v1/check", { customer: "hot", feature: "calls", value: 0 })
        expect(hot.body).toMatchObject({ usage: 40, balance: 0 })
        const c1 = await post(server, org.apiKey, "/v1/check", { customer: "c1", feature: "calls", value: 0 })
        expect(c1.body).toMatchObject({ usage: 30, balance: 10 })
      }
    })

    test("a balance changed by the other instance (credits) is drawn from at once", async () => {
      const org = await a.createOrg()
      await syncCatalog(a, org.apiKey, {
        features: [{ slug: "images", name: "Images", type: "metered" }],
        creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "images", creditCost: 1 }] }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "credits", limit: 2 }] }]
      })
      await post(a, org.apiKey, "/v1/customers", { id: "cust", email: "cust@example.com" })
      // A learns the balance (and writes it); B then adds bonus credits behind A's back.
      expect(
        (await post(a, org.apiKey, "/v1/track", { customer: "cust", feature: "images", value: 2 })).body.allowed
      ).toBe(true)
      await b.run(Effect.flatMap(Credits, (c) => c.grant(org.id, "cust", "credits", 3, "bonus")))
      const drawn = await post(a, org.apiKey, "/v1/track", { customer: "cust", feature: "images", value: 3 })
      expect(drawn.body).toMatchObject({ allowed: true, code: "addon_credits_used", credits: { bonusBalance: 0 } })
      expect(
        (await post(a, org.apiKey, "/v1/check", { customer: "cust", feature: "images", value: 1 })).body.allowed
      ).toBe(false)
    })

    test("a sync through one instance is what the other decides on, at once", async () => {
      const org = await a.createOrg()
      const catalog = (limit: number) => ({
        features: [{ slug: "calls", name: "Calls", type: "metered" }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "calls", limit }] }]
      })
      await syncCatalog(a, org.apiKey, catalog(5))
      await post(a, org.apiKey, "/v1/customers", { id: "cust", email: "cust@example.com" })
      // B caches the catalog with a limit of 5 ...
      expect(
        (await post(b, org.apiKey, "/v1/check", { customer: "cust", feature: "calls", value: 0 })).body.limit
      ).toBe(5)
      // ... A raises it, and adds a feature: B's very next answers know both.
      await syncCatalog(a, org.apiKey, {
        ...catalog(50),
        features: [...catalog(50).features, { slug: "exports", name: "Exports", type: "boolean" }],
        plans: [{ ...catalog(50).plans[0]!, features: [{ slug: "calls", limit: 50 }, { slug: "exports" }] }]
      })
      expect(
        (await post(b, org.apiKey, "/v1/check", { customer: "cust", feature: "calls", value: 10 })).body
      ).toMatchObject({ allowed: true, limit: 50 })
      expect((await post(b, org.apiKey, "/v1/check", { customer: "cust", feature: "exports" })).body).toMatchObject({
        allowed: true,
        code: "access_granted"
      })
    })

    if (database.name === "postgresql") {
      test("a key revoked through one instance stops working on the other (NOTIFY), within moments", async () => {
        const org = await a.createOrg()
        const ok = () => b.fetch("/v1/customers", { apiKey: org.apiKey }).then((r) => r.status)
        expect(await ok()).toBe(200) // B has the key cached now
        await a.run(Effect.flatMap(Organizations, (o) => o.revokeKey(org.keyId)))
        let status = 200
        for (let i = 0; i < 40 && status === 200; i++) {
          await Bun.sleep(50)
          status = await ok()
        }
        expect(status).toBe(401)
      })
    }
  })
}
