import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type Client, databases, failure, ok, startServer, type TestServer } from "./support/harness.ts"

const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" },
    { slug: "images", name: "Images", type: "metered" },
    { slug: "sso", name: "SSO", type: "boolean" }
  ],
  plans: [
    {
      slug: "free",
      name: "Free",
      interval: "monthly",
      autoEnable: true,
      features: [
        { slug: "tokens", limit: 10, overage: "block", pricePerUnit: 2 },
        { slug: "images", limit: 5, overage: "charge", pricePerUnit: 10 },
        { slug: "sso" }
      ]
    }
  ]
}

for (const database of databases()) {
  describe(`per-feature customer config on ${database.name}`, () => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer(database.config)
    })
    afterAll(() => server.close())

    const post = async (apiKey: string, path: string, body: unknown) => {
      const response = await server.fetch(path, { method: "POST", apiKey, body: JSON.stringify(body) })
      return { status: response.status, body: (await response.json()) as any }
    }

    /** A fresh organization with the catalog and one customer ("cust") on the free plan. */
    const setup = async () => {
      const { apiKey } = await server.createOrg()
      expect((await post(apiKey, "/v1/sync", catalog)).status).toBe(200)
      const client: Client = await server.client(apiKey)
      const customer = await ok(client.customers.createCustomer({ payload: { id: "cust", email: "cust@example.com" } }))
      const track = (feature: string, value: number) => post(apiKey, "/v1/track", { customer: "cust", feature, value })
      return { apiKey, client, customer, track }
    }

    test("overage charge with a unit cap overrides the plan's block", async () => {
      const { client, track } = await setup()
      expect((await track("tokens", 10)).body).toMatchObject({ allowed: true, code: "tracked", usage: 10 })
      expect((await track("tokens", 1)).body).toMatchObject({ allowed: false, code: "limit_exceeded" })
      const updated = await ok(
        client.customers.setFeatureConfig({
          payload: { customer: "cust", feature: "tokens", overage: "charge", maxOverageUnits: 5 }
        })
      )
      expect(updated.billing.featureConfigs).toEqual([
        {
          feature: { id: expect.stringMatching(/^feat_/), slug: "tokens", name: "Tokens" },
          overage: "charge",
          maxOverageUnits: 5,
          createdAt: expect.any(Number),
          updatedAt: expect.any(Number)
        }
      ])
      expect((await track("tokens", 3)).body).toMatchObject({ allowed: true, code: "tracked_overage" })
      expect((await track("tokens", 2)).body).toMatchObject({ allowed: true, code: "tracked_overage" })
      const denied = await track("tokens", 1)
      expect(denied.status).toBe(200)
      expect(denied.body).toMatchObject({ allowed: false, code: "limit_exceeded" })
    })

    test("overage block overrides the plan's charge", async () => {
      const { client, track } = await setup()
      await ok(
        client.customers.setFeatureConfig({ payload: { customer: "cust", feature: "images", overage: "block" } })
      )
      expect((await track("images", 5)).body).toMatchObject({ allowed: true, code: "tracked" })
      expect((await track("images", 1)).body).toMatchObject({ allowed: false, code: "limit_exceeded" })
    })

    test("every full customer object carries the configs", async () => {
      const { client, customer } = await setup()
      expect(customer.billing.featureConfigs).toEqual([])
      await ok(
        client.customers.setFeatureConfig({
          payload: { customer: "cust", feature: "tokens", overage: "charge", maxOverageUnits: 3 }
        })
      )
      const byId = (await ok(client.customers.getCustomer({ path: { id: customer.id } }))).billing.featureConfigs
      const resolved = (
        await ok(client.customers.createCustomer({ payload: { id: "cust", email: "cust@example.com" } }))
      ).billing.featureConfigs
      const capped = (
        await ok(
          client.customers.setOverageLimit({
            payload: { customer: "cust", maxOverageAmount: 1000 }
          })
        )
      ).billing.featureConfigs
      for (const configs of [byId, resolved, capped]) {
        expect(configs).toHaveLength(1)
        expect(configs[0]).toMatchObject({ feature: { slug: "tokens" }, overage: "charge", maxOverageUnits: 3 })
      }
    })

    test("upsert by slug or id: one config per feature; createdAt kept, updatedAt moves only on change", async () => {
      const { client } = await setup()
      const first = (
        await ok(
          client.customers.setFeatureConfig({
            payload: { customer: "cust", feature: "tokens", overage: "charge", maxOverageUnits: 5 }
          })
        )
      ).billing.featureConfigs[0]!
      await Bun.sleep(5)
      const same = (
        await ok(
          client.customers.setFeatureConfig({
            payload: { customer: "cust", feature: first.feature.id, overage: "charge", maxOverageUnits: 5 }
          })
        )
      ).billing.featureConfigs
      expect(same).toEqual([first])
      await Bun.sleep(5)
      // maxOverageUnits omitted: no cap.
      const changed = (
        await ok(
          client.customers.setFeatureConfig({
            payload: { customer: "cust", feature: "tokens", overage: "block" }
          })
        )
      ).billing.featureConfigs
      expect(changed).toHaveLength(1)
      expect(changed[0]).toMatchObject({ overage: "block", maxOverageUnits: null, createdAt: first.createdAt })
      expect(changed[0]!.updatedAt).toBeGreaterThan(first.updatedAt)
      const both = (
        await ok(
          client.customers.setFeatureConfig({
            payload: { customer: "cust", feature: "images", overage: "charge", maxOverageUnits: null }
          })
        )
      ).billing.featureConfigs
      expect(both.map((c) => c.feature.slug)).toEqual(["tokens", "images"])
    })

    test("unknown feature or customer is 404; boolean feature and a cap that is not a whole count are 400", async () => {
      const { apiKey, client } = await setup()
      expect(
        await failure(
          client.customers.setFeatureConfig({
            payload: { customer: "cust", feature: "nope", overage: "charge" }
          })
        )
      ).toMatchObject({ _tag: "NotFound", code: "feature_not_found" })
      expect(
        await failure(
          client.customers.setFeatureConfig({
            payload: { customer: "nobody", feature: "tokens", overage: "charge" }
          })
        )
      ).toMatchObject({ _tag: "NotFound", code: "customer_not_found" })
      expect(
        await failure(
          client.customers.setFeatureConfig({
            payload: { customer: "cust", feature: "sso", overage: "charge" }
          })
        )
      ).toMatchObject({ _tag: "BadRequest", code: "invalid_request" })
      // maxOverageUnits is an integer up to 1e9 (decisions.md §1); the typed client refuses these before sending.
      for (const [cap, message] of [
        [1.5, "must be an integer"],
        [1e9 + 1, "must be at most 1000000000"]
      ] as const) {
        const refused = await post(apiKey, "/v1/customers/feature-config", {
          customer: "cust",
          feature: "tokens",
          overage: "charge",
          maxOverageUnits: cap
        })
        expect(refused).toMatchObject({
          status: 400,
          body: { code: "invalid_request", details: [{ path: "maxOverageUnits", message }] }
        })
      }
      const customer = await ok(client.customers.getCustomer({ path: { id: "cust" } }))
      expect(customer.billing.featureConfigs).toEqual([])
    })

    test("raw request: a negative cap or an unknown overage value is a 400", async () => {
      const { apiKey } = await setup()
      for (const body of [
        { customer: "cust", feature: "tokens", overage: "charge", maxOverageUnits: -1 },
        { customer: "cust", feature: "tokens", overage: "maybe" }
      ]) {
        const response = await post(apiKey, "/v1/customers/feature-config", body)
        expect(response.status).toBe(400)
        expect(response.body).toMatchObject({ success: false, code: "invalid_request" })
      }
    })
  })
}
