import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { databases, failure, ok, startServer, type TestServer } from "./support/harness.ts"

for (const database of databases()) {
  describe(`customers on ${database.name}`, () => {
    let server: TestServer
    let apiKey: string
    beforeAll(async () => {
      server = await startServer(database.config)
      apiKey = (await server.createOrg()).apiKey
    })
    afterAll(() => server.close())

    test("creates a customer and returns the full object", async () => {
      const client = await server.client(apiKey)
      const created = await ok(
        client.customers.createCustomer({
          payload: { id: "user-1", email: "Ada@Example.com", name: "Ada", metadata: { plan: "pro" } }
        })
      )
      expect(created.id).toStartWith("cus_")
      expect(created).toMatchObject({
        success: true,
        externalId: "user-1",
        email: "Ada@Example.com",
        name: "Ada",
        metadata: { plan: "pro" },
        billing: { overageLimit: null, featureConfigs: [] }
      })
      expect(created.createdAt).toBeNumber()
      expect(created.createdAt).toBe(created.updatedAt)
    })

    test("resolves an existing customer by external id and merges metadata", async () => {
      const client = await server.client(apiKey)
      const first = await ok(
        client.customers.createCustomer({
          payload: { id: "user-2", email: "bob@example.com", metadata: { a: 1 } }
        })
      )
      const again = await ok(
        client.customers.createCustomer({
          payload: { id: "user-2", email: "bob@example.com", name: "Bob", metadata: { b: 2 } }
        })
      )
      expect(again.id).toBe(first.id)
      expect(again.name).toBe("Bob")
      expect(again.metadata).toEqual({ a: 1, b: 2 })
    })

    test("resolves by email, case-insensitively, when no id is given", async () => {
      const client = await server.client(apiKey)
      const first = await ok(client.customers.createCustomer({ payload: { email: "carol@example.com" } }))
      const again = await ok(
        client.customers.createCustomer({ payload: { email: "CAROL@example.com", name: "Carol" } })
      )
      expect(again.id).toBe(first.id)
      expect(again.name).toBe("Carol")
      expect(first.externalId).toBeNull()
    })

    test("an email used by another customer is a 409 customer_conflict", async () => {
      const client = await server.client(apiKey)
      await ok(client.customers.createCustomer({ payload: { id: "dan", email: "dan@example.com" } }))
      await ok(client.customers.createCustomer({ payload: { id: "erin", email: "erin@example.com" } }))
      const error = await failure(
        client.customers.createCustomer({ payload: { id: "erin", email: "dan@example.com" } })
      )
      expect(error).toMatchObject({ _tag: "Conflict", code: "customer_conflict" })
      const otherId = await failure(
        client.customers.createCustomer({ payload: { id: "frank", email: "dan@example.com" } })
      )
      expect(otherId).toMatchObject({ _tag: "Conflict", code: "customer_conflict" })
      const erin = await ok(client.customers.getCustomer({ path: { id: "erin" } }))
      expect(erin.email).toBe("erin@example.com")
    })

    test("gets a customer by id, external id or email; unknown is 404", async () => {
      const client = await server.client(apiKey)
      const created = await ok(client.customers.createCustomer({ payload: { id: "gina", email: "gina@example.com" } }))
      for (const ref of [created.id, "gina", "GINA@example.com"]) {
        const found = await ok(client.customers.getCustomer({ path: { id: ref } }))
        expect(found.id).toBe(created.id)
      }
      const missing = await failure(client.customers.getCustomer({ path: { id: "nobody" } }))
      expect(missing).toMatchObject({ _tag: "NotFound", code: "customer_not_found" })
    })

    test("a reference matching two customers is customer_ambiguous", async () => {
      const client = await server.client(apiKey)
      // One customer's external id is another's email.
      await ok(client.customers.createCustomer({ payload: { id: "hank@example.com", email: "h1@example.com" } }))
      await ok(client.customers.createCustomer({ payload: { id: "h2", email: "hank@example.com" } }))
      const error = await failure(client.customers.getCustomer({ path: { id: "hank@example.com" } }))
      expect(error).toMatchObject({ _tag: "Conflict", code: "customer_ambiguous" })
    })

    test("sets and clears the overage limit", async () => {
      const client = await server.client(apiKey)
      await ok(client.customers.createCustomer({ payload: { id: "ivy", email: "ivy@example.com" } }))
      const set = await ok(
        client.customers.setOverageLimit({
          payload: { customer: "ivy", maxOverageAmount: 50000, onLimitReached: "notify" }
        })
      )
      expect(set.billing.overageLimit).toMatchObject({ maxOverageAmount: 50000, onLimitReached: "notify" })
      const defaulted = await ok(
        client.customers.setOverageLimit({ payload: { customer: "ivy", maxOverageAmount: 100 } })
      )
      expect(defaulted.billing.overageLimit).toMatchObject({ maxOverageAmount: 100, onLimitReached: "block" })
      expect(defaulted.billing.overageLimit?.createdAt).toBe(set.billing.overageLimit!.createdAt)
      const cleared = await ok(
        client.customers.setOverageLimit({ payload: { customer: "ivy", maxOverageAmount: null } })
      )
      expect(cleared.billing.overageLimit).toBeNull()
      const read = await ok(client.customers.getCustomer({ path: { id: "ivy" } }))
      expect(read.billing.overageLimit).toBeNull()
    })

    test("overage limit validation and unknown customers", async () => {
      for (const body of [
        { customer: "ivy", maxOverageAmount: 0 },
        { customer: "ivy", maxOverageAmount: -5 }
      ]) {
        const response = await server.fetch("/v1/customers/overage-limit", {
          method: "POST",
          apiKey,
          body: JSON.stringify(body)
        })
        expect(response.status).toBe(400)
        expect(await response.json()).toMatchObject({ success: false, code: "invalid_request" })
      }
      const client = await server.client(apiKey)
      const missing = await failure(
        client.customers.setOverageLimit({ payload: { customer: "zed", maxOverageAmount: 5 } })
      )
      expect(missing).toMatchObject({ code: "customer_not_found" })
    })
  })

  describe(`customer listing on ${database.name}`, () => {
    let server: TestServer
    let apiKey: string
    beforeAll(async () => {
      server = await startServer(database.config)
      apiKey = (await server.createOrg()).apiKey
      const client = await server.client(apiKey)
      for (let i = 1; i <= 7; i++) {
        await ok(
          client.customers.createCustomer({
            payload: { id: `ext-${i}`, email: `person${i}@example.com`, name: i % 2 === 0 ? `Even ${i}` : `Odd ${i}` }
          })
        )
        // Distinct creation instants, so "newest first" is observable.
        await Bun.sleep(2)
      }
      await ok(client.customers.createCustomer({ payload: { id: "100%_literal", email: "special@example.com" } }))
    })
    afterAll(() => server.close())

    test("lists newest first with defaults", async () => {
      const client = await server.client(apiKey)
      const page = await ok(client.customers.listCustomers({ urlParams: {} }))
      expect(page).toMatchObject({ success: true, total: 8, limit: 50, offset: 0 })
      expect(page.data.map((c) => c.externalId)).toEqual([
        "100%_literal",
        "ext-7",
        "ext-6",
        "ext-5",
        "ext-4",
        "ext-3",
        "ext-2",
        "ext-1"
      ])
      expect(page.data[0]).not.toHaveProperty("billing")
    })

    test("pages with limit and offset; total counts every match", async () => {
      const client = await server.client(apiKey)
      const page = await ok(client.customers.listCustomers({ urlParams: { limit: 3, offset: 2 } }))
      expect(page.total).toBe(8)
      expect(page.data.map((c) => c.externalId)).toEqual(["ext-6", "ext-5", "ext-4"])
      const past = await ok(client.customers.listCustomers({ urlParams: { limit: 3, offset: 20 } }))
      expect(past.data).toEqual([])
      expect(past.total).toBe(8)
    })

    test("search is a case-insensitive substring of email, name or external id", async () => {
      const client = await server.client(apiKey)
      const byName = await ok(client.customers.listCustomers({ urlParams: { search: "eVeN" } }))
      expect(byName.data.map((c) => c.externalId)).toEqual(["ext-6", "ext-4", "ext-2"])
      expect(byName.total).toBe(3)
      const byEmail = await ok(client.customers.listCustomers({ urlParams: { search: "PERSON5@" } }))
      expect(byEmail.data.map((c) => c.externalId)).toEqual(["ext-5"])
      const byExternal = await ok(client.customers.listCustomers({ urlParams: { search: "xt-3" } }))
      expect(byExternal.data.map((c) => c.externalId)).toEqual(["ext-3"])
      // Wildcard characters are literal.
      const literal = await ok(client.customers.listCustomers({ urlParams: { search: "%_" } }))
      expect(literal.data.map((c) => c.externalId)).toEqual(["100%_literal"])
      const none = await ok(client.customers.listCustomers({ urlParams: { search: "_" } }))
      expect(none.total).toBe(1)
    })

    test("email is exact and case-insensitive; externalId is exact", async () => {
      const client = await server.client(apiKey)
      const byEmail = await ok(client.customers.listCustomers({ urlParams: { email: "PERSON2@example.com" } }))
      expect(byEmail.data.map((c) => c.externalId)).toEqual(["ext-2"])
      const partial = await ok(client.customers.listCustomers({ urlParams: { email: "person2@example" } }))
      expect(partial.total).toBe(0)
      const byExternal = await ok(client.customers.listCustomers({ urlParams: { externalId: "ext-4" } }))
      expect(byExternal.data.map((c) => c.email)).toEqual(["person4@example.com"])
      const wrongCase = await ok(client.customers.listCustomers({ urlParams: { externalId: "EXT-4" } }))
      expect(wrongCase.total).toBe(0)
    })

    test("out-of-range paging parameters are 400 with every problem listed", async () => {
      const response = await server.fetch("/v1/customers?limit=0&offset=-1", { apiKey })
      expect(response.status).toBe(400)
      const body = (await response.json()) as { code: string; details: Array<{ path: string }> }
      expect(body.code).toBe("invalid_request")
      expect(body.details.map((d) => d.path).sort()).toEqual(["limit", "offset"])
      for (const query of ["limit=101", "limit=abc", "limit=1.5", "search=", "email="]) {
        const r = await server.fetch(`/v1/customers?${query}`, { apiKey })
        expect(r.status).toBe(400)
      }
    })
  })
}
