import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, failure, ok, startServer, type TestServer } from "./support/harness.ts"

const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    { slug: "free", name: "Free", interval: "monthly", features: [{ slug: "tokens", limit: 10 }] },
    { slug: "team", name: "Team", features: [{ slug: "tokens", limit: 50 }] },
    { slug: "extra", name: "Extra", isAddon: true, features: [{ slug: "tokens", limit: 5 }] },
    {
      slug: "paid",
      name: "Paid",
      price: 5000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 1000 }]
    }
  ]
}

for (const database of databases()) {
  describe(`subscriptions on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const setup = async () => {
      const { apiKey } = await server.createOrg()
      await syncCatalog(server, apiKey, catalog)
      await post(server, apiKey, "/v1/customers", { id: "c1", email: "c1@example.com" })
      return { apiKey, client: await server.client(apiKey) }
    }

    test("a free plan attaches at once; attaching it again changes nothing", async () => {
      const { client } = await setup()
      const attached = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "free" } }))
      expect(attached).toMatchObject({
        success: true,
        checkoutUrl: null,
        subscription: { plan: "free", status: "active" }
      })
      const start = Date.parse(attached.subscription.currentPeriodStart!)
      const end = Date.parse(attached.subscription.currentPeriodEnd!)
      expect(end - start).toBeGreaterThanOrEqual(28 * 86_400_000)
      const again = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "free" } }))
      expect(again.subscription.id).toBe(attached.subscription.id)
      expect(again.message).toContain("already")
      const list = await ok(client.subscriptions.listSubscriptions({ urlParams: { customer: "c1" } }))
      expect(list.subscriptions.map((s) => s.plan)).toEqual(["free"])
    })

    test("a plan of the same group changes the current subscription (decisions.md §14); add-ons stack", async () => {
      const { client } = await setup()
      const free = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "free" } }))
      const team = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "team" } }))
      // Free to free: nothing to prorate, nothing to wait for: the same subscription on the new plan at once.
      expect(team.subscription).toMatchObject({ id: free.subscription.id, plan: "team", status: "active" })
      await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "extra" } }))
      const list = await ok(client.subscriptions.listSubscriptions({ urlParams: { customer: "c1" } }))
      expect(list.subscriptions.map((s) => [s.plan, s.status]).sort()).toEqual([
        ["extra", "active"],
        ["team", "active"]
      ])
    })

    test("unknown plan or customer; customerData creates the customer; a paid plan waits for payment", async () => {
      const { client } = await setup()
      expect(
        await failure(client.subscriptions.attach({ payload: { customer: "c1", product: "nope" } }))
      ).toMatchObject({ _tag: "NotFound", code: "plan_not_found" })
      expect(
        await failure(client.subscriptions.attach({ payload: { customer: "zz", product: "free" } }))
      ).toMatchObject({ _tag: "NotFound", code: "customer_not_found" })
      const created = await ok(
        client.subscriptions.attach({
          payload: { customer: "zz", product: "free", customerData: { email: "zz@example.com" } }
        })
      )
      expect(created.subscription.status).toBe("active")
      // On sandbox an organization without a provider account pays through the simulated provider.
      const paid = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "paid" } }))
      expect(paid.subscription.status).toBe("pending")
      expect(paid.checkoutUrl).toContain("/simulated/checkout/")
    })

    test("cancel keeps a renewing plan to its period end, then it stops granting", async () => {
      const { apiKey, client } = await setup()
      const { subscription } = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "free" } }))
      const canceled = await ok(client.subscriptions.cancelSubscription({ path: { id: subscription.id } }))
      expect(canceled.subscription).toMatchObject({ status: "active", cancelAtPeriodEnd: true })
      expect((await post(server, apiKey, "/v1/check", { customer: "c1", feature: "tokens" })).body.allowed).toBe(true)
      clock.advance(32 * 86_400_000)
      expect((await post(server, apiKey, "/v1/check", { customer: "c1", feature: "tokens" })).body.code).toBe(
        "no_active_subscription"
      )
      const list = await ok(client.subscriptions.listSubscriptions({ urlParams: { customer: "c1" } }))
      expect(list.subscriptions[0]!.status).toBe("canceled")
    })

    test("a never-renewing plan cancels at once; checkout needs a pending subscription", async () => {
      const { client } = await setup()
      const { subscription } = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "team" } }))
      expect(subscription.currentPeriodEnd).toBeNull()
      const checkout = await failure(
        client.subscriptions.checkoutSubscription({ path: { id: subscription.id }, payload: {} })
      )
      expect(checkout).toMatchObject({ _tag: "Conflict", code: "subscription_not_pending" })
      const canceled = await ok(client.subscriptions.cancelSubscription({ path: { id: subscription.id } }))
      expect(canceled.subscription.status).toBe("canceled")
      expect(await failure(client.subscriptions.cancelSubscription({ path: { id: "sub_missing" } }))).toMatchObject({
        code: "subscription_not_found"
      })
    })

    test("the typed client previews a change, schedules it and withdraws it (decisions.md §14)", async () => {
      const { client } = await setup()
      const { subscription } = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "free" } }))
      // "free" renews monthly; "team" is free with no interval: an interval change, so `now` by default.
      const preview = await ok(client.subscriptions.previewAttach({ payload: { customer: "c1", product: "team" } }))
      expect(preview).toMatchObject({
        subscriptionId: subscription.id,
        plan: "team",
        previousPlan: "free",
        when: "now",
        scheduled: false,
        lines: [],
        total: 0,
        discount: 0,
        tax: 0
      })
      const scheduled = await ok(
        client.subscriptions.attach({ payload: { customer: "c1", product: "team", when: "period_end" } })
      )
      expect(scheduled.subscription.scheduledChange).toEqual({ plan: "team", at: subscription.currentPeriodEnd! })
      const withdrawn = await ok(client.subscriptions.cancelChange({ path: { id: subscription.id } }))
      expect(withdrawn.subscription.scheduledChange).toBeUndefined()
      expect(withdrawn.subscription.plan).toBe("free")
      expect(await failure(client.subscriptions.cancelChange({ path: { id: "sub_missing" } }))).toMatchObject({
        code: "subscription_not_found"
      })
    })

    test("another organization cannot see or cancel the subscription", async () => {
      const { client } = await setup()
      const { subscription } = await ok(client.subscriptions.attach({ payload: { customer: "c1", product: "free" } }))
      const other = await server.client((await server.createOrg()).apiKey)
      expect(await failure(other.subscriptions.cancelSubscription({ path: { id: subscription.id } }))).toMatchObject({
        code: "subscription_not_found"
      })
      expect((await ok(other.subscriptions.listSubscriptions({ urlParams: {} }))).subscriptions).toEqual([])
    })
  })
}
