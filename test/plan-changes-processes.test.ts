import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { cli, type Service, startService } from "./hardening/support.ts"

/**
 * Plan changes racing across two service processes on one PostgreSQL (decisions.md §14): the row lock that makes one
 * change of 20 concurrent ones in a process does so across processes too. Each run makes its own organization in the
 * database DATABASE_URL names, so it shares it safely with the other suites.
 */
const url = process.env.DATABASE_URL?.trim()

if (url) {
  describe("plan changes across two processes on postgresql", () => {
    let env: Record<string, string>
    let apiKey = ""
    const services: Array<Service> = []

    beforeAll(async () => {
      // The in-process suites' key (AppConfigTest): the renewals they run sweep this organization's subscriptions too.
      env = { DATABASE_URL: url, ENCRYPTION_KEY: "0".repeat(64), LOG_LEVEL: "error" }
      const slug = `chg-${crypto.randomUUID().slice(0, 8)}`
      apiKey = JSON.parse(await cli(env, "org", "create", slug, "--json")).apiKey
      services.push(await startService(env), await startService(env))
    }, 60_000)

    afterAll(async () => {
      for (const s of services) if (s.process.exitCode === null) await s.kill("SIGTERM")
    })

    const send = async (service: Service, method: string, path: string, body?: unknown) => {
      const response = await fetch(service.baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) })
      })
      return { status: response.status, body: (await response.json()) as any }
    }
    const pay = (service: Service, checkoutUrl: string) =>
      fetch(service.baseUrl + new URL(checkoutUrl).pathname, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: "outcome=pay&card=ok"
      })

    test("20 concurrent changes split over two processes: one change, one invoice, one charge", async () => {
      const [a, b] = services as [Service, Service]
      const plan = (slug: string, price: number) => ({
        slug,
        name: slug,
        price,
        currency: "NGN",
        interval: "monthly",
        features: [{ slug: "tokens", limit: price / 10 }]
      })
      expect(
        (
          await send(a, "POST", "/v1/sync", {
            features: [{ slug: "tokens", name: "Tokens", type: "metered" }],
            plans: [plan("basic", 5000), plan("pro", 20000)]
          })
        ).status
      ).toBe(200)

      // Waiting for payment (no saved method): every answer names the one pending change, or is 409.
      await send(a, "POST", "/v1/customers", { id: "waiting", email: "w@example.com" })
      const basic = await send(a, "POST", "/v1/attach", { customer: "waiting", product: "basic" })
      await pay(a, basic.body.checkoutUrl)
      // The saved card is removed, so the change must wait for a checkout.
      const wallet = await send(a, "GET", "/v1/wallet?customer=waiting")
      for (const m of wallet.body.paymentMethods)
        await send(a, "POST", "/v1/wallet/remove", { customer: "waiting", id: m.id })
      const waiting = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          send(i % 2 === 0 ? a : b, "POST", "/v1/attach", { customer: "waiting", product: "pro" })
        )
      )
      for (const w of waiting) {
        if (w.status !== 200) expect(w.body.code).toBe("change_in_progress")
      }
      // Newest first: the change's invoice, then Basic's first payment's own (h18).
      const invoices = (await send(b, "GET", "/v1/billing/invoices?customer=waiting")).body.invoices
      expect(invoices).toHaveLength(2)
      expect(invoices[1]).toMatchObject({ status: "paid", lines: [{ feature: "basic" }] })
      for (const w of waiting.filter((x) => x.status === 200)) {
        expect(w.body.subscription.pendingChange.invoiceId).toBe(invoices[0].id)
      }
      // Paid through the other process: the change takes effect once.
      const checkout = waiting.find((w) => w.status === 200 && w.body.checkoutUrl !== null)!.body.checkoutUrl
      await pay(b, checkout)
      const [s] = (await send(a, "GET", "/v1/subscriptions?customer=waiting")).body.subscriptions
      expect(s).toMatchObject({ plan: "pro" })
      expect(s.pendingChange).toBeUndefined()

      // With a saved card: one paid invoice, one payment, whichever process took it.
      await send(b, "POST", "/v1/customers", { id: "card", email: "c@example.com" })
      const first = await send(b, "POST", "/v1/attach", { customer: "card", product: "basic" })
      await pay(b, first.body.checkoutUrl)
      const racing = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          send(i % 2 === 0 ? a : b, "POST", "/v1/attach", { customer: "card", product: "pro" })
        )
      )
      for (const r of racing) if (r.status !== 200) expect(r.body.code).toBe("change_in_progress")
      // Newest first: the change's invoice, then Basic's first payment's own (h18); one invoice.paid each.
      const paid = (await send(a, "GET", "/v1/billing/invoices?customer=card")).body.invoices
      expect(paid).toHaveLength(2)
      expect(paid[0]).toMatchObject({ status: "paid", lines: [{ feature: "basic" }, { feature: "pro" }] })
      expect(paid[1]).toMatchObject({ status: "paid", lines: [{ feature: "basic" }] })
      const updated = (await send(a, "GET", "/v1/events?type=subscription.updated&customer=card")).body.data
      expect(updated).toHaveLength(1)
      const charged = (await send(b, "GET", "/v1/events?type=invoice.paid&customer=card")).body.data
      expect(charged).toHaveLength(2)
    }, 120_000)
  })
}
