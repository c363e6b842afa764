import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Organizations } from "../src/organizations/Organizations.ts"
import { databases, failure, ok, startServer, type TestServer } from "./support/harness.ts"

for (const database of databases()) {
  describe(`authentication and tenancy on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const expectUnauthorized = async (response: Response) => {
      expect(response.status).toBe(401)
      expect(await response.json()).toMatchObject({ success: false, error: "Unauthorized", code: "unauthorized" })
    }

    test("a missing, malformed or unknown key is 401 in the error body", async () => {
      await expectUnauthorized(await server.fetch("/v1/customers"))
      await expectUnauthorized(await server.fetch("/v1/customers", { headers: { authorization: "Basic abc" } }))
      await expectUnauthorized(await server.fetch("/v1/customers", { apiKey: "sk_test_doesnotexist" }))
    })

    test("a key of the other environment is rejected", async () => {
      const { apiKey } = await server.createOrg()
      await expectUnauthorized(await server.fetch("/v1/customers", { apiKey: apiKey.replace("sk_test_", "sk_live_") }))
    })

    test("authentication comes before validation: a bad body without a key is 401", async () => {
      await expectUnauthorized(await server.fetch("/v1/customers", { method: "POST", body: "{}" }))
    })

    test("a key revoked mid-run stops working at once; the organization's other keys go on", async () => {
      const org = await server.createOrg()
      const second = await server.run(Effect.flatMap(Organizations, (o) => o.createKey(org.slug)))
      const client = await server.client(org.apiKey)
      await ok(client.customers.createCustomer({ payload: { email: "before@example.com" } }))
      await server.run(Effect.flatMap(Organizations, (o) => o.revokeKey(org.keyId)))
      const error = await failure(client.customers.createCustomer({ payload: { email: "after@example.com" } }))
      expect(error).toMatchObject({ _tag: "Unauthorized", code: "unauthorized" })
      const other = await server.client(second.apiKey)
      const list = await ok(other.customers.listCustomers({ urlParams: {} }))
      expect(list.data.map((c) => c.email)).toEqual(["before@example.com"])
    })

    test("two organizations cannot see each other's customers", async () => {
      const a = await server.createOrg()
      const b = await server.createOrg()
      const clientA = await server.client(a.apiKey)
      const clientB = await server.client(b.apiKey)
      const mine = await ok(clientA.customers.createCustomer({ payload: { id: "shared-ext", email: "x@example.com" } }))
      for (const ref of [mine.id, "shared-ext", "x@example.com"]) {
        expect(await failure(clientB.customers.getCustomer({ path: { id: ref } }))).toMatchObject({
          _tag: "NotFound",
          code: "customer_not_found"
        })
      }
      expect((await ok(clientB.customers.listCustomers({ urlParams: {} }))).total).toBe(0)
      expect(
        await failure(clientB.customers.setOverageLimit({ payload: { customer: mine.id, maxOverageAmount: 5 } }))
      ).toMatchObject({ code: "customer_not_found" })
      // The same external id and email are free to use in another organization.
      const theirs = await ok(
        clientB.customers.createCustomer({ payload: { id: "shared-ext", email: "x@example.com" } })
      )
      expect(theirs.id).not.toBe(mine.id)
      const stillMine = await ok(clientA.customers.getCustomer({ path: { id: "shared-ext" } }))
      expect(stillMine).toMatchObject({ id: mine.id, billing: { overageLimit: null } })
    })
  })
}
