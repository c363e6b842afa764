import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { BigDecimal, Effect } from "effect"
import { Invoices } from "../../src/billing/Invoices.ts"
import { Payments } from "../../src/payments/Payments.ts"
import { ProviderAccounts } from "../../src/payments/ProviderAccounts.ts"
import { post, syncCatalog } from "../support/catalog.ts"
import { makeShiftedClock } from "../support/clock.ts"
import { type FakePaystack, startFakePaystack } from "../support/fakePaystack.ts"
import { databases, startServer, type TestServer } from "../support/harness.ts"

/**
 * Money moves once (decisions.md §7): concurrent payers of one thing see one charge and no 5xx; an answer that is
 * lost, pending or slow leaves the attempt processing until the provider's webhook or the reconciler settles it,
 * and a reference is never sent twice. Paystack's adapter against its fake, on every database.
 */
const catalog = {
  features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
  creditSystems: [{ slug: "credits", name: "Credits", features: [{ feature: "tokens", creditCost: 1 }] }],
  creditPacks: [
    {
      slug: "pack",
      name: "Pack",
      credits: 50,
      price: 10000,
      currency: "NGN",
      creditSystem: "credits",
      provider: "paystack"
    }
  ],
  plans: [
    {
      slug: "pro",
      name: "Pro",
      price: 250000,
      currency: "NGN",
      interval: "monthly",
      provider: "paystack",
      features: [{ slug: "tokens", limit: 10 }]
    }
  ]
}

const CHARGE = "/transaction/charge_authorization"

for (const db of databases()) {
  describe(`money moves once (${db.name})`, () => {
    let server: TestServer
    let paystack: FakePaystack
    const time = makeShiftedClock()

    beforeAll(async () => {
      // Provider calls give up after 1 s here, so a "timeout" takes a moment instead of ten seconds.
      server = await startServer({ ...db.config, providerTimeoutMs: 1000 }, { clock: time.clock })
      paystack = startFakePaystack({ secretKey: `sk_test_money_${db.name}` })
    })
    afterAll(async () => {
      await paystack.stop()
      await server.close()
    })

    /** An organization on the fake Paystack with a customer whose card is saved (one charged authorization). */
    const customerWithCard = async () => {
      const org = await server.createOrg()
      await server.run(
        Effect.flatMap(ProviderAccounts, (a) =>
          a.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
        )
      )
      await syncCatalog(server, org.apiKey, catalog)
      const created = await post(server, org.apiKey, "/v1/customers", { id: "ada", email: "ada@example.com" })
      const setup = await post(server, org.apiKey, "/v1/wallet/setup", { customer: "ada", provider: "paystack" })
      expect(setup.status).toBe(200)
      const hook = paystack.complete(setup.body.reference)
      await deliver(org.slug, hook)
      return { org, customerId: created.body.customer?.id ?? (created.body.id as string) }
    }

    const deliver = async (orgSlug: string, hook: { body: string; headers: Readonly<Record<string, string>> }) => {
      const response = await server.fetch(`/webhooks/${orgSlug}/paystack`, {
        method: "POST",
        body: hook.body,
        headers: hook.headers
      })
      expect(response.status).toBe(200)
      return (await response.json()) as { skipped: boolean }
    }

    const openInvoice = (orgId: string, customerId: string, amount = 120000) =>
      server.run(
        Effect.flatMap(Invoices, (invoices) =>
          invoices.createInvoice(orgId, customerId, "NGN", [
            {
              feature: "tokens",
              description: "Overage",
              quantity: 1,
              unitPrice: String(amount),
              amount: BigDecimal.unsafeFromString(String(amount)),
              periodStart: 0,
              periodEnd: 0
            }
          ])
        )
      )

    const chargesFor = (amount: number) =>
      paystack.requests.filter((r) => r.path === CHARGE && (r.body as { amount?: number }).amount === amount)

    const attempts = (orgId: string, targetId: string) =>
      server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{
              status: string
              reference: string
              failureMessage: string | null
            }>`SELECT status, reference, failure_message
          FROM payments WHERE organization_id = ${orgId} AND target_id = ${targetId} ORDER BY created_at, id`
        )
      )

    const pay = (apiKey: string, invoiceId: string) => post(server, apiKey, `/v1/billing/invoice/${invoiceId}/pay`, {})

    const invoiceStatus = async (apiKey: string, invoiceId: string) => {
      const list = (await (await server.fetch("/v1/billing/invoices?customer=ada", { apiKey })).json()) as any
      return list.invoices.find((i: { id: string }) => i.id === invoiceId).status as string
    }

    test("ten concurrent payers of one invoice, a slow provider: one charge, no 5xx", async () => {
      const { org, customerId } = await customerWithCard()
      const invoice = await openInvoice(org.id, customerId, 120001)
      paystack.failNext({ kind: "delay", ms: 200 }, { times: 1 })
      const answers = await Promise.all(Array.from({ length: 10 }, () => pay(org.apiKey, invoice.id)))
      expect(answers.map((a) => a.status)).toEqual(Array(10).fill(200))
      expect(chargesFor(120001)).toHaveLength(1)
      const codes = answers.map((a) => a.body.code)
      expect(codes, JSON.stringify(codes)).toContain("invoice_paid")
      expect(codes.filter((c) => c === "invoice_paid")).toHaveLength(1)
      expect(codes.every((c) => ["invoice_paid", "payment_processing", "already_paid"].includes(c))).toBe(true)
      expect(await invoiceStatus(org.apiKey, invoice.id)).toBe("paid")
      expect((await attempts(org.id, invoice.id)).map((a) => a.status)).toEqual(["succeeded"])
      // Paid is paid: a later request answers from the invoice.
      expect((await pay(org.apiKey, invoice.id)).body).toMatchObject({ paid: true, code: "already_paid" })
    })

    test("a charge whose answer times out stays processing, is never sent again, and its webhook settles it", async () => {
      const { org, customerId } = await customerWithCard()
      const invoice = await openInvoice(org.id, customerId, 120002)
      paystack.failNext({ kind: "delay", ms: 1300 })
      const first = await pay(org.apiKey, invoice.id)
      expect(first).toMatchObject({ status: 200, body: { paid: false, checkoutUrl: null, code: "payment_processing" } })
      const second = await pay(org.apiKey, invoice.id)
      expect(second.body.code).toBe("payment_processing")
      await Bun.sleep(1000) // the fake finishes the charge the adapter gave up on
      expect(chargesFor(120002)).toHaveLength(1)
      const [attempt] = await attempts(org.id, invoice.id)
      expect(attempt!.status).toBe("processing")
      expect(paystack.transactions.get(attempt!.reference)?.status).toBe("success")

      expect(await deliver(org.slug, paystack.webhookFor(attempt!.reference))).toMatchObject({ skipped: false })
      expect(await invoiceStatus(org.apiKey, invoice.id)).toBe("paid")
      expect((await attempts(org.id, invoice.id)).map((a) => a.status)).toEqual(["succeeded"])
    })

    test("a lost answer is settled by the reconciler asking the provider", async () => {
      const { org, customerId } = await customerWithCard()
      const invoice = await openInvoice(org.id, customerId, 120003)
      paystack.failNext({ kind: "delay", ms: 1300 })
      expect((await pay(org.apiKey, invoice.id)).body.code).toBe("payment_processing")
      await Bun.sleep(600)
      time.advance(2 * 60_000)
      const report = await server.run(Effect.flatMap(Payments, (p) => p.reconcile))
      expect(report.settled).toBeGreaterThanOrEqual(1)
      expect(await invoiceStatus(org.apiKey, invoice.id)).toBe("paid")
      expect(chargesFor(120003)).toHaveLength(1)
    })

    test("a charge the provider never received is closed after a while, and the retry uses a new reference", async () => {
      const { org, customerId } = await customerWithCard()
      const invoice = await openInvoice(org.id, customerId, 120004)
      paystack.failNext({ kind: "serverError", status: 503 })
      expect((await pay(org.apiKey, invoice.id)).body.code).toBe("payment_processing")
      // Asked too soon, "not found" proves nothing (search lags, a request may still be in flight).
      time.advance(2 * 60_000)
      await server.run(Effect.flatMap(Payments, (p) => p.reconcile))
      expect((await attempts(org.id, invoice.id)).map((a) => a.status)).toEqual(["processing"])
      time.advance(20 * 60_000)
      await server.run(Effect.flatMap(Payments, (p) => p.reconcile))
      expect((await attempts(org.id, invoice.id)).map((a) => a.status)).toEqual(["failed"])

      const retry = await pay(org.apiKey, invoice.id)
      expect(retry.body).toMatchObject({ paid: true, code: "invoice_paid" })
      const references = chargesFor(120004).map((r) => (r.body as { reference: string }).reference)
      expect(references).toHaveLength(2)
      expect(new Set(references).size).toBe(2)
    })

    test("a pending charge is not a failure: no checkout is opened, and its success webhook applies it", async () => {
      const { org, customerId } = await customerWithCard()
      const invoice = await openInvoice(org.id, customerId, 120005)
      const initializedBefore = [...paystack.transactions.values()].filter((t) => t.source === "initialize").length
      paystack.failNext({ kind: "pending" })
      const answer = await pay(org.apiKey, invoice.id)
      expect(answer.body).toMatchObject({ paid: false, checkoutUrl: null, code: "payment_processing" })
      expect([...paystack.transactions.values()].filter((t) => t.source === "initialize")).toHaveLength(
        initializedBefore
      )
      const [attempt] = await attempts(org.id, invoice.id)
      const tx = paystack.transactions.get(attempt!.reference)!
      tx.status = "success"
      tx.paidAt = new Date().toISOString()
      expect(await deliver(org.slug, paystack.webhookFor(attempt!.reference))).toMatchObject({ skipped: false })
      expect(await invoiceStatus(org.apiKey, invoice.id)).toBe("paid")
    })

    test("an event whose amount differs from the attempt's is recorded, not applied", async () => {
      const { org, customerId } = await customerWithCard()
      const invoice = await openInvoice(org.id, customerId, 120006)
      paystack.failNext({ kind: "pending" })
      await pay(org.apiKey, invoice.id)
      const [attempt] = await attempts(org.id, invoice.id)
      const tx = paystack.transactions.get(attempt!.reference)!
      const forged = paystack.webhook("charge.success", {
        id: tx.id,
        reference: tx.reference,
        status: "success",
        amount: 100,
        currency: "NGN",
        metadata: tx.metadata,
        customer: { email: "ada@example.com" }
      })
      expect(await deliver(org.slug, forged)).toMatchObject({ skipped: true })
      expect(await invoiceStatus(org.apiKey, invoice.id)).toBe("open")
      const [after] = await attempts(org.id, invoice.id)
      expect(after).toMatchObject({ status: "processing" })
      expect(after!.failureMessage).toContain("100 NGN")
    })

    test("a declined hosted payment (Paystack sends no webhook for it) is learned by the reconciler's verify", async () => {
      const { org } = await customerWithCard()
      await post(server, org.apiKey, "/v1/customers", { id: "cy", email: "cy@example.com" })
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "cy", product: "pro" })
      expect(attached.body.subscription.status).toBe("pending")
      const page = [...paystack.transactions.values()].find((t) =>
        attached.body.checkoutUrl.endsWith(`/${t.accessCode}`)
      )!
      const back = await fetch(`${attached.body.checkoutUrl}?outcome=decline`, { method: "POST", redirect: "manual" })
      expect(back.status).toBe(200)
      expect(page.status).toBe("failed")
      time.advance(11 * 60_000)
      await server.run(Effect.flatMap(Payments, (p) => p.reconcile))
      const checkouts = await server.run(
        Effect.flatMap(
          SqlClient.SqlClient,
          (sql) =>
            sql<{
              status: string
            }>`SELECT status FROM checkouts WHERE organization_id = ${org.id} AND reference = ${page.reference}`
        )
      )
      expect(checkouts.map((c) => c.status)).toEqual(["failed"])
      // Still pending, and payable again: its checkout route opens a new page rather than answering the closed one.
      const id = attached.body.subscription.id as string
      const retry = await post(server, org.apiKey, `/v1/subscriptions/${id}/checkout`, {})
      expect(retry.body).toMatchObject({ activatedDirectly: false, code: "checkout_required" })
      expect(retry.body.checkoutUrl).not.toBe(attached.body.checkoutUrl)
      await deliver(org.slug, paystack.complete(retry.body.reference))
      const subs = (await (await server.fetch("/v1/subscriptions?customer=cy", { apiKey: org.apiKey })).json()) as any
      expect(subs.subscriptions[0]).toMatchObject({ plan: "pro", status: "active" })
    })

    test("concurrent checkouts of one pending subscription: one charge, the rest see it, no 5xx", async () => {
      const { org } = await customerWithCard()
      // Pending with a checkout: the card was saved after the subscription was created.
      const other = await post(server, org.apiKey, "/v1/customers", { id: "bo", email: "bo@example.com" })
      expect(other.status).toBe(200)
      const attached = await post(server, org.apiKey, "/v1/attach", { customer: "bo", product: "pro" })
      expect(attached.body.subscription.status).toBe("pending")
      const setup = await post(server, org.apiKey, "/v1/wallet/setup", { customer: "bo", provider: "paystack" })
      await deliver(org.slug, paystack.complete(setup.body.reference))
      const before = chargesFor(250000).length
      paystack.failNext({ kind: "delay", ms: 200 }, { times: 1 })
      const id = attached.body.subscription.id as string
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => post(server, org.apiKey, `/v1/subscriptions/${id}/checkout`, {}))
      )
      expect(
        answers.every((a) => a.status === 200 || (a.status === 409 && a.body.code === "subscription_not_pending"))
      ).toBe(true)
      expect(answers.filter((a) => a.status === 200 && a.body.activatedDirectly)).toHaveLength(1)
      expect(chargesFor(250000).length - before).toBe(1)
    })

    test("concurrent attaches of one paid plan: one subscription, one charge", async () => {
      const { org } = await customerWithCard()
      const before = chargesFor(250000).length
      paystack.failNext({ kind: "delay", ms: 150 }, { times: 1 })
      const answers = await Promise.all(
        Array.from({ length: 6 }, () => post(server, org.apiKey, "/v1/attach", { customer: "ada", product: "pro" }))
      )
      expect(answers.map((a) => a.status)).toEqual(Array(6).fill(200))
      expect(chargesFor(250000).length - before).toBe(1)
      const subs = (await (await server.fetch("/v1/subscriptions?customer=ada", { apiKey: org.apiKey })).json()) as any
      expect(subs.subscriptions.filter((s: { plan: string }) => s.plan === "pro")).toHaveLength(1)
    })

    test("a pack purchase with an Idempotency-Key is one charge however often it is sent; another body is 409", async () => {
      const { org } = await customerWithCard()
      const before = chargesFor(30000).length
      paystack.failNext({ kind: "delay", ms: 150 }, { times: 1 })
      const key = { "idempotency-key": `pack-${crypto.randomUUID()}` }
      const answers = await Promise.all(
        Array.from({ length: 5 }, () =>
          post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack", quantity: 3 }, key)
        )
      )
      expect(answers.map((a) => a.status)).toEqual(Array(5).fill(200))
      expect(chargesFor(30000).length - before).toBe(1)
      const repeat = await post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack", quantity: 3 }, key)
      expect(repeat.body).toMatchObject({ requiresCheckout: false, code: "credits_added", balance: 150 })
      const other = await post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack", quantity: 2 }, key)
      expect(other).toMatchObject({ status: 409, body: { code: "idempotency_conflict" } })
      // Without a key each request is its own purchase.
      await post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack", quantity: 3 })
      expect(chargesFor(30000).length - before).toBe(2)
    })

    test("a keyed pack purchase whose card is declined answers its checkout page to every repeat", async () => {
      const { org } = await customerWithCard()
      paystack.failNext({ kind: "decline" })
      const key = { "idempotency-key": `declined-${crypto.randomUUID()}` }
      const first = await post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack", quantity: 2 }, key)
      expect(first.body).toMatchObject({ requiresCheckout: true, code: "checkout_required" })
      expect(first.body.checkoutUrl).toBeString()
      const repeat = await post(server, org.apiKey, "/v1/addon", { customer: "ada", pack: "pack", quantity: 2 }, key)
      expect(repeat.body).toMatchObject({ requiresCheckout: true, checkoutUrl: first.body.checkoutUrl })
      expect(chargesFor(20000)).toHaveLength(1)
    })
  })
}

const postgres = databases().find((d) => d.name === "postgresql")
if (postgres !== undefined) {
  describe("money moves once across two processes on one PostgreSQL", () => {
    let a: TestServer
    let b: TestServer
    let paystack: FakePaystack
    beforeAll(async () => {
      a = await startServer(postgres.config)
      b = await startServer(postgres.config)
      paystack = startFakePaystack({ secretKey: "sk_test_money_two_processes" })
    })
    afterAll(async () => {
      await paystack.stop()
      await a.close()
      await b.close()
    })

    test("payers of one invoice through both processes, a slow provider: one charge, no 5xx", async () => {
      const org = await a.createOrg()
      await a.run(
        Effect.flatMap(ProviderAccounts, (p) =>
          p.set(org.id, "paystack", { secretKey: paystack.secretKey, webhookSecret: null, baseUrl: paystack.baseUrl })
        )
      )
      await syncCatalog(a, org.apiKey, catalog)
      const created = await post(a, org.apiKey, "/v1/customers", { id: "ada", email: "ada@example.com" })
      const setup = await post(a, org.apiKey, "/v1/wallet/setup", { customer: "ada", provider: "paystack" })
      const hook = paystack.complete(setup.body.reference)
      await b.fetch(`/webhooks/${org.slug}/paystack`, { method: "POST", body: hook.body, headers: hook.headers })
      const invoice = await a.run(
        Effect.flatMap(Invoices, (invoices) =>
          invoices.createInvoice(org.id, created.body.customer?.id ?? created.body.id, "NGN", [
            {
              feature: "tokens",
              description: "Overage",
              quantity: 1,
              unitPrice: "130001",
              amount: BigDecimal.unsafeFromString("130001"),
              periodStart: 0,
              periodEnd: 0
            }
          ])
        )
      )
      paystack.failNext({ kind: "delay", ms: 200 })
      const answers = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          post(i % 2 === 0 ? a : b, org.apiKey, `/v1/billing/invoice/${invoice.id}/pay`, {})
        )
      )
      expect(answers.map((r) => r.status)).toEqual(Array(12).fill(200))
      expect(answers.filter((r) => r.body.code === "invoice_paid")).toHaveLength(1)
      const charges = paystack.requests.filter(
        (r) => r.path === CHARGE && (r.body as { amount?: number }).amount === 130001
      )
      expect(charges).toHaveLength(1)
    })
  })
}
