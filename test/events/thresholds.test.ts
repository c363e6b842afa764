import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { post, syncCatalog } from "../support/catalog.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * `usage.threshold_reached` (decisions.md §11): 80% and 100% of a granted limit, once per level per reset window,
 * decided in the draw that crosses it, on both write paths (the balance writer's batched step and the locked
 * transaction of an idempotent request).
 */
const DAY = 86_400_000
const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered" },
    { slug: "gen", name: "Gen", type: "metered" }
  ],
  creditSystems: [{ slug: "cr", name: "Credits", features: [{ feature: "gen", creditCost: 2 }] }],
  plans: [
    {
      slug: "free",
      name: "Free",
      autoEnable: true,
      features: [
        { slug: "tokens", limit: 100, reset: "daily" },
        { slug: "cr", limit: 50, reset: "monthly" }
      ]
    }
  ]
}

interface Alert {
  readonly customer: string
  readonly feature: string
  readonly creditSystem?: string
  readonly threshold: number
  readonly usage: number
  readonly limit: number
  readonly balance: number
  readonly resetsAt: string
}

for (const database of databases()) {
  describe(`usage thresholds on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const alerts = async (customer?: string): Promise<Array<Alert>> => {
        const query = customer === undefined ? "" : `&customer=${customer}`
        const response = await server.fetch(`/v1/events?type=usage.threshold_reached&limit=100${query}`, {
          apiKey: org.apiKey
        })
        expect(response.status).toBe(200)
        return ((await response.json()) as { data: Array<{ data: Alert }> }).data.map((e) => e.data).reverse()
      }
      const track = (customer: string, value: number, feature = "tokens", headers: Record<string, string> = {}) =>
        post(server, org.apiKey, "/v1/track", { customer, feature, value, customerData: {} }, headers)
      return { org, alerts, track }
    }

    test("80% then 100%, each once, with the balance at the crossing; nothing for draws below or denied", async () => {
      const { org, alerts, track } = await setup()
      expect((await track("c1", 79)).body.allowed).toBe(true)
      expect(await alerts()).toEqual([])
      const crossing = await track("c1", 1)
      const found = await server.fetch("/v1/customers/c1", { apiKey: org.apiKey })
      const customer = ((await found.json()) as { id: string }).id
      expect(customer).toStartWith("cus_")
      expect(await alerts()).toEqual([
        {
          customer,
          feature: "tokens",
          threshold: 80,
          usage: 80,
          limit: 100,
          balance: 20,
          resetsAt: crossing.body.resetsAt
        }
      ])
      await track("c1", 10)
      expect((await track("c1", 11)).body.allowed).toBe(false)
      expect(await alerts()).toHaveLength(1)
      await track("c1", 10)
      expect((await alerts()).map((a) => [a.threshold, a.usage, a.balance])).toEqual([
        [80, 80, 20],
        [100, 100, 0]
      ])
      expect((await track("c1", 1)).body.allowed).toBe(false)
      expect(await alerts()).toHaveLength(2)
    })

    test("a draw crossing both levels sends both; a new reset window sends them again", async () => {
      const { alerts, track } = await setup()
      await track("c2", 100)
      expect((await alerts()).map((a) => a.threshold)).toEqual([80, 100])
      clock.advance(DAY)
      await track("c2", 85)
      const all = await alerts()
      expect(all.map((a) => [a.threshold, a.usage])).toEqual([
        [80, 100],
        [100, 100],
        [80, 85]
      ])
      expect(all[2]!.resetsAt > all[0]!.resetsAt).toBe(true)
    })

    test("credit systems: the level of the credits granted, naming the feature and the credit system", async () => {
      const { alerts, track } = await setup()
      await track("c3", 19, "gen")
      expect(await alerts()).toEqual([])
      await track("c3", 1, "gen")
      expect(await alerts()).toMatchObject([
        { feature: "gen", creditSystem: "cr", threshold: 80, usage: 40, limit: 50 }
      ])
    })

    test("the locked path (Idempotency-Key) sends them too, and a retry sends nothing more", async () => {
      const { alerts, track } = await setup()
      const first = await track("c4", 90, "tokens", { "Idempotency-Key": "k-90" })
      expect(first.body.allowed).toBe(true)
      expect((await alerts()).map((a) => a.threshold)).toEqual([80])
      await track("c4", 90, "tokens", { "Idempotency-Key": "k-90" })
      expect((await alerts()).map((a) => a.threshold)).toEqual([80])
      await track("c4", 10, "tokens", { "Idempotency-Key": "k-10" })
      expect((await alerts()).map((a) => a.threshold)).toEqual([80, 100])
    })

    test("100 concurrent tracks crossing both levels: each fires exactly once", async () => {
      const { alerts, track } = await setup()
      await track("c5", 0)
      const answers = await Promise.all(Array.from({ length: 150 }, () => track("c5", 1)))
      expect(answers.filter((a) => a.body.allowed).length).toBe(100)
      const fired = await alerts("c5")
      expect(fired.map((a) => [a.threshold, a.usage])).toEqual([
        [80, 80],
        [100, 100]
      ])
    })
  })
}
