import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Schema } from "effect"
import { SyncRequest } from "../src/api/catalog.ts"
import { Catalog } from "../src/catalog/Catalog.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * A batch's new customers (decisions.md §12, docs/decisions.md "New customers in batches"): created by the batch's
 * own transaction, set-based, as a single first track creates one; and a batch cut off by the request timeout (503)
 * leaves nothing of them.
 */

/** Two free autoEnable plans in one group (the second replaces the first), an add-on beside them, one with a trial. */
const CATALOG = {
  features: [{ slug: "f", name: "F", type: "metered" }],
  plans: [
    { slug: "a", name: "A", autoEnable: true, features: [{ slug: "f", limit: 1e9, reset: "monthly" }] },
    { slug: "b", name: "B", autoEnable: true, trialDays: 7, features: [{ slug: "f", limit: 1e9, reset: "monthly" }] },
    { slug: "x", name: "X", autoEnable: true, isAddon: true, features: [{ slug: "f", limit: 5, reset: "monthly" }] }
  ]
}

const rowsOf = (server: TestServer, org: string, externalId: string) =>
  server.run(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.all({
        customer: sql<{
          id: string
          email: string | null
          name: string | null
          metadata: string
        }>`SELECT id, email, name, metadata FROM customers WHERE organization_id = ${org} AND external_id = ${externalId}`,
        subscriptions: sql<{
          planId: string
          status: string
          currentPeriodEnd: unknown
          trialEndsAt: unknown
          canceledAt: unknown
          startedAt: unknown
        }>`SELECT s.plan_id, s.status, s.current_period_end, s.trial_ends_at, s.canceled_at, s.started_at
            FROM subscriptions s JOIN customers c ON c.organization_id = s.organization_id AND c.id = s.customer_id
            WHERE s.organization_id = ${org} AND c.external_id = ${externalId} ORDER BY s.plan_id`,
        events: sql<{ type: string; data: string }>`SELECT o.type, o.data FROM outbound_events o
            JOIN customers c ON c.organization_id = o.organization_id AND c.id = o.customer_id
            WHERE o.organization_id = ${org} AND c.external_id = ${externalId} ORDER BY o.id`
      })
    )
  )

/**
 * What a customer's creation left, without its ids and instants (which differ between two customers); subscriptions
 * by plan (ids made within one millisecond are in no particular order).
 */
const shapeOf = async (server: TestServer, org: string, externalId: string) => {
  const { customer, subscriptions, events } = await rowsOf(server, org, externalId)
  const start = Number(subscriptions[0]!.startedAt)
  const relative = (v: unknown) => (v === null ? null : Number(v) - start)
  return {
    customer: customer.map(({ email, name, metadata }) => ({ email, name, metadata: JSON.parse(metadata) })),
    subscriptions: subscriptions.map((s) => ({
      planId: s.planId,
      status: s.status,
      currentPeriodEnd: relative(s.currentPeriodEnd),
      trialEndsAt: relative(s.trialEndsAt),
      canceledAt: relative(s.canceledAt)
    })),
    events: events.map((e) => {
      const { id: _id, customerId: _c, createdAt: _cr, updatedAt: _u, ...data } = JSON.parse(e.data)
      return { type: e.type, plan: data.plan ?? null, status: data.status ?? null, email: data.email ?? null }
    })
  }
}

for (const database of databases()) {
  describe(`a batch's new customers on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(async () => {
      await server.close()
    })

    test("a batch creates each new customer, its autoEnable plans and its events as a first track does", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, CATALOG)
      const data = (email: string) => ({ email, name: "N", metadata: { tier: 2 } })
      const single = await post(server, org.apiKey, "/v1/track", {
        customer: "single",
        feature: "f",
        value: 2,
        customerData: data("single@example.com")
      })
      expect(single.status).toBe(200)
      const batch = await post(server, org.apiKey, "/v1/track/batch", {
        events: [
          { customer: "b1", feature: "f", value: 2, customerData: data("b1@example.com") },
          // The same new customer again (its data is the first item's) and without data: one customer.
          { customer: "b1", feature: "f", value: 1, customerData: { name: "other" } },
          { customer: "b1", feature: "f", value: 1 },
          // A new customer has no entity; a feature that does not exist; a new customer of each.
          { customer: "b2", feature: "f", value: 1, entity: "seat-1", customerData: {} },
          { customer: "b3", feature: "nope", value: 1, customerData: {} },
          // Without data an unknown customer is not created.
          { customer: "b4", feature: "f", value: 1 }
        ]
      })
      expect(batch.status).toBe(200)
      const results = batch.body.results
      expect(results.map((r: any) => r.code)).toEqual([
        "tracked",
        "tracked",
        "tracked",
        "entity_not_found",
        "feature_not_found",
        "customer_not_found"
      ])
      expect(results[2].balance).toBe(single.body.balance - 2)
      expect(await shapeOf(server, org.id, "b1")).toEqual({
        ...(await shapeOf(server, org.id, "single")),
        customer: [{ email: "b1@example.com", name: "N", metadata: { tier: 2 } }],
        events: (await shapeOf(server, org.id, "single")).events.map((e) =>
          e.email === null ? e : { ...e, email: "b1@example.com" }
        )
      })
      // Created though their items were refused, as a first track creates its customer before deciding.
      expect((await rowsOf(server, org.id, "b2")).customer.length).toBe(1)
      expect((await rowsOf(server, org.id, "b3")).customer.length).toBe(1)
      expect((await rowsOf(server, org.id, "b4")).customer.length).toBe(0)
    })

    test("emails: another customer's is refused, a batch's second use of one too, one without an external id is taken", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, CATALOG)
      expect(
        (await post(server, org.apiKey, "/v1/customers", { id: "owner", email: "owned@example.com" })).status
      ).toBe(200)
      expect((await post(server, org.apiKey, "/v1/customers", { email: "loose@example.com" })).status).toBe(200)
      const batch = await post(server, org.apiKey, "/v1/track/batch", {
        events: [
          { customer: "e1", feature: "f", value: 1, customerData: { email: "OWNED@example.com" } },
          { customer: "e2", feature: "f", value: 1, customerData: { email: "twice@example.com" } },
          { customer: "e3", feature: "f", value: 1, customerData: { email: "Twice@example.com" } },
          { customer: "e4", feature: "f", value: 1, customerData: { email: "loose@example.com" } }
        ]
      })
      expect(batch.status).toBe(200)
      const [e1, e2, e3, e4] = batch.body.results
      expect(e1.code).toBe("customer_not_found")
      expect(e1.details.message).toContain("belongs to another customer")
      expect(e2.code).toBe("tracked")
      expect(e3.code).toBe("customer_not_found")
      expect(e3.details.message).toContain("belongs to another customer")
      // The customer with that email and no external id is the one named: it takes the reference.
      expect(e4.allowed).toBe(true)
      const loose = await rowsOf(server, org.id, "e4")
      expect(loose.customer.map((c) => c.email)).toEqual(["loose@example.com"])
      expect((await rowsOf(server, org.id, "e1")).customer.length).toBe(0)
      expect((await rowsOf(server, org.id, "e3")).customer.length).toBe(0)
    })

    test("concurrent batches creating the same customers: each customer once, every item counted once", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, CATALOG)
      const events = Array.from({ length: 50 }, (_, i) => ({
        customer: `r${i}`,
        feature: "f",
        value: 1,
        customerData: {}
      }))
      const answers = await Promise.all(
        Array.from({ length: 4 }, () => post(server, org.apiKey, "/v1/track/batch", { events }))
      )
      for (const a of answers) {
        expect(a.status).toBe(200)
        expect(a.body.results.every((r: any) => r.code === "tracked")).toBe(true)
      }
      const [row] = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) => sql<{ customers: unknown; subscriptions: unknown; usage: unknown; created: unknown }>`SELECT
            (SELECT COUNT(*) FROM customers WHERE organization_id = ${org.id}) AS customers,
            (SELECT COUNT(*) FROM subscriptions WHERE organization_id = ${org.id}) AS subscriptions,
            (SELECT COUNT(*) FROM usage_events WHERE organization_id = ${org.id}) AS usage,
            (SELECT COUNT(*) FROM outbound_events WHERE organization_id = ${org.id} AND type = 'customer.created') AS created`
        )
      )
      expect(Number(row!.customers)).toBe(50)
      expect(Number(row!.subscriptions)).toBe(150)
      expect(Number(row!.usage)).toBe(200)
      expect(Number(row!.created)).toBe(50)
    })
  })

  describe(`a batch of new customers and the request timeout on ${database.name}`, () => {
    let hurried: TestServer
    beforeAll(async () => {
      // A deadline that falls inside the batch's work (PostgreSQL: while customers were created one by one, before).
      hurried = await startServer({ ...database.config, requestTimeoutMs: database.name === "sqlite" ? 5 : 300 })
    })
    afterAll(async () => {
      await hurried.close()
    })

    test("a batch answered 503 left nothing: no customer, subscription, event or usage; one answered 200 left all", async () => {
      const org = await hurried.createOrg()
      // Synced directly: the deadline is shorter than a sync.
      await hurried.run(
        Effect.flatMap(Catalog, (catalog) => catalog.sync(org.id, Schema.decodeUnknownSync(SyncRequest)(CATALOG)))
      )
      const count = async (prefix: string) => {
        const [row] = await hurried.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql<{ customers: unknown; subscriptions: unknown; usage: unknown; events: unknown }>`SELECT
              (SELECT COUNT(*) FROM customers WHERE organization_id = ${org.id}
                AND external_id LIKE ${`${prefix}%`}) AS customers,
              (SELECT COUNT(*) FROM subscriptions s JOIN customers c
                ON c.organization_id = s.organization_id AND c.id = s.customer_id
                WHERE s.organization_id = ${org.id} AND c.external_id LIKE ${`${prefix}%`}) AS subscriptions,
              (SELECT COUNT(*) FROM usage_events u JOIN customers c
                ON c.organization_id = u.organization_id AND c.id = u.customer_id
                WHERE u.organization_id = ${org.id} AND c.external_id LIKE ${`${prefix}%`}) AS usage,
              (SELECT COUNT(*) FROM outbound_events o JOIN customers c
                ON c.organization_id = o.organization_id AND c.id = o.customer_id
                WHERE o.organization_id = ${org.id} AND c.external_id LIKE ${`${prefix}%`}) AS events`
          )
        )
        return [row!.customers, row!.subscriptions, row!.usage, row!.events].map(Number)
      }
      const statuses: Array<number> = []
      const size = database.name === "sqlite" ? 300 : 1000
      for (let round = 0; round < 3; round++) {
        const prefix = `t${round}-`
        const events = Array.from({ length: size }, (_, i) => ({
          customer: `${prefix}${i}`,
          feature: "f",
          value: 1,
          customerData: { name: `N${i}` }
        }))
        const answer = await post(hurried, org.apiKey, "/v1/track/batch", { events })
        statuses.push(answer.status)
        // Whatever the interrupted work was doing has ended (rolled back, or committed) by then.
        await Bun.sleep(500)
        // The customers, 3 subscriptions each, their usage, and 1 + 3 + 1 events each (the replaced plan's end).
        expect(await count(prefix)).toEqual(answer.status === 503 ? [0, 0, 0, 0] : [1, 3, 1, 5].map((n) => n * size))
      }
      // The deadline did cut batches off (else this test would prove nothing about them).
      expect(statuses).toContain(503)
    }, 60_000)
  })
}
