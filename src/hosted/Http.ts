import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Option } from "effect"
import { BillingApi } from "../api/Api.ts"
import { NotFound } from "../api/errors.ts"
import { AppConfig } from "../platform/config.ts"
import { Webhooks } from "../webhooks/Webhooks.ts"
import type { CheckoutRecord } from "../payments/PaymentsRepo.ts"
import { PaymentsRepo } from "../payments/PaymentsRepo.ts"
import { ProviderAccounts } from "../payments/ProviderAccounts.ts"
import { SIGNATURE_HEADER, sign, type SimulatedEvent, simulatedMethodToken } from "../payments/simulated/SimulatedAdapter.ts"

const escape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" })[c]!)

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
  `<title>${escape(title)}</title><style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;` +
  `padding:0 1rem;color:#1a1a1a}.card{border:1px solid #ddd;border-radius:12px;padding:1.5rem}` +
  `button{font-size:1rem;padding:.6rem 1.2rem;border-radius:8px;border:0;background:#0a7d45;color:#fff;cursor:pointer}` +
  `button.secondary{background:#eee;color:#333;margin-left:.5rem}.muted{color:#666;font-size:.9rem}</style></head>` +
  `<body><div class="card">${body}</div><p class="muted">Sandbox: simulated payment provider. No money moves.</p></body></html>`

const amountText = (c: CheckoutRecord) => `${c.currency} ${(Number(c.amount) / 100).toFixed(2)}`

const notFound = () => new NotFound({ code: "not_found", message: "No such checkout" })

/**
 * The simulated provider's hosted pages: what a customer sees, and the completion that sends the provider's
 * signed webhook through the same route and code as a real provider's.
 */
export const HostedHttp = HttpApiBuilder.group(BillingApi, "hosted", (handlers) =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    const repo = yield* PaymentsRepo
    const accounts = yield* ProviderAccounts
    const webhooks = yield* Webhooks

    const find = (organizationId: string, reference: string) =>
      Effect.flatMap(repo.findCheckout(organizationId, reference), (found) =>
        Option.isSome(found) && found.value.provider === "simulated" && config.appEnv === "sandbox"
          ? Effect.succeed(found.value)
          : Effect.fail(notFound()))

    return handlers
      .handle("hostedPage", ({ path }) =>
        Effect.map(find(path.organizationId, path.reference), (c) => {
          if (c.status !== "open") return page("Already completed", `<h1>Already completed</h1><p>This ${path.kind} is ${c.status}.</p>`)
          const setup = c.purpose === "setup"
          const what = escape(String(c.data.description ?? (setup ? "Save a payment method" : "Payment")))
          return page(
            setup ? "Save a card" : "Checkout",
            `<h1>${setup ? "Save a card" : "Pay"}</h1><p>${what}</p>${setup ? "" : `<p><strong>${escape(amountText(c))}</strong></p>`}` +
              `<form method="post"><input type="hidden" name="outcome" value="pay">` +
              `<p><label><input type="radio" name="card" value="ok" checked> Test card 4242 (pays)</label><br>` +
              `<label><input type="radio" name="card" value="declining"> Test card 0002 (saved, later declined)</label></p>` +
              `<button type="submit">${setup ? "Save card" : "Pay"}</button>` +
              `<button class="secondary" type="submit" formaction="?outcome=decline">Decline</button></form>`
          )
        }))
      .handle("hostedComplete", ({ path, payload, urlParams }) =>
        Effect.gen(function*() {
          const c = yield* find(path.organizationId, path.reference)
          if (c.status !== "open") return page("Already completed", `<h1>Already completed</h1><p>This ${path.kind} is ${c.status}.</p>`)
          const outcome = urlParams.outcome ?? (payload.outcome === "decline" ? "decline" : "pay")
          const card = urlParams.card ?? (payload.card === "declining" ? "declining" : "ok")
          const now = yield* Clock.currentTimeMillis
          const metadata = {
            organization_id: c.organizationId,
            customer_id: c.customerId,
            purpose: c.purpose,
            target_id: c.targetId,
            reference: c.reference
          }
          const method = {
            token: simulatedMethodToken(card),
            providerCustomerId: null,
            email: null,
            type: "card",
            brand: "visa",
            last4: card === "declining" ? "0002" : "4242",
            expMonth: 12,
            expYear: new Date(now).getUTCFullYear() + 3,
            reusable: true,
            fingerprint: `sim_fp_${c.customerId}_${card}`
          }
          const event: SimulatedEvent = {
            id: `sim_evt_${crypto.randomUUID()}`,
            type: outcome === "decline" ? "payment.failed" : c.purpose === "setup" ? "setup.succeeded" : "payment.succeeded",
            data: {
              reference: c.reference,
              amount: Number(c.amount),
              currency: c.currency,
              metadata,
              ...(outcome === "decline" ? { message: "Declined by the customer (simulated)" } : { method })
            }
          }
          const body = new TextEncoder().encode(JSON.stringify(event))
          const account = Option.getOrThrow(accounts.managed("simulated"))
          yield* webhooks.receive({ _tag: "Sandbox", provider: "simulated" }, body, {
            [SIGNATURE_HEADER]: sign(account.webhookSecret!, body),
            "content-type": "application/json"
          }).pipe(Effect.orDie)
          const callbackUrl = typeof c.data.callbackUrl === "string" ? c.data.callbackUrl : null
          if (callbackUrl !== null) {
            const target = new URL(callbackUrl)
            target.searchParams.set("reference", c.reference)
            target.searchParams.set("status", outcome === "decline" ? "failed" : "success")
            return HttpServerResponse.redirect(target.toString(), { status: 303 })
          }
          return page(
            outcome === "decline" ? "Declined" : "Done",
            outcome === "decline"
              ? `<h1>Declined</h1><p>The payment was declined. You can close this page.</p>`
              : `<h1>${c.purpose === "setup" ? "Card saved" : "Payment complete"}</h1><p>You can close this page.</p>`
          )
        }))
  }))
