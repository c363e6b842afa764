import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "./support/catalog.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

const catalog = {
  features: [{ slug: "calls", name: "API calls", type: "metered" }],
  plans: [
    {
      slug: "payg",
      name: "Pay as you go",
      currency: "NGN",
      autoEnable: true,
      features: [{ slug: "calls", usageModel: "usage_based", pricePerUnit: 3 }]
    }
  ]
}

/** decisions.md §16: `{invoicePrefix}-000001` per organization, consecutive, assigned at finalization, never reused. */
for (const database of databases()) {
  describe(`invoice numbers on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const setup = async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      const usage = async (customer: string) => {
        expect(
          (await post(server, apiKey, "/v1/customers", { id: customer, email: `${customer}@x.test` })).status
        ).toBe(200)
        expect((await post(server, apiKey, "/v1/track", { customer, feature: "calls", value: 2 })).body.allowed).toBe(
          true
        )
      }
      const generate = (customer: string) => post(server, apiKey, "/v1/billing/invoice", { customer })
      return { apiKey, usage, generate }
    }

    test("the profile's prefix numbers finalized invoices; a new prefix continues the sequence", async () => {
      const { apiKey, usage, generate } = await setup()
      await usage("a")
      expect((await generate("a")).body.invoice.number).toBe("INV-000001")
      // Nothing to invoice: no number is spent.
      expect((await generate("a")).status).toBe(409)
      await post(server, apiKey, "/v1/billing/profile", { invoicePrefix: "ACME" })
      await usage("b")
      expect((await generate("b")).body.invoice.number).toBe("ACME-000002")
      await usage("a")
      expect((await generate("a")).body.invoice.number).toBe("ACME-000003")
      // Another organization starts its own sequence.
      const other = await setup()
      await other.usage("a")
      expect((await other.generate("a")).body.invoice.number).toBe("INV-000001")
    })

    test("concurrent finalization: every invoice its own number, consecutive, none skipped", async () => {
      const { apiKey, usage, generate } = await setup()
      await post(server, apiKey, "/v1/billing/profile", { invoicePrefix: "RACE" })
      const customers = Array.from({ length: 16 }, (_, i) => `c${i}`)
      for (const c of customers) await usage(c)
      // Each customer twice at once: one invoice each, the loser a 409 that spends no number.
      const answers = await Promise.all([...customers, ...customers].map(generate))
      const numbers = answers.filter((a) => a.status === 200).map((a) => a.body.invoice.number as string)
      expect(answers.filter((a) => a.status === 409).length).toBe(customers.length)
      expect(numbers.sort()).toEqual(customers.map((_, i) => `RACE-${String(i + 1).padStart(6, "0")}`))
    })
  })
}
