import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Renewals } from "../src/subscriptions/Renewals.ts"
import { post, syncCatalog } from "./support/catalog.ts"
import { makeShiftedClock } from "./support/clock.ts"
import { databases, startServer, type TestServer } from "./support/harness.ts"

/** Plan changes (decisions.md §14), through the HTTP API as a vendor calls it. */
const DAY = 86_400_000
const catalog = {
  features: [
    { slug: "tokens", name: "Tokens", type: "metered" },
    { slug: "sso", name: "SSO", type: "boolean" }
  ],
  plans: [
    { slug: "free", name: "Free", interval: "monthly", features: [{ slug: "tokens", limit: 100 }] },
    {
      slug: "small",
      name: "Small",
      price: 2000,
      currency: "NGN",
      interval: "monthly",
      features: [{ slug: "tokens", limit: 500 }]
    },
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
      features: [{ slug: "tokens", limit: 5000 }, { slug: "sso" }]
    },
    {
      slug: "pro-yearly",
      name: "Pro yearly",
      price: 200000,
      currency: "NGN",
      interval: "yearly",
      features: [{ slug: "tokens", limit: 5000 }, { slug: "sso" }]
    },
    {
      slug: "trial-basic",
      name: "Basic with a trial",
      price: 5000,
      currency: "NGN",
      interval: "monthly",
      trialDays: 14,
      features: [{ slug: "tokens", limit: 1000 }]
    },
    {
      slug: "boost",
      name: "Boost",
      price: 1000,
      currency: "NGN",
      interval: "monthly",
      isAddon: true,
      features: [{ slug: "tokens", limit: 50 }]
    }
  ]
}

/** The §14 formula, from the subscription's own period and the change's instant: one rounding, half-up. */
const prorated = (price: number, at: string, start: string, end: string) => {
  const sec = (iso: string) => BigInt(Math.floor(Date.parse(iso) / 1000))
  const num = BigInt(price) * (sec(end) - sec(at))
  const den = sec(end) - sec(start)
  const q = num / den
  return Number((num % den) * 2n >= den ? q + 1n : q)
}

for (const database of databases()) {
  describe(`plan changes on ${database.name}`, () => {
    let server: TestServer
    const clock = makeShiftedClock()
    beforeAll(async () => {
      server = await startServer(database.config, { clock: clock.clock })
    })
    afterAll(() => server.close())

    const runDue = () => server.run(Effect.flatMap(Renewals, (r) => r.runDue))

    const setup = async () => {
      const org = await server.createOrg()
      await syncCatalog(server, org.apiKey, catalog)
      await post(server, org.apiKey, "/v1/customers", { id: "c1", email: "c1@example.com" })
      const call = (path: string, body: unknown) => post(server, org.apiKey, path, body)
      const get = async (path: string) => (await server.fetch(path, { apiKey: org.apiKey })).json() as Promise<any>
      const subscriptions = async () => (await get("/v1/subscriptions?customer=c1")).subscriptions as Array<any>
      const live = async () => (await subscriptions()).filter((s) => s.status !== "canceled")
      const allInvoices = async () => (await get("/v1/billing/invoices?customer=c1")).invoices as Array<any>
      // The first payments' own invoices (h18), checked by `subscribe`; the rest are the changes' and renewals'.
      const firstPayments = new Set<string>()
      const invoices = async () => (await allInvoices()).filter((i) => !firstPayments.has(i.id))
      const events = async (type: string) => (await get(`/v1/events?type=${type}&limit=100`)).data as Array<any>
      const pay = (checkoutUrl: string, card: "ok" | "declining" = "ok") =>
        server.fetch(new URL(checkoutUrl).pathname, {
          method: "POST",
          headers: { "content-type": "application/x-www-form-urlencoded" },
          body: `outcome=pay&card=${card}`
        })
      /** Subscribed to `plan`, paid at a checkout that saves the card. */
      const subscribe = async (plan: string, card: "ok" | "declining" = "ok") => {
        const before = new Set((await allInvoices()).map((i) => i.id))
        const attached = await call("/v1/attach", { customer: "c1", product: plan })
        expect(attached.status).toBe(200)
        if (attached.body.checkoutUrl !== null) await pay(attached.body.checkoutUrl, card)
        const [s] = await live()
        expect(s).toMatchObject({ plan })
        // A paid first payment is one paid invoice of the plan; a free plan makes none.
        const made = (await allInvoices()).filter((i) => !before.has(i.id))
        expect(made.map((i) => [i.status, i.lines.map((l: any) => l.feature)])).toEqual(
          attached.body.checkoutUrl === null ? [] : [["paid", [plan]]]
        )
        for (const i of made) firstPayments.add(i.id)
        return s
      }
      return { org, call, get, subscriptions, live, invoices, events, pay, subscribe }
    }

    test("an upgrade with a saved card: now, prorated by the second on one paid invoice, same subscription", async () => {
      const { call, events, invoices, subscribe } = await setup()
      const before = await subscribe("basic")
      clock.advance(10 * DAY + 12_345)
      const changed = await call("/v1/attach", { customer: "c1", product: "pro" })
      expect(changed.status).toBe(200)
      expect(changed.body.subscription).toMatchObject({ id: before.id, plan: "pro", status: "active" })
      expect(changed.body.subscription.currentPeriodEnd).toBe(before.currentPeriodEnd)
      const invoice = changed.body.invoice
      const at = invoice.lines[0].periodStart
      const credit = prorated(5000, at, before.currentPeriodStart, before.currentPeriodEnd)
      const charge = prorated(20000, at, before.currentPeriodStart, before.currentPeriodEnd)
      expect(credit).toBeGreaterThan(0)
      expect(invoice).toMatchObject({
        status: "paid",
        lines: [
          { feature: "basic", amount: -credit, periodStart: at, periodEnd: before.currentPeriodEnd },
          { feature: "pro", amount: charge, periodStart: at, periodEnd: before.currentPeriodEnd }
        ],
        subtotal: charge - credit,
        total: charge - credit,
        amountPaid: charge - credit,
        amountDue: 0
      })
      expect((await invoices()).filter((i) => i.lines[0]?.feature === "basic")).toHaveLength(1)
      const [updated] = await events("subscription.updated")
      expect(updated.data).toMatchObject({ id: before.id, plan: "pro", previousPlan: "basic" })
    }, 30_000)

    test("without a saved method: pending until the checkout is paid, the old plan in force meanwhile", async () => {
      const { call, get, live, pay } = await setup()
      await call("/v1/attach", { customer: "c1", product: "free" })
      await call("/v1/track", { customer: "c1", feature: "tokens", value: 90 })
      const changed = await call("/v1/attach", { customer: "c1", product: "pro" })
      expect(changed.status).toBe(200)
      expect(changed.body.checkoutUrl).toStartWith("http")
      expect(changed.body.subscription).toMatchObject({
        plan: "free",
        pendingChange: { plan: "pro", invoiceId: changed.body.invoice.id }
      })
      expect(changed.body.invoice).toMatchObject({ status: "open", lines: [{ feature: "pro" }] })
      // The old plan's limits still apply.
      expect((await call("/v1/check", { customer: "c1", feature: "tokens", value: 20 })).body.allowed).toBe(false)
      await pay(changed.body.checkoutUrl)
      const [s] = await live()
      expect(s).toMatchObject({ id: changed.body.subscription.id, plan: "pro" })
      expect(s.pendingChange).toBeUndefined()
      // Usage carries over: 90 of the window counted against the new limit.
      expect((await call("/v1/check", { customer: "c1", feature: "tokens" })).body).toMatchObject({
        allowed: true,
        usage: 90,
        limit: 5000,
        balance: 4910
      })
      expect((await get(`/v1/billing/invoices?customer=c1`)).invoices[0]).toMatchObject({ status: "paid" })
    }, 30_000)

    test("an unpaid change expires after 23 h: its invoice is voided, the old plan stays", async () => {
      const { call, invoices, live } = await setup()
      await call("/v1/attach", { customer: "c1", product: "free" })
      const changed = await call("/v1/attach", { customer: "c1", product: "pro" })
      expect(changed.body.subscription.pendingChange.plan).toBe("pro")
      clock.advance(22 * 3_600_000)
      await runDue()
      expect((await live())[0].pendingChange).toMatchObject({ plan: "pro" })
      clock.advance(2 * 3_600_000)
      await runDue()
      const [s] = await live()
      expect(s.plan).toBe("free")
      expect(s.pendingChange).toBeUndefined()
      expect((await invoices()).find((i) => i.id === changed.body.invoice.id).status).toBe("void")
      // Paying the voided invoice now is refused.
      const paid = await call(`/v1/billing/invoice/${changed.body.invoice.id}/pay`, {})
      expect(paid.body.code).toBe("invoice_not_open")
    }, 30_000)

    test("a downgrade waits for the period end; cancel-change and cancel-at-period-end replace each other", async () => {
      const { call, events, invoices, live, subscribe } = await setup()
      const before = await subscribe("pro")
      clock.advance(3 * DAY)
      const scheduled = await call("/v1/attach", { customer: "c1", product: "basic" })
      expect(scheduled.body.subscription).toMatchObject({
        plan: "pro",
        scheduledChange: { plan: "basic", at: before.currentPeriodEnd }
      })
      expect(scheduled.body.invoice).toBeUndefined()
      expect(await invoices()).toHaveLength(0)
      // Withdrawn, then scheduled again, then replaced by a cancellation, then scheduled again.
      const withdrawn = await call(`/v1/subscriptions/${before.id}/cancel-change`, {})
      expect(withdrawn.body.subscription.scheduledChange).toBeUndefined()
      await call("/v1/attach", { customer: "c1", product: "basic" })
      const canceled = await call(`/v1/subscriptions/${before.id}/cancel`, {})
      expect(canceled.body.subscription).toMatchObject({ cancelAtPeriodEnd: true })
      expect(canceled.body.subscription.scheduledChange).toBeUndefined()
      const again = await call("/v1/attach", { customer: "c1", product: "basic", when: "period_end" })
      expect(again.body.subscription).toMatchObject({ cancelAtPeriodEnd: false, scheduledChange: { plan: "basic" } })
      expect((await events("subscription.change_scheduled")).length).toBe(3)
      // Until the end, Pro's features (the answer says a change is coming); at the renewal, Basic's, at Basic's price,
      // on the same subscription.
      const sso = await call("/v1/check", { customer: "c1", feature: "sso" })
      expect(sso.body.allowed).toBe(true)
      expect(sso.body.details.message).toContain(`A plan change is scheduled for ${before.currentPeriodEnd}`)
      const tokens = await call("/v1/check", { customer: "c1", feature: "tokens" })
      expect(tokens.body.details.message).toContain("A plan change is scheduled for")
      clock.advance(28 * DAY)
      await runDue()
      const [s] = await live()
      expect(s).toMatchObject({ id: before.id, plan: "basic", status: "active" })
      expect(s.scheduledChange).toBeUndefined()
      expect(s.currentPeriodStart).toBe(before.currentPeriodEnd)
      const [renewal] = await invoices()
      expect(renewal).toMatchObject({ status: "paid", total: 5000, lines: [{ feature: "basic", amount: 5000 }] })
      expect((await call("/v1/check", { customer: "c1", feature: "sso" })).body).toMatchObject({
        allowed: false,
        code: "feature_not_in_plan"
      })
      expect((await events("subscription.updated"))[0].data).toMatchObject({ plan: "basic", previousPlan: "pro" })
    }, 30_000)

    test("to a free plan: at the period end by default; attaching the current plan again removes it", async () => {
      const { call, events, invoices, live, subscribe } = await setup()
      const before = await subscribe("pro")
      const scheduled = await call("/v1/attach", { customer: "c1", product: "free" })
      expect(scheduled.body.subscription.scheduledChange).toEqual({ plan: "free", at: before.currentPeriodEnd })
      const kept = await call("/v1/attach", { customer: "c1", product: "pro" })
      expect(kept.body.subscription.scheduledChange).toBeUndefined()
      expect((await events("subscription.change_canceled"))[0].data).toMatchObject({ reason: "replaced" })
      await call("/v1/attach", { customer: "c1", product: "free" })
      clock.advance(32 * DAY)
      await runDue()
      const [s] = await live()
      expect(s).toMatchObject({ id: before.id, plan: "free", status: "active" })
      expect(await invoices()).toHaveLength(0)
      expect((await call("/v1/check", { customer: "c1", feature: "tokens" })).body).toMatchObject({ limit: 100 })
    }, 30_000)

    test("a downgrade now: an invoice of total 0 with both lines; the surplus is a credit balance the next invoice spends", async () => {
      const { call, events, get, invoices, subscribe } = await setup()
      const before = await subscribe("pro")
      await call("/v1/track", { customer: "c1", feature: "tokens", value: 900 })
      clock.advance(5 * DAY)
      const changed = await call("/v1/attach", { customer: "c1", product: "small", when: "now" })
      expect(changed.status).toBe(200)
      // Usage carries over: 900 of the window against Small's 500, denied until the reset; Pro's SSO is gone at once.
      expect((await call("/v1/check", { customer: "c1", feature: "tokens" })).body).toMatchObject({
        allowed: false,
        usage: 900,
        limit: 500
      })
      expect((await call("/v1/check", { customer: "c1", feature: "sso" })).body.allowed).toBe(false)
      const invoice = changed.body.invoice
      const at = invoice.lines[0].periodStart
      const credit = prorated(20000, at, before.currentPeriodStart, before.currentPeriodEnd)
      const charge = prorated(2000, at, before.currentPeriodStart, before.currentPeriodEnd)
      expect(invoice).toMatchObject({
        status: "paid",
        lines: [
          { feature: "pro", amount: -credit },
          { feature: "small", amount: charge }
        ],
        subtotal: charge - credit,
        total: 0,
        amountDue: 0
      })
      const surplus = credit - charge
      expect((await get("/v1/customers/c1")).billing.creditBalance).toEqual({ NGN: surplus })
      expect((await events("credit_balance.updated"))[0].data).toMatchObject({
        currency: "NGN",
        amount: surplus,
        balance: surplus,
        cause: "plan_change"
      })
      // The renewal's invoice (2,000) is paid from the balance first.
      clock.advance(26 * DAY)
      await runDue()
      const [renewal] = await invoices()
      expect(renewal).toMatchObject({
        total: 2000,
        creditApplied: Math.min(2000, surplus),
        amountDue: 0,
        status: "paid"
      })
      expect((await get("/v1/customers/c1")).billing.creditBalance).toEqual(
        surplus > 2000 ? { NGN: surplus - 2000 } : {}
      )
    }, 30_000)

    test("prorate: false switches at once with no invoice", async () => {
      const { call, invoices, subscribe } = await setup()
      const before = await subscribe("basic")
      const changed = await call("/v1/attach", { customer: "c1", product: "pro", prorate: false })
      expect(changed.body.subscription).toMatchObject({
        id: before.id,
        plan: "pro",
        currentPeriodEnd: before.currentPeriodEnd
      })
      expect(changed.body.invoice).toBeUndefined()
      expect(await invoices()).toHaveLength(0)
    }, 30_000)

    test("attaching the current plan again removes a pending change and voids its invoice", async () => {
      const { call, invoices, live } = await setup()
      await call("/v1/attach", { customer: "c1", product: "free" })
      const changed = await call("/v1/attach", { customer: "c1", product: "pro" })
      expect(changed.body.subscription.pendingChange).toBeDefined()
      const again = await call("/v1/attach", { customer: "c1", product: "free" })
      expect(again.status).toBe(200)
      expect(again.body.subscription.pendingChange).toBeUndefined()
      expect((await live())[0]).toMatchObject({ plan: "free" })
      expect((await invoices())[0]).toMatchObject({ id: changed.body.invoice.id, status: "void" })
    }, 30_000)

    test("an interval change restarts the anchor: the new plan's full price for its own period, less the unused credit", async () => {
      const { call, subscribe } = await setup()
      const before = await subscribe("basic")
      clock.advance(15 * DAY)
      const changed = await call("/v1/attach", { customer: "c1", product: "pro-yearly" })
      expect(changed.status).toBe(200)
      const invoice = changed.body.invoice
      const at = invoice.lines[0].periodStart
      const credit = prorated(5000, at, before.currentPeriodStart, before.currentPeriodEnd)
      expect(invoice.lines).toMatchObject([
        { feature: "basic", amount: -credit },
        { feature: "pro-yearly", amount: 200000, periodStart: at }
      ])
      expect(invoice).toMatchObject({ total: 200000 - credit, status: "paid" })
      const s = changed.body.subscription
      expect(s).toMatchObject({ plan: "pro-yearly", currentPeriodStart: at })
      expect(Date.parse(s.currentPeriodEnd) - Date.parse(at)).toBeGreaterThanOrEqual(365 * DAY)
    }, 30_000)

    test("during a trial: the trial carries over, nothing prorated", async () => {
      const { call, invoices } = await setup()
      const trial = await call("/v1/attach", { customer: "c1", product: "trial-basic" })
      expect(trial.body.subscription.status).toBe("trialing")
      clock.advance(2 * DAY)
      const changed = await call("/v1/attach", { customer: "c1", product: "small" })
      expect(changed.body.subscription).toMatchObject({
        id: trial.body.subscription.id,
        plan: "small",
        status: "trialing",
        trialEndsAt: trial.body.subscription.trialEndsAt
      })
      expect(await invoices()).toHaveLength(0)
    }, 30_000)

    test("preview: the lines and totals the change makes at that instant, changing nothing", async () => {
      const { call, get, invoices, live, subscribe } = await setup()
      const before = await subscribe("basic")
      clock.advance(7 * DAY)
      // Within one second, the preview and the change prorate the same seconds.
      clock.set(Math.ceil(clock.now() / 1000) * 1000 + 1)
      const preview = await call("/v1/attach/preview", { customer: "c1", product: "pro" })
      const changed = await call("/v1/attach", { customer: "c1", product: "pro" })
      expect(preview.status).toBe(200)
      const credit = prorated(5000, preview.body.effectiveAt, before.currentPeriodStart, before.currentPeriodEnd)
      const charge = prorated(20000, preview.body.effectiveAt, before.currentPeriodStart, before.currentPeriodEnd)
      expect(preview.body).toMatchObject({
        subscriptionId: before.id,
        plan: "pro",
        previousPlan: "basic",
        when: "now",
        scheduled: false,
        currency: "NGN",
        lines: [
          { feature: "basic", amount: -credit, periodEnd: before.currentPeriodEnd },
          { feature: "pro", amount: charge, periodEnd: before.currentPeriodEnd }
        ],
        subtotal: charge - credit,
        discount: 0,
        tax: 0,
        total: charge - credit,
        creditApplied: 0,
        amountDue: charge - credit,
        creditBalanceAfter: 0
      })
      expect(changed.body.invoice.lines.map((l: any) => l.amount)).toEqual(preview.body.lines.map((l: any) => l.amount))
      expect(changed.body.invoice.total).toBe(preview.body.total)

      // A downgrade's preview is scheduled at the period end, with nothing to bill; and nothing is written by it.
      const invoicesBefore = await invoices()
      const down = await call("/v1/attach/preview", { customer: "c1", product: "small" })
      expect(down.body).toMatchObject({
        when: "period_end",
        scheduled: true,
        effectiveAt: before.currentPeriodEnd,
        lines: [],
        total: 0
      })
      const nowDown = await call("/v1/attach/preview", { customer: "c1", product: "small", when: "now" })
      expect(nowDown.body.total).toBe(0)
      expect(nowDown.body.creditBalanceAfter).toBe(-nowDown.body.subtotal)
      expect(await invoices()).toEqual(invoicesBefore)
      expect((await live())[0]).toMatchObject({ plan: "pro" })
      expect((await live())[0].scheduledChange).toBeUndefined()
      expect((await get("/v1/customers/c1")).billing.creditBalance).toEqual({})
      // Unknown plan: 404, as attach.
      expect((await call("/v1/attach/preview", { customer: "c1", product: "nope" })).status).toBe(404)
    }, 30_000)

    test("past due: refused with 409 until paid; an add-on is never a change", async () => {
      const { call, live, subscribe } = await setup()
      await subscribe("basic", "declining")
      const addon = await call("/v1/attach", { customer: "c1", product: "boost" })
      expect(addon.status).toBe(200)
      expect(addon.body.subscription.plan).toBe("boost")
      expect((await live()).map((s) => s.plan).sort()).toEqual(["basic", "boost"])
      clock.advance(32 * DAY)
      await runDue()
      expect((await live()).find((s) => s.plan === "basic").status).toBe("past_due")
      const refused = await call("/v1/attach", { customer: "c1", product: "pro" })
      expect(refused).toMatchObject({ status: 409, body: { code: "subscription_past_due" } })
      expect((await live()).find((s) => s.plan === "basic")).toBeDefined()
    }, 30_000)
  })
}
