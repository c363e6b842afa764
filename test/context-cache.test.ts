import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * A batch keeps what it read of each customer while the organization's context version (migration 0019) stays put.
 * Whatever changes a customer, its subscriptions or its feature configs, through the API or by SQL from another
 * process, moves the version, and the next batch decides over the change.
 */
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" }],
  plans: [
    { slug: "free", name: "Free", autoEnable: true, features: [{ slug: "tokens", limit: 10, reset: "monthly" }] },
    {
      slug: "pro",
      name: "Pro",
      features: [{ slug: "tokens", limit: 100, reset: "monthly", overage: "charge", overagePrice: 1 }]
    }
  ]
}

for (const database of databases()) {
  describe(`a batch's kept reads on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const call = (path: string, body: Record<string, unknown>) => post(server, org.apiKey, path, body)
      const batch = async (events: Array<Record<string, unknown>>) => {
        const answer = await call("/v1/track/batch", { events })
        expect(answer.status).toBe(200)
        return answer.body.results as Array<Record<string, unknown>>
      }
      const version = () =>
        server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) =>
              sql<{ version: string | number }>`SELECT version FROM context_versions WHERE organization_id = ${org.id}`
          ).pipe(Effect.map((rows) => Number(rows[0]?.version ?? 0)))
        )
      const cancelBySql = (customer: string) =>
        server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql`UPDATE subscriptions SET status = 'canceled'
              WHERE organization_id = ${org.id} AND customer_id = ${customer}`
          )
        )
      return { org, call, batch, version, cancelBySql }
    }

    test("a customer created after a batch missed it is found by the next batch", async () => {
      const { call, batch } = await setup()
      expect((await batch([{ customer: "late", feature: "tokens", value: 1 }]))[0]).toMatchObject({
        allowed: false,
        code: "customer_not_found"
      })
      expect((await call("/v1/customers", { id: "late", email: "late@example.com" })).status).toBe(200)
      expect((await batch([{ customer: "late", feature: "tokens", value: 1 }]))[0]).toMatchObject({
        allowed: true,
        code: "tracked",
        usage: 1
      })
    })

    test("a plan attached, an overage override set, an email added: each seen by the next batch", async () => {
      const { call, batch } = await setup()
      await call("/v1/customers", { id: "c1", email: "c1@example.com" })
      const over = (value: number) => batch([{ customer: "c1", feature: "tokens", value }])
      expect((await over(11))[0]).toMatchObject({ allowed: false, code: "limit_exceeded", limit: 10 })

      expect((await call("/v1/attach", { customer: "c1", product: "pro" })).status).toBe(200)
      expect((await over(101))[0]).toMatchObject({ allowed: true, code: "tracked_overage", limit: 100 })

      const config = await call("/v1/customers/feature-config", { customer: "c1", feature: "tokens", overage: "block" })
      expect(config.status).toBe(200)
      expect((await over(1))[0]).toMatchObject({ allowed: false, code: "limit_exceeded" })

      // A reference by email: unknown until the customer has that email, and unknown again once it has another.
      const byEmail = (email: string) => batch([{ customer: email, feature: "tokens", value: 0 }])
      expect((await byEmail("C1@Example.com"))[0]).toMatchObject({ allowed: true, code: "tracked" })
      expect((await byEmail("C1-new@Example.com"))[0]).toMatchObject({ code: "customer_not_found" })
      expect((await call("/v1/customers", { id: "c1", email: "c1-new@example.com" })).status).toBe(200)
      expect((await byEmail("C1-new@Example.com"))[0]).toMatchObject({ allowed: true, code: "tracked" })
      expect((await byEmail("C1@Example.com"))[0]).toMatchObject({ code: "customer_not_found" })
    })

    test("a transaction writing many rows moves the version: once on PostgreSQL, and again for the next", async () => {
      const { call, batch, version } = await setup()
      const before = await version()
      // Three customers, each with its autoEnable subscription: six rows written by one transaction.
      const created = await batch(
        ["m1", "m2", "m3"].map((customer) => ({ customer, feature: "tokens", value: 1, customerData: {} }))
      )
      expect(created.map((r) => r.code)).toEqual(["tracked", "tracked", "tracked"])
      const after = await version()
      if (database.name === "postgresql") expect(after).toBe(before + 1)
      else expect(after).toBeGreaterThan(before)
      expect((await call("/v1/customers", { id: "m4", email: "m4@example.com" })).status).toBe(200)
      expect(await version()).toBeGreaterThan(after)
    })

    test("rows changed by SQL from another process move the version; the next batch decides over them", async () => {
      const { call, batch, version, cancelBySql } = await setup()
      const created = await call("/v1/customers", { id: "c2", email: "c2@example.com" })
      expect((await batch([{ customer: "c2", feature: "tokens", value: 1 }]))[0]).toMatchObject({ code: "tracked" })
      const before = await version()
      await cancelBySql(created.body.id)
      expect(await version()).toBeGreaterThan(before)
      expect((await batch([{ customer: "c2", feature: "tokens", value: 1 }]))[0]).toMatchObject({
        allowed: false,
        code: "no_active_subscription"
      })
    })

    test("tracks and a customer's metadata leave the version alone; a no-op update too", async () => {
      const { call, batch, version } = await setup()
      await call("/v1/customers", { id: "c3", email: "c3@example.com", name: "Ada" })
      const before = await version()
      expect(before).toBeGreaterThan(0)
      await batch([{ customer: "c3", feature: "tokens", value: 1 }])
      await call("/v1/track", { customer: "c3", feature: "tokens", value: 1 })
      await call("/v1/customers", { id: "c3", email: "c3@example.com", name: "Ada L", metadata: { tier: "gold" } })
      await call("/v1/customers", { id: "c3", email: "c3@example.com" })
      expect(await version()).toBe(before)
      await call("/v1/customers/overage-limit", { customer: "c3", maxOverageAmount: 5 })
      expect(await version()).toBeGreaterThan(before)
    })
  })
}

/** Two instances of the service on one database (PostgreSQL, or one SQLite file): each keeps its own reads. */
for (const database of databases()) {
  test(`two instances on ${database.name}: a plan attached through one is seen by the other's next batch`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "billing-kept-reads-"))
    const config = database.name === "sqlite" ? { dataDir: dir } : database.config
    const first = await startServer(config)
    const second = await startServer(config)
    try {
      const org = await first.createOrg()
      await syncCatalog(first, org.apiKey, catalog)
      await post(first, org.apiKey, "/v1/customers", { id: "shared", email: "shared@example.com" })
      const batchOn = async (server: TestServer, value: number) =>
        (
          await post(server, org.apiKey, "/v1/track/batch", {
            events: [{ customer: "shared", feature: "tokens", value }]
          })
        ).body.results[0]
      expect(await batchOn(first, 11)).toMatchObject({ allowed: false, code: "limit_exceeded", limit: 10 })
      expect(await batchOn(second, 11)).toMatchObject({ allowed: false, limit: 10 })
      expect((await post(second, org.apiKey, "/v1/attach", { customer: "shared", product: "pro" })).status).toBe(200)
      expect(await batchOn(first, 11)).toMatchObject({ allowed: true, code: "tracked", limit: 100 })
    } finally {
      await first.close()
      await second.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
}
