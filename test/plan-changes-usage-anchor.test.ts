import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/**
 * §14 "usage carries over" across a change of billing interval: the billing anchor restarts at the change, the
 * reset windows of the plan's features keep theirs (docs/decisions.md, "Plan changes").
 */
const DAY = 86_400_000
const plan = (slug: string, price: number, interval: string, limit: number) => ({
  slug,
  name: slug,
  price,
  currency: "NGN",
  interval,
  features: [{ slug: "tokens", limit, reset: "monthly" }]
})
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    plan("basic", 5000, "monthly", 1000),
    plan("pro-yearly", 200000, "yearly", 5000),
    plan("small-quarterly", 1000, "quarterly", 500),
    { slug: "free", name: "Free", interval: "monthly", features: [{ slug: "tokens", limit: 100, reset: "monthly" }] }
  ]
}

for (const database of databases()) {
  describe(`usage across an interval change on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "c1", email: "c1@example.com" })
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const attached = await call("/v1/attach", { customer: "c1", product: "basic" })
      expect(attached.status).toBe(200)
      // Paid at a checkout that saves the card, so the change below is charged and applied at once.
      await server.fetch(new URL(attached.body.checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      const tracked = await call("/v1/track", { customer: "c1", feature: "tokens", value: 900 })
      expect(tracked.body.allowed).toBe(true)
      const tokens = async (value?: number) =>
        (await call("/v1/check", { customer: "c1", feature: "tokens", ...(value === undefined ? {} : { value }) })).body
      const listed = await server.fetch("/v1/subscriptions?customer=c1", { apiKey: org.apiKey })
      const [paid] = ((await listed.json()) as any).subscriptions as Array<any>
      expect(paid).toMatchObject({ plan: "basic", status: "active" })
      return { call, tokens, startedAt: Date.parse(paid.currentPeriodStart) }
    }

    test("900 of 1,000 moving to a yearly 5,000 plan mid-window: 4,100 left, the window's reset unmoved", async () => {
      const { call, tokens, startedAt } = await setup()
      clock.advance(10 * DAY)
      const changed = await call("/v1/attach", { customer: "c1", product: "pro-yearly" })
      expect(changed.status).toBe(200)
      expect(changed.body.subscription).toMatchObject({ plan: "pro-yearly", status: "active" })
      // The billing anchor did restart at the change.
      expect(Date.parse(changed.body.subscription.currentPeriodStart)).toBeGreaterThan(startedAt)
      expect(await tokens()).toMatchObject({ allowed: true, usage: 900, limit: 5000, balance: 4100 })
      const used = await call("/v1/track", { customer: "c1", feature: "tokens", value: 4100 })
      expect(used.body.allowed).toBe(true)
      expect((await tokens(1)).allowed).toBe(false)
      // The window resets a month after the subscription's start, as it would have without the change.
      const nextReset = new Date(startedAt)
      nextReset.setUTCMonth(nextReset.getUTCMonth() + 1)
      clock.advance(nextReset.getTime() - clock.now() + 1_000)
      expect(await tokens()).toMatchObject({ allowed: true, usage: 0, balance: 5000 })
    }, 30_000)

    test("900 of 1,000 moving to a quarterly 500 plan is denied until the reset", async () => {
      const { call, tokens, startedAt } = await setup()
      clock.advance(10 * DAY)
      const changed = await call("/v1/attach", { customer: "c1", product: "small-quarterly", when: "now" })
      expect(changed.status).toBe(200)
      expect(changed.body.subscription).toMatchObject({ plan: "small-quarterly" })
      expect(await tokens(1)).toMatchObject({ allowed: false, usage: 900, limit: 500 })
      const nextReset = new Date(startedAt)
      nextReset.setUTCMonth(nextReset.getUTCMonth() + 1)
      clock.advance(nextReset.getTime() - clock.now() + 1_000)
      expect(await tokens(1)).toMatchObject({ allowed: true, usage: 0, limit: 500 })
    }, 30_000)

    test("a change waiting for its checkout: paid, the yearly plan counts the window's usage too", async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "c2", email: "c2@example.com" })
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      expect((await call("/v1/attach", { customer: "c2", product: "free" })).status).toBe(200)
      expect((await call("/v1/track", { customer: "c2", feature: "tokens", value: 90 })).body.allowed).toBe(true)
      clock.advance(3 * DAY)
      const changed = await call("/v1/attach", { customer: "c2", product: "pro-yearly" })
      expect(changed.body.subscription.pendingChange).toMatchObject({ plan: "pro-yearly" })
      await server.fetch(new URL(changed.body.checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })
      const check = await call("/v1/check", { customer: "c2", feature: "tokens" })
      expect(check.body).toMatchObject({ allowed: true, usage: 90, limit: 5000, balance: 4910 })
    }, 30_000)
  })
}
