import { SqlClient } from "@effect/sql"
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { Effect } from "effect"
import { makeEncryption } from "../../src/platform/encryption.ts"
import { Renewals } from "../../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/** One organization's bad data does not stop the renewals of the others (docs/decisions.md, "Worker isolation"). */
const DAY = 86_400_000
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 300000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 100 }]
    }
  ]
}

for (const database of databases()) {
  describe(`renewals with one organization's unreadable payment method on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const runDue = () => server.run(Effect.flatMap(Renewals, (r) => r.runDue))

    /** An organization whose customer subscribed to Pro and paid at a checkout that saved the card. */
    const subscribed = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "sub", email: "sub@example.com" })
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "sub", product: "pro" })
      await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const subscription = async () => (await get("/v1/subscriptions?customer=sub")).subscriptions[0]
      const invoices = async () => (await get("/v1/billing/invoices?customer=sub")).invoices as Array<any>
      expect((await subscription()).status).toBe("active")
      return { org, subscription, invoices }
    }

    test("a saved method encrypted with another key: that renewal is left past due, the others renew", async () => {
      const first = await subscribed()
      const broken = await subscribed()
      const last = await subscribed()
      // The broken organization's saved card, as if written under another encryption key.
      const foreign = makeEncryption(randomBytes(32)).encrypt("AUTH_foreign")
      const changed = await server.run(
        Effect.flatMap(SqlClient.SqlClient, (sql) =>
          sql`UPDATE payment_methods SET token = ${foreign} WHERE organization_id = ${broken.org.id}`.pipe(
            Effect.zipRight(sql<{ n: number }>`SELECT COUNT(*) AS n FROM payment_methods
              WHERE organization_id = ${broken.org.id} AND token = ${foreign}`)
          )
        )
      )
      expect(Number(changed[0]!.n)).toBe(1)

      clock.advance(32 * DAY)
      const report = await runDue()
      expect(report).toMatchObject({ renewed: 2, pastDue: 1, canceled: 0 })
      // Newest first: the renewal, then the first payment's own invoice (h18).
      for (const ok of [first, last]) {
        expect((await ok.subscription()).status).toBe("active")
        expect((await ok.invoices()).map((i) => i.status)).toEqual(["paid", "paid"])
      }
      expect((await broken.subscription()).status).toBe("past_due")
      expect((await broken.invoices()).map((i) => i.status)).toEqual(["open", "paid"])

      // A later run retries it (past due a day later), and still renews nothing twice.
      clock.advance(DAY + 1_000)
      expect(await runDue()).toMatchObject({ renewed: 0, pastDue: 1, canceled: 0 })
      expect((await broken.subscription()).status).toBe("past_due")
      expect((await first.invoices()).map((i) => i.status)).toEqual(["paid", "paid"])
    }, 60_000)
  })
}
