import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Invoices } from "../src/billing/Invoices.ts"
import { CreditBalance } from "../src/creditBalance/CreditBalance.ts"
import { Renewals } from "../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/** Plan changes under concurrency (decisions.md §14): one change, one invoice, one consistent state. */
const DAY = 86_400_000
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  plans: [
    { slug: "free", name: "Free", interval: "monthly", features: [{ slug: "tokens", limit: 100 }] },
    {
      slug: "basic",
      name: "Basic",
      price: 5000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 1000 }]
    },
    {
      slug: "pro",
      name: "Pro",
      price: 20000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 5000 }]
    },
    {
      slug: "max",
      name: "Max",
      price: 50000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 50000 }]
    }
  ]
}

for (const database of databases()) {
  describe(`plan changes under races on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      const customer = await post(server, org.apiKey, "/v1/customers", { id: "c1", email: "c1@example.com" })
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const live = async () =>
        ((await get("/v1/subscriptions?customer=c1")).subscriptions as Array<any>).filter(
          (s) => s.status !== "canceled"
        )
      const allInvoices = async () => (await get("/v1/billing/invoices?customer=c1")).invoices as Array<any>
      // The first payments' own invoices (h18), checked by `subscribe`; the rest are the changes' and renewals'.
      const firstPayments = new Set<string>()
      const invoices = async () => (await allInvoices()).filter((i) => !firstPayments.has(i.id))
      const pay = (checkoutUrl: string) =>
        server.fetch(new URL(checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: "outcome=pay&card=ok"
        })
      const subscribe = async (plan: string) => {
        const before = new Set((await allInvoices()).map((i) => i.id))
        const attached = await call("/v1/attach", { customer: "c1", product: plan })
        if (attached.body.checkoutUrl !== null) await pay(attached.body.checkoutUrl)
        // A paid first payment is one paid invoice of the plan; a free plan makes none.
        const made = (await allInvoices()).filter((i) => !before.has(i.id))
        expect(made.map((i) => [i.status, i.lines.map((l: any) => l.feature)])).toEqual(
          attached.body.checkoutUrl === null ? [] : [["paid", [plan]]]
        )
        for (const i of made) firstPayments.add(i.id)
        return (await live())[0]
      }
      return { org, customerId: customer.body.id as string, call, get, live, invoices, pay, subscribe }
    }

    const expectOnlyOkOrInProgress = (answers: ReadonlyArray<{ status: number; body: any }>) => {
      for (const a of answers) {
        if (a.status !== 200) expect(a).toMatchObject({ status: 409, body: { code: "change_in_progress" } })
      }
    }

    test("20 concurrent identical changes waiting for payment: one change, one invoice, the same answer", async () => {
      const { call, invoices, live } = await setup()
      await call("/v1/attach", { customer: "c1", product: "free" })
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => call("/v1/attach", { customer: "c1", product: "pro" }))
      )
      expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200))
      const all = await invoices()
      expect(all).toHaveLength(1)
      for (const a of answers) expect(a.body.subscription.pendingChange).toMatchObject({ invoiceId: all[0].id })
      expect(await live()).toHaveLength(1)
    }, 30_000)

    test("20 concurrent identical upgrades with a saved card: one change, one paid invoice, one charge", async () => {
      const { call, get, invoices, live, subscribe } = await setup()
      await subscribe("basic")
      clock.advance(3 * DAY)
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => call("/v1/attach", { customer: "c1", product: "pro" }))
      )
      expectOnlyOkOrInProgress(answers)
      const all = await invoices()
      expect(all).toHaveLength(1)
      expect(all[0]).toMatchObject({ status: "paid", lines: [{ feature: "basic" }, { feature: "pro" }] })
      const [s] = await live()
      expect(s.plan).toBe("pro")
      expect(s.pendingChange).toBeUndefined()
      const updated = (await get("/v1/events?type=subscription.updated&limit=100")).data
      expect(updated).toHaveLength(1)
      const paidEvents = (await get("/v1/events?type=invoice.paid&limit=100")).data
      expect(paidEvents.filter((e: any) => e.data.id === all[0].id)).toHaveLength(1)
    }, 30_000)

    test("20 concurrent changes to two plans waiting for payment: one wins, the others 409 or the same answer", async () => {
      const { call, invoices, live } = await setup()
      await call("/v1/attach", { customer: "c1", product: "free" })
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          call("/v1/attach", { customer: "c1", product: i % 2 === 0 ? "pro" : "max" })
        )
      )
      expectOnlyOkOrInProgress(answers)
      const all = await invoices()
      expect(all).toHaveLength(1)
      const [s] = await live()
      const winner = s.pendingChange.plan
      expect(all[0].lines[0].feature).toBe(winner)
      for (const a of answers) {
        if (a.status === 200) expect(a.body.subscription.pendingChange.plan).toBe(winner)
        else expect(a.body.message).toContain(winner)
      }
      expect(answers.filter((a) => a.status === 409).length).toBeGreaterThanOrEqual(1)
    }, 30_000)

    test("a change racing the renewal: one renewal invoice, one change, the plan and period consistent", async () => {
      const { call, invoices, live, subscribe } = await setup()
      const before = await subscribe("basic")
      clock.set(Date.parse(before.currentPeriodEnd) + 1_000)
      const [, first] = await Promise.all([
        server.run(Effect.flatMap(Renewals, (r) => r.runDue)),
        call("/v1/attach", { customer: "c1", product: "pro" })
      ])
      // Before the renewal, a change of a period that is over waits for it (409); after, it prorates the new one.
      const change = first.status === 409 ? await call("/v1/attach", { customer: "c1", product: "pro" }) : first
      if (first.status === 409) expect(first.body.code).toBe("change_in_progress")
      expect(change.status).toBe(200)
      const [s] = await live()
      expect(s.plan).toBe("pro")
      expect(s.status).toBe("active")
      const all = await invoices()
      // The renewal billed Basic's next period; the change prorated that period: two invoices, nothing open.
      expect(all.map((i) => i.lines.map((l: any) => l.feature))).toEqual([["basic", "pro"], ["basic"]])
      expect(all.filter((i) => i.status === "open")).toHaveLength(0)
      expect(Date.parse(s.currentPeriodStart)).toBeGreaterThanOrEqual(Date.parse(before.currentPeriodEnd))
    }, 30_000)

    test("a scheduled change racing a cancellation: one of them, never both", async () => {
      const { call, live, subscribe } = await setup()
      const before = await subscribe("pro")
      await Promise.all([
        call("/v1/attach", { customer: "c1", product: "basic", when: "period_end" }),
        call(`/v1/subscriptions/${before.id}/cancel`, {})
      ])
      const [s] = await live()
      // Exactly one of the two: the later request replaced the earlier.
      expect([s.cancelAtPeriodEnd, s.scheduledChange?.plan ?? null]).toBeOneOf([
        [true, null],
        [false, "basic"]
      ])
      expect(s.plan).toBe("pro")
    }, 30_000)

    test("a pending change's payment racing its withdrawal: paid and changed, or void and unchanged", async () => {
      const { call, invoices, live, pay } = await setup()
      await call("/v1/attach", { customer: "c1", product: "free" })
      const changed = await call("/v1/attach", { customer: "c1", product: "pro" })
      const id = changed.body.subscription.id
      await Promise.all([pay(changed.body.checkoutUrl), call(`/v1/subscriptions/${id}/cancel-change`, {})])
      const [s] = await live()
      const invoice = (await invoices()).find((i) => i.id === changed.body.invoice.id)
      expect(s.pendingChange).toBeUndefined()
      if (invoice.status === "paid") expect(s.plan).toBe("pro")
      else expect({ status: invoice.status, plan: s.plan }).toEqual({ status: "void", plan: "free" })
    }, 30_000)

    test("a credit balance is never spent twice by invoices created at once", async () => {
      const { customerId, org } = await setup()
      await server.run(
        Effect.flatMap(CreditBalance, (c) => c.add(org.id, customerId, "NGN", 2500n, "plan_change", "test"))
      )
      const line = (n: number) => ({
        feature: "tokens",
        description: `Line ${n}`,
        quantity: 1,
        unitPrice: 1000,
        amount: 1000,
        periodStart: 0,
        periodEnd: 1
      })
      const created = await server.run(
        Effect.flatMap(Invoices, (invoices) =>
          Effect.all(
            Array.from({ length: 10 }, (_, n) => invoices.createInvoice(org.id, customerId, "NGN", [line(n)])),
            { concurrency: "unbounded" }
          )
        )
      )
      const applied = created.reduce((sum, i) => sum + Number(i.creditApplied), 0)
      expect(applied).toBe(2500)
      expect(created.filter((i) => i.status === "paid")).toHaveLength(2)
      const balance = await server.run(Effect.flatMap(CreditBalance, (c) => c.balance(org.id, customerId, "NGN")))
      expect(balance).toBe(0n)
      const ledger = await server.run(Effect.flatMap(CreditBalance, (c) => c.ledger(org.id, customerId)))
      expect(ledger.reduce((sum, m) => sum + m.amount, 0n)).toBe(0n)
      expect(ledger.filter((m) => m.cause === "invoice")).toHaveLength(3)
    }, 30_000)
  })
}
