import { createHash } from "node:crypto"
import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Clock, Effect, Either, Option, Schema } from "effect"
import { BillingApi } from "../api/Api.ts"
import { errorBody, NotFound } from "../api/errors.ts"
import { HostedOutcome } from "../api/hosted.ts"
import { formatMajor } from "../domain/majorUnits.ts"
import { AppConfig } from "../platform/config.ts"
import { Webhooks } from "../webhooks/Webhooks.ts"
import { type CheckoutRecord, Payments } from "../payments/Payments.ts"
import { ProviderAccounts } from "../payments/ProviderAccounts.ts"
import {
  SIGNATURE_HEADER,
  sign,
  type SimulatedEvent,
  simulatedMethodToken
} from "../payments/simulated/SimulatedAdapter.ts"

const escape = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

const STYLE =
  `body{font-family:system-ui,sans-serif;max-width:28rem;margin:4rem auto;` +
  `padding:0 1rem;color:#1a1a1a}.card{border:1px solid #ddd;border-radius:12px;padding:1.5rem}` +
  `button{font-size:1rem;padding:.6rem 1.2rem;border-radius:8px;border:0;background:#0a7d45;color:#fff;cursor:pointer}` +
  `button.secondary{background:#eee;color:#333;margin-left:.5rem}.muted{color:#666;font-size:.9rem}`

const page = (title: string, body: string) =>
  `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
  `<title>${escape(title)}</title><style>${STYLE}</style></head>` +
  `<body><div class="card">${body}</div><p class="muted">Sandbox: simulated payment provider. No money moves.</p></body></html>`

/**
 * The pages' policy: nothing loaded from anywhere, no script at all, the one inline style by its hash, never framed
 * (a page that pays must not be clickjacked). The form posts to the page itself; when the checkout returns to the
 * vendor's callback, the 303 that follows the post goes there, and browsers hold that redirect to `form-action` too
 * (chromium aborts it otherwise), so the callback's origin is allowed beside 'self' (its scheme alone for a host CSP
 * cannot name, an IPv6 address).
 */
const STYLE_HASH = `'sha256-${createHash("sha256").update(STYLE).digest("base64")}'`

const policy = (callbackUrl: string | null) => {
  let formAction = "'self'"
  if (callbackUrl !== null && URL.canParse(callbackUrl)) {
    const target = new URL(callbackUrl)
    formAction += ` ${/^[a-z0-9.-]+$/i.test(target.hostname) ? target.origin : target.protocol}`
  }
  return `default-src 'none'; style-src ${STYLE_HASH}; form-action ${formAction}; base-uri 'none'; frame-ancestors 'none'`
}

const callbackOf = (c: CheckoutRecord) => (typeof c.data.callbackUrl === "string" ? c.data.callbackUrl : null)

const html = (body: string, status = 200, callbackUrl: string | null = null) =>
  HttpServerResponse.text(body, {
    status,
    contentType: "text/html; charset=utf-8",
    headers: {
      "content-security-policy": policy(callbackUrl),
      "x-frame-options": "DENY",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "cache-control": "no-store"
    }
  })

/** The amount as the customer reads it: `JPY 1,000`, `KWD 1.000`, `NGN 5,000.00` (the currency's own exponent). */
const amountText = (c: CheckoutRecord) => `${c.currency.toUpperCase()} ${formatMajor(c.amount, c.currency)}`

/**
 * A refusal on a hosted page. These routes are opened by people: a browser, or curl (which accepts anything), gets a
 * page with the status; a client that asks for JSON (and not HTML) gets the API's error body (docs/decisions.md).
 */
const refusal = (
  accept: string | undefined,
  status: 400 | 404,
  code: string,
  title: string,
  message: string
): HttpServerResponse.HttpServerResponse => {
  const wantsJson = accept !== undefined && accept.includes("application/json") && !accept.includes("text/html")
  return wantsJson
    ? HttpServerResponse.unsafeJson(errorBody(status === 404 ? "NotFound" : "BadRequest", code, message), { status })
    : html(page(title, `<h1>${escape(title)}</h1><p>${escape(message)}</p>`), status)
}

const completed = (kind: string, status: string) =>
  page("Already completed", `<h1>Already completed</h1><p>This ${escape(kind)} is ${escape(status)}.</p>`)

const decodeOutcome = Schema.decodeUnknownEither(HostedOutcome)

/**
 * The outcome a POST asks for, from its query and its body, whatever the body's form: none (`curl -X POST`), the
 * page's urlencoded form, or JSON. The query wins, so the Decline button (`formaction="?outcome=decline"`) declines
 * though its form also carries `outcome=pay`. A value the page does not know is refused, never guessed.
 */
const outcomeOf = (
  url: string,
  body: string,
  contentType: string | undefined
): Either.Either<HostedOutcome, string> => {
  const query = Object.fromEntries(new URL(url, "http://localhost").searchParams)
  let fields: unknown = {}
  const text = body.trim()
  if (text !== "") {
    if (contentType?.toLowerCase().includes("json") || text.startsWith("{")) {
      try {
        fields = JSON.parse(text)
      } catch {
        return Either.left("The request body is not valid JSON")
      }
      if (typeof fields !== "object" || fields === null || Array.isArray(fields)) {
        return Either.left("The request body must be a JSON object")
      }
    } else {
      fields = Object.fromEntries(new URLSearchParams(text))
    }
  }
  return Either.mapLeft(
    decodeOutcome({ ...(fields as object), ...query }),
    () => "`outcome` must be `pay` or `decline`, and `card` must be `ok` or `declining`"
  )
}

/**
 * The simulated provider's hosted pages: what a customer sees, and the completion that sends the provider's
 * signed webhook through the same route and code as a real provider's.
 */
export const HostedHttp = HttpApiBuilder.group(BillingApi, "hosted", (handlers) =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const payments = yield* Payments
    const accounts = yield* ProviderAccounts
    const webhooks = yield* Webhooks

    /**
     * The simulated checkout a URL names. On live the simulated provider does not exist: these routes answer as
     * unknown routes do (a JSON 404). On sandbox an unknown page is a 404 page (see `refusal`).
     */
    const find = (path: { readonly kind: string; readonly organizationId: string; readonly reference: string }) =>
      Effect.gen(function* () {
        if (config.appEnv !== "sandbox") return yield* new NotFound({ code: "not_found", message: "No such route" })
        const found =
          path.kind === "checkout" || path.kind === "setup"
            ? yield* payments.checkout(path.organizationId, path.reference)
            : Option.none()
        return Option.filter(found, (c) => c.provider === "simulated")
      })

    const missing = (request: HttpServerRequest.HttpServerRequest, kind: string) =>
      refusal(
        request.headers.accept,
        404,
        "not_found",
        "Not found",
        `No such ${kind === "setup" ? kind : "checkout"} page`
      )

    return handlers
      .handle("hostedPage", ({ path }) =>
        Effect.gen(function* () {
          const found = yield* find(path)
          if (Option.isNone(found)) return missing(yield* HttpServerRequest.HttpServerRequest, path.kind)
          const c = found.value
          if (c.status !== "open") return html(completed(path.kind, c.status))
          const setup = c.purpose === "setup"
          const what = escape(String(c.data.description ?? (setup ? "Save a payment method" : "Payment")))
          const form = page(
            setup ? "Save a card" : "Checkout",
            `<h1>${setup ? "Save a card" : "Pay"}</h1><p>${what}</p>${setup ? "" : `<p><strong>${escape(amountText(c))}</strong></p>`}` +
              `<form method="post"><input type="hidden" name="outcome" value="pay">` +
              `<p><label><input type="radio" name="card" value="ok" checked> Test card 4242 (pays)</label><br>` +
              `<label><input type="radio" name="card" value="declining"> Test card 0002 (saved, later declined)</label></p>` +
              `<button type="submit">${setup ? "Save card" : "Pay"}</button>` +
              `<button class="secondary" type="submit" formaction="?outcome=decline">Decline</button></form>`
          )
          return html(form, 200, callbackOf(c))
        })
      )
      .handleRaw("hostedComplete", ({ path, request }) =>
        Effect.gen(function* () {
          const found = yield* find(path)
          if (Option.isNone(found)) return missing(request, path.kind)
          const c = found.value
          const asked = outcomeOf(request.url, yield* Effect.orDie(request.text), request.headers["content-type"])
          if (Either.isLeft(asked)) {
            return refusal(request.headers.accept, 400, "invalid_request", "Bad request", asked.left)
          }
          if (c.status !== "open") return html(completed(path.kind, c.status))
          const outcome = asked.right.outcome ?? "pay"
          const card = asked.right.card ?? "ok"
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
            type:
              outcome === "decline"
                ? "payment.failed"
                : c.purpose === "setup"
                  ? "setup.succeeded"
                  : "payment.succeeded",
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
          yield* webhooks
            .receive({ _tag: "Sandbox", provider: "simulated" }, body, {
              [SIGNATURE_HEADER]: sign(account.webhookSecret!, body),
              "content-type": "application/json"
            })
            .pipe(Effect.orDie)
          const callbackUrl = callbackOf(c)
          if (callbackUrl !== null) {
            const target = new URL(callbackUrl)
            target.searchParams.set("reference", c.reference)
            target.searchParams.set("status", outcome === "decline" ? "failed" : "success")
            return HttpServerResponse.redirect(target.toString(), { status: 303 })
          }
          return html(
            page(
              outcome === "decline" ? "Declined" : "Done",
              outcome === "decline"
                ? `<h1>Declined</h1><p>The payment was declined. You can close this page.</p>`
                : `<h1>${c.purpose === "setup" ? "Card saved" : "Payment complete"}</h1><p>You can close this page.</p>`
            )
          )
        })
      )
  })
)
