import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * A batch cut off by the request timeout (a 503 at the deadline, its fiber interrupted wherever it was) leaves all of
 * its accepted items recorded or none (decisions.md §12): whatever the timing, the count of events is 0 or the batch.
 * PostgreSQL only: two processes' worth of servers on one database, one with a deadline shorter than a batch. (On
 * SQLite a batch's statements run on the event loop's thread, so the deadline's timer fires only after the batch
 * has answered: it is never cut off there; docs/decisions.md, "Batches and event time".)
 */
for (const database of databases().filter((d) => d.name === "postgresql")) {
  describe(`a batch and the request timeout on ${database.name}`, () => {
    let server: TestServer
    let hurried: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
      hurried = await startServer({ ...database.config, requestTimeoutMs: 25 })
    })
    afterAll(async () => {
      await hurried.close()
      await server.close()
    })

    test("timed-out batches of 1,000 record all of their items or none, and a retry with keys counts each once", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, {
        features: [{ slug: "f", name: "F", type: "metered" }],
        plans: [{ slug: "p", name: "P", autoEnable: true, features: [{ slug: "f", limit: 1e9, reset: "monthly" }] }]
      })
      const customers = Array.from({ length: 200 }, (_, i) => `t${i}`)
      // The customers first, by the process without a deadline.
      const created = await post(server, org.apiKey, "/v1/track/batch", {
        events: customers.map((customer) => ({ customer, feature: "f", value: 0, customerData: {} }))
      })
      expect(created.status).toBe(200)
      // The organization's recorded usage, from the database (events and the balances they moved must agree).
      const usage = async () => {
        const [row] = await server.run(
          Effect.flatMap(
            SqlClient.SqlClient,
            (sql) => sql<{ events: unknown; used: unknown }>`SELECT
                (SELECT COUNT(*) FROM usage_events WHERE organization_id = ${org.id} AND value > 0) AS events,
                (SELECT COALESCE(SUM(used), 0) FROM balances WHERE organization_id = ${org.id}) AS used`
          )
        )
        expect(Number(row!.used)).toBe(Number(row!.events) * 1_000_000)
        return Number(row!.events)
      }
      let expected = await usage()
      const statuses = new Set<number>()
      for (let round = 0; round < 3; round++) {
        const events = Array.from({ length: 1000 }, (_, i) => ({
          customer: customers[i % customers.length],
          feature: "f",
          value: 1,
          idempotencyKey: `r${round}-${i}`
        }))
        const first = await post(hurried, org.apiKey, "/v1/track/batch", { events })
        statuses.add(first.status)
        // Let an interrupted transaction finish rolling back (or a late commit land) before counting.
        await Bun.sleep(200)
        const after = await usage()
        expect([expected, expected + 1000]).toContain(after)
        // Retried (by the other process, without a deadline): the keys make the total exactly one batch more,
        // whatever the first attempt did.
        expect((await post(server, org.apiKey, "/v1/track/batch", { events })).status).toBe(200)
        expected += 1000
        await Bun.sleep(200)
        expect(await usage()).toBe(expected)
      }
      // The deadline did cut batches off (else this test would prove nothing about them).
      expect(statuses.has(503)).toBe(true)
    }, 60_000)
  })
}
