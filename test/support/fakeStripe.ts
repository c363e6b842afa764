/**
 * A fake of Stripe's REST API (v1), enough of it for the official `stripe` SDK and our StripeAdapter:
 * form-encoded bodies with nested keys, bearer secret check, Stripe's error JSON, `Idempotency-Key` replay and
 * conflict (5xx results kept too, keys forgotten after 24 h of the fake's clock), `expand[]`, PaymentIntent search on
 * metadata (optionally lagging behind writes), the account's currencies and Stripe's amount limits; events carry
 * related objects as bare ids, as Stripe's do. Test controls: recorded requests, one-shot injected failures
 * and delays, cards with a behaviour, completing a Checkout Session as the customer would, signed webhook events.
 *
 * Endpoints: POST /v1/customers · POST|GET /v1/checkout/sessions · GET /v1/checkout/sessions/:id ·
 * POST /v1/payment_intents · GET /v1/payment_intents/search · GET /v1/payment_intents/:id ·
 * GET /v1/setup_intents/:id · GET /v1/payment_methods/:id · POST /v1/payment_methods/:id/detach · POST /v1/refunds.
 * The hosted checkout URL (`GET /pay/:id`) answers a tiny page; tests complete sessions with `completeCheckout`.
 */
import Stripe from "stripe"

export type Json = Record<string, unknown>

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  /** Lower-cased header names. */
  readonly headers: Readonly<Record<string, string>>
  readonly rawBody: string
  /** Form body (POST) or query string (GET), decoded into nested objects and arrays. */
  readonly params: Json
  readonly status: number
}

export type Injection =
  /** Answer with this status and Stripe error body instead of handling the request. */
  | { readonly status: number; readonly type?: string; readonly code?: string; readonly message?: string }
  /** Wait this long, then handle the request normally (a client with a shorter timeout gives up first). */
  | { readonly delayMs: number }

export interface InjectionMatch {
  readonly method?: string
  /** Matches when the request path starts with it. */
  readonly path?: string
}

/** What a test card does when confirmed off-session. */
export type CardBehavior = "succeed" | "decline" | "authentication_required" | "requires_action" | "processing"

export interface CardOptions {
  readonly behavior?: CardBehavior
  readonly brand?: string
  readonly last4?: string
  readonly expMonth?: number
  readonly expYear?: number
  readonly fingerprint?: string
  readonly email?: string
}

export interface SignedEvent {
  readonly event: Json
  readonly payload: string
  readonly rawBody: Uint8Array
  readonly headers: Record<string, string>
}

export interface EventOptions {
  /** Signing time in Unix seconds (default now). */
  readonly timestamp?: number
  /** Sign with this secret instead of the fake's webhook secret. */
  readonly secret?: string
  /** Extra `v1=` values placed before the real one (e.g. signatures of a rotated secret). */
  readonly extraSignatures?: ReadonlyArray<string>
  readonly id?: string
}

export interface CheckoutCompletion {
  readonly session: Json
  readonly customer: Json
  readonly paymentMethod: Json
  readonly paymentIntent: Json | null
  readonly setupIntent: Json | null
}

const DECLINE_MESSAGE = "Your card was declined."
const AUTH_MESSAGE = "Your card was declined. This transaction requires authentication."

const randomId = (prefix: string) => {
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
  let out = ""
  for (const byte of crypto.getRandomValues(new Uint8Array(24))) out += alphabet[byte % alphabet.length]
  return `${prefix}_${out}`
}

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v)
const clone = <A>(v: A): A => structuredClone(v)
/** Keys are forgotten this long after first use ("keys … removed after they're at least 24 hours old"). */
export const IDEMPOTENCY_KEY_TTL_MS = 24 * 3_600_000

/**
 * Stripe's documented minimum charge amounts of some currencies (minor units); every amount is at most eight digits.
 * Currencies not listed here are held to no minimum by the fake.
 */
export const STRIPE_MINIMUMS: Readonly<Record<string, number>> = {
  usd: 50,
  eur: 50,
  gbp: 30,
  cad: 50,
  aud: 50,
  chf: 50,
  nzd: 50,
  sgd: 50,
  inr: 50,
  jpy: 50
}
export const STRIPE_MAXIMUM = 99_999_999

export interface FakeStripeOptions {
  readonly secretKey?: string
  readonly webhookSecret?: string
  /** The fake's clock, in ms (Date.now by default): object timestamps, event signatures, key expiry, search lag. */
  readonly now?: () => number
  /**
   * How long a new PaymentIntent stays invisible to search (Stripe: searchable "in under 1 minute" normally, later
   * during incidents; never for read-after-write). Off by default.
   */
  readonly searchLagMs?: number
  /** Currencies the account may charge in (lowercase); any by default. */
  readonly currencies?: ReadonlyArray<string>
}

/** `a[b][0][c]=x` → `{a: {b: [{c: "x"}]}}`. */
export const parseForm = (encoded: string): Json => {
  const root: Json = {}
  for (const [key, value] of new URLSearchParams(encoded)) {
    const m = /^([^[\]]+)((?:\[[^\]]*\])*)$/.exec(key)
    if (!m) {
      root[key] = value
      continue
    }
    const segments = [m[1]!, ...[...m[2]!.matchAll(/\[([^\]]*)\]/g)].map((x) => x[1]!)]
    let node: Json = root
    segments.forEach((segment, i) => {
      const name = segment === "" ? String(Object.keys(node).length) : segment
      if (i === segments.length - 1) node[name] = value
      else {
        if (!isObject(node[name])) node[name] = {}
        node = node[name] as Json
      }
    })
  }
  const arrayify = (v: unknown): unknown => {
    if (!isObject(v)) return v
    const keys = Object.keys(v)
    if (keys.length > 0 && keys.every((k) => /^\d+$/.test(k))) {
      return keys
        .map(Number)
        .sort((a, b) => a - b)
        .map((k) => arrayify(v[String(k)]))
    }
    return Object.fromEntries(keys.map((k) => [k, arrayify(v[k])]))
  }
  return arrayify(root) as Json
}

class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly body: Json
  ) {
    super(String(body["message"]))
  }
}

const invalid = (message: string, param?: string, code?: string) =>
  new ApiError(400, { type: "invalid_request_error", message, ...(param ? { param } : {}), ...(code ? { code } : {}) })
const missing = (kind: string, id: string, param?: string) =>
  new ApiError(404, {
    type: "invalid_request_error",
    code: "resource_missing",
    message: `No such ${kind}: '${id}'`,
    ...(param === undefined ? {} : { param })
  })

const str = (v: unknown): string | undefined => (typeof v === "string" ? v : undefined)
const bool = (v: unknown) => v === "true" || v === true
const int = (v: unknown, param: string, required = true): number | undefined => {
  if (v === undefined) {
    if (required) throw invalid(`Missing required param: ${param}.`, param, "parameter_missing")
    return undefined
  }
  const n = Number(v)
  if (typeof v !== "string" || !/^-?\d+$/.test(v) || !Number.isSafeInteger(n))
    throw invalid(`Invalid integer: ${String(v)}`, param)
  return n
}
const metadataParam = (v: unknown): Record<string, string> => {
  if (v === undefined || v === "") return {}
  if (!isObject(v)) throw invalid("Invalid object", "metadata")
  return Object.fromEntries(Object.entries(v).map(([k, val]) => [k, String(val)]))
}

export const startFakeStripe = (options: FakeStripeOptions = {}) => {
  const now = options.now ?? Date.now
  const nowSeconds = () => Math.floor(now() / 1000)
  /** When each PaymentIntent was created, in ms of the fake's clock (search lag). */
  const createdAt = new Map<string, number>()
  const secretKey = options.secretKey ?? `sk_test_${randomId("fake").slice(5)}`
  const webhookSecret = options.webhookSecret ?? `whsec_${randomId("fake").slice(5)}`

  const customers = new Map<string, Json>()
  const sessions = new Map<string, Json>()
  /** Session fields Stripe keeps but does not return (line items, intent data). */
  const sessionInternals = new Map<string, { lineItems: Array<Json>; paymentIntentData: Json; setupIntentData: Json }>()
  const paymentIntents = new Map<string, Json>()
  const setupIntents = new Map<string, Json>()
  const paymentMethods = new Map<string, Json>()
  const cardBehaviors = new Map<string, CardBehavior>()
  const refunds = new Map<string, Json>()
  const charges = new Map<string, Json>()
  const disputes = new Map<string, Json>()
  const events = new Map<string, Json>()
  const idempotency = new Map<string, { fingerprint: string; status: number; body: string; savedAt: number }>()
  const requests: Array<RecordedRequest> = []
  const injections: Array<{ match: InjectionMatch; injection: Injection }> = []

  const lookup = (id: string): Json | undefined => {
    if (id.startsWith("cus_")) return customers.get(id)
    if (id.startsWith("cs_")) return sessions.get(id)
    if (id.startsWith("pi_")) return paymentIntents.get(id)
    if (id.startsWith("seti_")) return setupIntents.get(id)
    if (id.startsWith("pm_")) return paymentMethods.get(id)
    if (id.startsWith("re_")) return refunds.get(id)
    if (id.startsWith("ch_")) return charges.get(id)
    if (id.startsWith("dp_")) return disputes.get(id)
    return undefined
  }

  const expandPath = (node: unknown, path: ReadonlyArray<string>): void => {
    if (!isObject(node) || path.length === 0) return
    const [head, ...rest] = path as [string, ...Array<string>]
    if (head === "data" && Array.isArray(node["data"])) {
      for (const item of node["data"]) expandPath(item, rest)
      return
    }
    const value = node[head]
    if (typeof value === "string") {
      const found = lookup(value)
      if (!found) return
      node[head] = clone(found)
    }
    expandPath(node[head], rest)
  }

  const render = (object: Json, expand: unknown): Json => {
    const out = clone(object)
    const paths = Array.isArray(expand) ? expand : typeof expand === "string" ? [expand] : []
    for (const path of paths) expandPath(out, String(path).split("."))
    return out
  }

  // ------------------------------------------------------------------------------------------------------------
  // Objects
  // ------------------------------------------------------------------------------------------------------------

  const newCustomer = (email: string | null, metadata: Record<string, string>): Json => {
    const customer: Json = {
      id: randomId("cus"),
      object: "customer",
      email,
      metadata,
      created: nowSeconds(),
      livemode: false
    }
    customers.set(customer["id"] as string, customer)
    return customer
  }

  const newCard = (customer: string | null, card: CardOptions = {}): Json => {
    const last4 = card.last4 ?? "4242"
    const pm: Json = {
      id: randomId("pm"),
      object: "payment_method",
      type: "card",
      customer,
      billing_details: { email: card.email ?? null, name: null, phone: null, address: null },
      card: {
        brand: card.brand ?? "visa",
        last4,
        exp_month: card.expMonth ?? 12,
        exp_year: card.expYear ?? new Date().getFullYear() + 3,
        fingerprint: card.fingerprint ?? `fp_${last4}_${randomId("x").slice(2, 10)}`,
        funding: "credit",
        country: "US"
      },
      metadata: {},
      created: nowSeconds(),
      livemode: false
    }
    paymentMethods.set(pm["id"] as string, pm)
    cardBehaviors.set(pm["id"] as string, card.behavior ?? "succeed")
    return pm
  }

  const newPaymentIntent = (fields: Json): Json => {
    const pi: Json = {
      id: randomId("pi"),
      object: "payment_intent",
      amount: 0,
      amount_received: 0,
      currency: "usd",
      customer: null,
      payment_method: null,
      metadata: {},
      status: "requires_payment_method",
      last_payment_error: null,
      setup_future_usage: null,
      receipt_email: null,
      latest_charge: null,
      next_action: null,
      created: nowSeconds(),
      livemode: false,
      ...fields
    }
    paymentIntents.set(pi["id"] as string, pi)
    createdAt.set(pi["id"] as string, now())
    return pi
  }

  /** A succeeded PaymentIntent's Charge; it carries the intent's metadata as it was when charged, as Stripe's does. */
  const chargeSucceeded = (pi: Json): void => {
    const charge: Json = {
      id: randomId("ch"),
      object: "charge",
      amount: pi["amount"],
      amount_captured: pi["amount"],
      amount_refunded: 0,
      currency: pi["currency"],
      customer: pi["customer"],
      payment_intent: pi["id"],
      payment_method: pi["payment_method"],
      metadata: clone(pi["metadata"]),
      paid: true,
      captured: true,
      refunded: false,
      disputed: false,
      status: "succeeded",
      created: nowSeconds(),
      livemode: false
    }
    charges.set(charge["id"] as string, charge)
    Object.assign(pi, { status: "succeeded", amount_received: pi["amount"], latest_charge: charge["id"] })
  }

  /** Confirms `pi` with its payment method as Stripe would off-session; throws the 402 Stripe would answer. */
  const confirmOffSession = (pi: Json): void => {
    const pmId = pi["payment_method"] as string
    const behavior = cardBehaviors.get(pmId) ?? "succeed"
    const cardError = (code: string, message: string, declineCode?: string) => {
      pi["status"] = "requires_payment_method"
      pi["last_payment_error"] = {
        type: "card_error",
        code,
        message,
        ...(declineCode ? { decline_code: declineCode } : {}),
        payment_method: clone(paymentMethods.get(pmId))
      }
      return new ApiError(402, {
        type: "card_error",
        code,
        message,
        ...(declineCode ? { decline_code: declineCode } : {}),
        payment_intent: clone(pi),
        payment_method: clone(paymentMethods.get(pmId))
      })
    }
    switch (behavior) {
      case "succeed":
        chargeSucceeded(pi)
        return
      case "processing":
        pi["status"] = "processing"
        return
      case "requires_action":
        pi["status"] = "requires_action"
        pi["next_action"] = { type: "use_stripe_sdk" }
        return
      case "authentication_required":
        throw cardError("authentication_required", AUTH_MESSAGE, "authentication_required")
      case "decline":
        throw cardError("card_declined", DECLINE_MESSAGE, "generic_decline")
    }
  }

  // ------------------------------------------------------------------------------------------------------------
  // Routes
  // ------------------------------------------------------------------------------------------------------------

  let baseUrl = ""

  const createCustomer = (p: Json): Json => newCustomer(str(p["email"]) ?? null, metadataParam(p["metadata"]))

  const createSession = (p: Json): Json => {
    const mode = str(p["mode"])
    if (mode !== "payment" && mode !== "setup")
      throw invalid("Invalid mode: must be one of payment, setup or subscription", "mode")
    const successUrl = str(p["success_url"])
    if (!successUrl) throw invalid("Missing required param: success_url.", "success_url", "parameter_missing")
    const customer = str(p["customer"])
    if (customer !== undefined && !customers.has(customer)) throw missing("customer", customer)
    if (customer !== undefined && p["customer_email"] !== undefined) {
      throw invalid("You may only specify one of these parameters: customer, customer_email.", "customer_email")
    }
    if (customer !== undefined && p["customer_creation"] !== undefined) {
      throw invalid("You may only specify one of these parameters: customer, customer_creation.", "customer_creation")
    }
    const lineItems: Array<Json> = []
    let amountTotal: number | null = null
    let currency: string | null = str(p["currency"])?.toLowerCase() ?? null
    if (mode === "payment") {
      const items = p["line_items"]
      if (!Array.isArray(items) || items.length === 0)
        throw invalid("Missing required param: line_items.", "line_items", "parameter_missing")
      amountTotal = 0
      items.forEach((item: unknown, i) => {
        if (!isObject(item) || !isObject(item["price_data"]))
          throw invalid("Missing price_data", `line_items[${i}][price_data]`)
        const pd = item["price_data"]
        const itemCurrency = str(pd["currency"])
        if (!itemCurrency) throw invalid("Missing currency", `line_items[${i}][price_data][currency]`)
        if (itemCurrency !== itemCurrency.toLowerCase())
          throw invalid("Invalid currency", `line_items[${i}][price_data][currency]`)
        const unit = int(pd["unit_amount"], `line_items[${i}][price_data][unit_amount]`)!
        const quantity = int(item["quantity"], `line_items[${i}][quantity]`)!
        if (!isObject(pd["product_data"]) || !str(pd["product_data"]["name"])) {
          throw invalid("Missing product name", `line_items[${i}][price_data][product_data][name]`)
        }
        currency = itemCurrency
        amountTotal! += unit * quantity
        lineItems.push(clone(item))
      })
      currencyCheck(currency!, "line_items[0][price_data][currency]")
      amountCheck(amountTotal, currency!, "line_items")
      if (p["setup_intent_data"] !== undefined)
        throw invalid("setup_intent_data can only be used in setup mode.", "setup_intent_data")
    } else {
      if (!currency) throw invalid("Missing required param: currency.", "currency", "parameter_missing")
      currencyCheck(currency, "currency")
      if (p["payment_intent_data"] !== undefined)
        throw invalid("payment_intent_data can only be used in payment mode.", "payment_intent_data")
      if (p["customer_creation"] !== undefined)
        throw invalid("customer_creation can only be used in payment mode.", "customer_creation")
    }
    const id = randomId("cs_test")
    const session: Json = {
      id,
      object: "checkout.session",
      mode,
      status: "open",
      payment_status: mode === "setup" ? "no_payment_required" : "unpaid",
      url: `${baseUrl}/pay/${id}`,
      client_reference_id: str(p["client_reference_id"]) ?? null,
      customer: customer ?? null,
      customer_creation: str(p["customer_creation"]) ?? null,
      customer_email: str(p["customer_email"]) ?? null,
      customer_details: null,
      amount_total: amountTotal,
      amount_subtotal: amountTotal,
      currency,
      metadata: metadataParam(p["metadata"]),
      payment_intent: null,
      setup_intent: null,
      success_url: successUrl,
      cancel_url: str(p["cancel_url"]) ?? null,
      created: nowSeconds(),
      expires_at: nowSeconds() + 86_400,
      livemode: false
    }
    sessions.set(id, session)
    sessionInternals.set(id, {
      lineItems,
      paymentIntentData: isObject(p["payment_intent_data"]) ? p["payment_intent_data"] : {},
      setupIntentData: isObject(p["setup_intent_data"]) ? p["setup_intent_data"] : {}
    })
    return session
  }

  const listSessions = (p: Json): Json => {
    const limit = Math.min(int(p["limit"], "limit", false) ?? 10, 100)
    const all = [...sessions.values()].reverse() // newest first
    const after = str(p["starting_after"])
    const start = after ? all.findIndex((s) => s["id"] === after) + 1 : 0
    const data = all.slice(start, start + limit)
    return { object: "list", url: "/v1/checkout/sessions", has_more: start + limit < all.length, data: data.map(clone) }
  }

  const currencyCheck = (currency: string, param: string) => {
    if (options.currencies !== undefined && !options.currencies.includes(currency)) {
      throw invalid(`Invalid currency: ${currency}. This account cannot charge in it.`, param)
    }
  }
  const amountCheck = (amount: number, currency: string, param: string) => {
    const minimum = STRIPE_MINIMUMS[currency] ?? 1
    if (amount < minimum)
      throw invalid(`Amount must be at least ${minimum} ${currency} (minor units)`, param, "amount_too_small")
    if (amount > STRIPE_MAXIMUM)
      throw invalid(
        `Amount must be no more than ${STRIPE_MAXIMUM} ${currency} (minor units)`,
        param,
        "amount_too_large"
      )
  }

  const createPaymentIntent = (p: Json): Json => {
    const amount = int(p["amount"], "amount")!
    const currency = str(p["currency"])
    if (!currency) throw invalid("Missing required param: currency.", "currency", "parameter_missing")
    currencyCheck(currency, "currency")
    amountCheck(amount, currency, "amount")
    const customer = str(p["customer"])
    if (customer !== undefined && !customers.has(customer)) throw missing("customer", customer)
    const pmId = str(p["payment_method"])
    const pm = pmId !== undefined ? paymentMethods.get(pmId) : undefined
    if (pmId !== undefined && !pm) throw missing("PaymentMethod", pmId, "payment_method")
    if (pm && pm["customer"] !== null && pm["customer"] !== customer) {
      throw invalid(`The provided PaymentMethod belongs to a different Customer.`, "payment_method")
    }
    const offSession = bool(p["off_session"])
    if (pm && offSession && pm["customer"] === null) {
      // Stripe's words for a PaymentMethod detached from its customer (or never attached): it cannot be reused.
      throw invalid(
        "The provided PaymentMethod was previously used with a PaymentIntent without Customer attachment, shared with a connected account without Customer attachment, or was detached from a Customer. It may not be used again. To use a PaymentMethod multiple times, you must attach it to a Customer first."
      )
    }
    const pi = newPaymentIntent({
      amount,
      currency,
      customer: customer ?? null,
      payment_method: pmId ?? null,
      metadata: metadataParam(p["metadata"]),
      status: pmId ? "requires_confirmation" : "requires_payment_method"
    })
    if (bool(p["confirm"])) {
      if (!pmId)
        throw invalid("You cannot confirm this PaymentIntent because it's missing a payment method.", "payment_method")
      confirmOffSession(pi)
    }
    return pi
  }

  const searchPaymentIntents = (p: Json): Json => {
    const query = str(p["query"])
    if (!query) throw invalid("Missing required param: query.", "query", "parameter_missing")
    const clauses = query.split(/\s+AND\s+/)
    const filters: Array<[string, string]> = []
    for (const clause of clauses) {
      const m = /^metadata\[(['"])(.+?)\1\]:(['"])((?:\\.|[^\\])*?)\3$/.exec(clause.trim())
      if (!m) throw invalid(`Unsupported search query in the fake: ${clause}`, "query")
      filters.push([m[2]!, m[4]!.replace(/\\(.)/g, "$1")])
    }
    const limit = Math.min(int(p["limit"], "limit", false) ?? 10, 100)
    const lag = options.searchLagMs ?? 0
    const data = [...paymentIntents.values()]
      .filter((pi) => now() - (createdAt.get(pi["id"] as string) ?? 0) >= lag)
      .filter((pi) => filters.every(([k, v]) => (pi["metadata"] as Record<string, string>)[k] === v))
      .reverse()
      .slice(0, limit)
      .map(clone)
    return { object: "search_result", url: "/v1/payment_intents/search", has_more: false, next_page: null, data }
  }

  const detachPaymentMethod = (id: string): Json => {
    const pm = paymentMethods.get(id)
    if (!pm) throw missing("payment_method", id)
    if (pm["customer"] === null) {
      throw invalid(
        "The payment method you provided is not attached to a customer so detachment is impossible.",
        undefined,
        "payment_method_unexpected_state"
      )
    }
    pm["customer"] = null
    return pm
  }

  const createRefund = (p: Json): Json => {
    const piId = str(p["payment_intent"])
    if (!piId)
      throw invalid(
        "One of the following params should be provided for this request: payment_intent or charge.",
        "payment_intent"
      )
    const pi = paymentIntents.get(piId)
    if (!pi) throw missing("payment_intent", piId)
    if (pi["status"] !== "succeeded")
      throw invalid(`This PaymentIntent (${piId}) does not have a successful charge to refund.`, "payment_intent")
    const refunded = [...refunds.values()]
      .filter((r) => r["payment_intent"] === piId)
      .reduce((s, r) => s + (r["amount"] as number), 0)
    const remaining = (pi["amount_received"] as number) - refunded
    const amount = int(p["amount"], "amount", false) ?? remaining
    if (amount <= 0 || amount > remaining) {
      throw invalid(
        `Refund amount (${amount}) is greater than unrefunded amount on charge (${remaining})`,
        "amount",
        "amount_too_large"
      )
    }
    const refund: Json = {
      id: randomId("re"),
      object: "refund",
      amount,
      currency: pi["currency"],
      payment_intent: piId,
      charge: pi["latest_charge"],
      status: "succeeded",
      metadata: metadataParam(p["metadata"]),
      created: nowSeconds()
    }
    refunds.set(refund["id"] as string, refund)
    const charge = charges.get(pi["latest_charge"] as string)
    if (charge !== undefined) {
      charge["amount_refunded"] = (charge["amount_refunded"] as number) + amount
      charge["refunded"] = charge["amount_refunded"] === charge["amount"]
    }
    return refund
  }

  const get = (map: Map<string, Json>, kind: string, id: string, expand: unknown) => {
    const obj = map.get(id)
    if (!obj) throw missing(kind, id)
    return render(obj, expand)
  }

  const route = (method: string, path: string, p: Json): Json => {
    let m: RegExpExecArray | null
    if (method === "POST" && path === "/v1/customers") return createCustomer(p)
    if (method === "POST" && path === "/v1/checkout/sessions") return createSession(p)
    if (method === "GET" && path === "/v1/checkout/sessions") return listSessions(p)
    if (method === "GET" && (m = /^\/v1\/checkout\/sessions\/([^/]+)$/.exec(path)))
      return get(sessions, "checkout.session", m[1]!, p["expand"])
    if (method === "POST" && path === "/v1/payment_intents") return createPaymentIntent(p)
    if (method === "GET" && path === "/v1/payment_intents/search") return render(searchPaymentIntents(p), p["expand"])
    if (method === "GET" && (m = /^\/v1\/payment_intents\/([^/]+)$/.exec(path)))
      return get(paymentIntents, "payment_intent", m[1]!, p["expand"])
    if (method === "GET" && (m = /^\/v1\/setup_intents\/([^/]+)$/.exec(path)))
      return get(setupIntents, "setup_intent", m[1]!, p["expand"])
    if (method === "GET" && (m = /^\/v1\/payment_methods\/([^/]+)$/.exec(path)))
      return get(paymentMethods, "payment_method", m[1]!, p["expand"])
    if (method === "POST" && (m = /^\/v1\/payment_methods\/([^/]+)\/detach$/.exec(path)))
      return clone(detachPaymentMethod(m[1]!))
    if (method === "POST" && path === "/v1/refunds") return createRefund(p)
    if (method === "GET" && (m = /^\/v1\/charges\/([^/]+)$/.exec(path)))
      return get(charges, "charge", m[1]!, p["expand"])
    throw new ApiError(404, {
      type: "invalid_request_error",
      message: `Unrecognized request URL (${method}: ${path}).`
    })
  }

  const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
    new Response(typeof body === "string" ? body : JSON.stringify(body), {
      status,
      headers: { "content-type": "application/json", "request-id": randomId("req"), ...headers }
    })

  const takeInjection = (method: string, path: string): Injection | undefined => {
    const i = injections.findIndex(
      ({ match }) =>
        (match.method === undefined || match.method.toUpperCase() === method) &&
        (match.path === undefined || path.startsWith(match.path))
    )
    if (i < 0) return undefined
    return injections.splice(i, 1)[0]!.injection
  }

  const handle = async (req: Request): Promise<Response> => {
    const url = new URL(req.url)
    const method = req.method.toUpperCase()
    const path = url.pathname
    const rawBody = method === "GET" ? "" : await req.text()
    const headers: Record<string, string> = {}
    req.headers.forEach((v, k) => {
      headers[k.toLowerCase()] = v
    })
    const params = parseForm(method === "GET" ? url.search.slice(1) : rawBody)
    const respond = (status: number, body: unknown, extra: Record<string, string> = {}) => {
      requests.push({ method, path, headers, rawBody, params, status })
      return json(status, body, extra)
    }

    if (method === "GET" && path.startsWith("/pay/")) {
      requests.push({ method, path, headers, rawBody, params, status: 200 })
      return new Response("<html><body>Fake Stripe Checkout</body></html>", {
        headers: { "content-type": "text/html" }
      })
    }

    const idemKey = method === "POST" ? headers["idempotency-key"] : undefined
    const fingerprint = `${method} ${path} ${rawBody}`
    const savedFor = (key: string) => {
      const saved = idempotency.get(key)
      if (saved !== undefined && now() - saved.savedAt >= IDEMPOTENCY_KEY_TTL_MS) {
        idempotency.delete(key)
        return undefined
      }
      return saved
    }

    const injection = takeInjection(method, path)
    if (injection && "delayMs" in injection) await Bun.sleep(injection.delayMs)
    else if (injection) {
      const body = JSON.stringify({
        error: {
          type: injection.type ?? (injection.status >= 500 ? "api_error" : "invalid_request_error"),
          message: injection.message ?? (injection.status >= 500 ? "An unknown error occurred" : "Injected failure"),
          ...(injection.code ? { code: injection.code } : {})
        }
      })
      // An internal error happens once the endpoint runs: Stripe keeps it under the key, and a retry gets it again.
      if (idemKey !== undefined && injection.status >= 500 && savedFor(idemKey) === undefined) {
        idempotency.set(idemKey, { fingerprint, status: injection.status, body, savedAt: now() })
      }
      return respond(injection.status, body)
    }

    const auth = headers["authorization"] ?? ""
    const key = auth.startsWith("Bearer ") ? auth.slice(7) : ""
    if (key !== secretKey) {
      // Real Stripe masks the key; the fake echoes it whole, so tests can prove the adapter never repeats it.
      return respond(401, {
        error: {
          type: "invalid_request_error",
          message: key ? `Invalid API Key provided: ${key}` : "You did not provide an API key."
        }
      })
    }
    if (
      method === "POST" &&
      rawBody !== "" &&
      !(headers["content-type"] ?? "").includes("application/x-www-form-urlencoded")
    ) {
      return respond(400, {
        error: { type: "invalid_request_error", message: "Invalid request: bodies must be form-encoded" }
      })
    }

    if (idemKey !== undefined) {
      const saved = savedFor(idemKey)
      if (saved) {
        if (saved.fingerprint !== fingerprint) {
          return respond(400, {
            error: {
              type: "idempotency_error",
              message: `Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '${idemKey}' if you meant to execute a different request.`
            }
          })
        }
        return respond(saved.status, saved.body, { "idempotent-replayed": "true", "idempotency-key": idemKey })
      }
    }

    let status: number
    let body: string
    try {
      status = 200
      body = JSON.stringify(route(method, path, params))
    } catch (error) {
      if (!(error instanceof ApiError)) throw error
      status = error.status
      body = JSON.stringify({ error: error.body })
    }
    // Stripe saves the outcome once the endpoint began executing: successes, card errors and internal errors (above),
    // not validation errors.
    if (idemKey !== undefined && (status === 200 || status === 402))
      idempotency.set(idemKey, { fingerprint, status, body, savedAt: now() })
    return respond(status, body, idemKey !== undefined ? { "idempotency-key": idemKey } : {})
  }

  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: (req) =>
      handle(req).catch((error) =>
        json(500, { error: { type: "api_error", message: `Fake Stripe crashed: ${String(error)}` } })
      )
  })
  baseUrl = `http://127.0.0.1:${server.port}`

  // ------------------------------------------------------------------------------------------------------------
  // Test controls
  // ------------------------------------------------------------------------------------------------------------

  /** Completes a Checkout Session as the customer on the hosted page would. */
  const completeCheckout = (
    sessionId: string,
    opts: { readonly outcome?: "succeed" | "decline"; readonly card?: CardOptions } = {}
  ): CheckoutCompletion => {
    const session = sessions.get(sessionId)
    const internals = sessionInternals.get(sessionId)
    if (!session || !internals) throw new Error(`fakeStripe: no session ${sessionId}`)
    if (session["status"] !== "open")
      throw new Error(`fakeStripe: session ${sessionId} is ${String(session["status"])}`)
    const succeed = (opts.outcome ?? "succeed") === "succeed"
    const email =
      (session["customer_email"] as string | null) ??
      (session["customer"] ? (customers.get(session["customer"] as string)?.["email"] as string | null) : null) ??
      opts.card?.email ??
      "customer@example.com"
    let customerId = session["customer"] as string | null
    if (customerId === null) customerId = newCustomer(email, {})["id"] as string
    const customer = customers.get(customerId)!
    const details = { email, name: null, phone: null, address: null }

    if (session["mode"] === "setup") {
      const pm = newCard(succeed ? customerId : null, { email, ...opts.card })
      const si: Json = {
        id: randomId("seti"),
        object: "setup_intent",
        customer: customerId,
        payment_method: pm["id"],
        metadata: metadataParam(internals.setupIntentData["metadata"]),
        status: succeed ? "succeeded" : "requires_payment_method",
        usage: "off_session",
        last_setup_error: succeed ? null : { type: "card_error", code: "card_declined", message: DECLINE_MESSAGE },
        created: nowSeconds(),
        livemode: false
      }
      setupIntents.set(si["id"] as string, si)
      session["setup_intent"] = si["id"]
      if (succeed) Object.assign(session, { status: "complete", customer: customerId, customer_details: details })
      return {
        session: clone(session),
        customer: clone(customer),
        paymentMethod: clone(pm),
        paymentIntent: null,
        setupIntent: clone(si)
      }
    }

    const saveCard = internals.paymentIntentData["setup_future_usage"] === "off_session"
    const pm = newCard(succeed && saveCard ? customerId : null, { email, ...opts.card })
    const pi = newPaymentIntent({
      amount: session["amount_total"],
      currency: session["currency"],
      customer: customerId,
      payment_method: pm["id"],
      metadata: metadataParam(internals.paymentIntentData["metadata"]),
      setup_future_usage: str(internals.paymentIntentData["setup_future_usage"]) ?? null,
      receipt_email: null
    })
    if (succeed) {
      chargeSucceeded(pi)
      Object.assign(session, {
        status: "complete",
        payment_status: "paid",
        customer: customerId,
        customer_details: details,
        payment_intent: pi["id"]
      })
    } else {
      pi["last_payment_error"] = {
        type: "card_error",
        code: "card_declined",
        decline_code: "generic_decline",
        message: DECLINE_MESSAGE
      }
      session["payment_intent"] = pi["id"]
    }
    return {
      session: clone(session),
      customer: clone(customer),
      paymentMethod: clone(pm),
      paymentIntent: clone(pi),
      setupIntent: null
    }
  }

  /** The cardholder disputes a succeeded payment (its Charge): a Dispute as Stripe opens it. */
  const openDispute = (paymentIntentId: string): Json => {
    const pi = paymentIntents.get(paymentIntentId)
    const charge = pi === undefined ? undefined : charges.get(pi["latest_charge"] as string)
    if (pi === undefined || charge === undefined) throw new Error(`fakeStripe: no charge of ${paymentIntentId}`)
    charge["disputed"] = true
    const dispute: Json = {
      id: randomId("dp"),
      object: "dispute",
      amount: charge["amount"],
      currency: charge["currency"],
      charge: charge["id"],
      payment_intent: pi["id"],
      reason: "fraudulent",
      status: "needs_response",
      is_charge_refundable: false,
      metadata: {},
      created: nowSeconds(),
      livemode: false
    }
    disputes.set(dispute["id"] as string, dispute)
    return clone(dispute)
  }

  const closeDispute = (disputeId: string, status: "won" | "lost"): Json => {
    const dispute = disputes.get(disputeId)
    if (dispute === undefined) throw new Error(`fakeStripe: no dispute ${disputeId}`)
    dispute["status"] = status
    return clone(dispute)
  }

  /** `t=…,v1=…` for `payload`, signed by Stripe's own helper. */
  const sign = async (payload: string, opts: { readonly timestamp?: number; readonly secret?: string } = {}) =>
    Stripe.webhooks.generateTestHeaderStringAsync({
      payload,
      secret: opts.secret ?? webhookSecret,
      ...(opts.timestamp !== undefined ? { timestamp: opts.timestamp } : {})
    })

  /** A signed webhook event of `type` about `object` (a snapshot as Stripe sends it). */
  const event = async (type: string, object: Json, opts: EventOptions = {}): Promise<SignedEvent> => {
    const timestamp = opts.timestamp ?? nowSeconds()
    const evt: Json = {
      id: opts.id ?? randomId("evt"),
      object: "event",
      api_version: Stripe.API_VERSION,
      created: timestamp,
      // Stripe never expands objects inside events: related objects stay bare ids, as stored.
      data: { object: clone(object) },
      livemode: false,
      pending_webhooks: 1,
      request: { id: null, idempotency_key: null },
      type
    }
    events.set(evt["id"] as string, evt)
    const payload = JSON.stringify(evt, null, 2)
    let header = await sign(payload, { timestamp, ...(opts.secret !== undefined ? { secret: opts.secret } : {}) })
    if (opts.extraSignatures && opts.extraSignatures.length > 0) {
      const [t, ...rest] = header.split(",")
      header = [t, ...opts.extraSignatures.map((s) => `v1=${s}`), ...rest].join(",")
    }
    return {
      event: evt,
      payload,
      rawBody: new TextEncoder().encode(payload),
      headers: { "stripe-signature": header, "content-type": "application/json; charset=utf-8" }
    }
  }

  /** A signed event about a stored object (`cs_…`, `pi_…`, `seti_…`), in its current state. */
  const eventFor = (type: string, objectId: string, opts: EventOptions = {}) => {
    const object = lookup(objectId)
    if (!object) throw new Error(`fakeStripe: no object ${objectId}`)
    return event(type, object, opts)
  }

  return {
    url: baseUrl,
    secretKey,
    webhookSecret,
    /** Every API request, oldest first. */
    requests,
    requestsTo: (method: string, pathPrefix: string) =>
      requests.filter((r) => r.method === method.toUpperCase() && r.path.startsWith(pathPrefix)),
    /** One-shot: the next request matching `match` (default: any) gets `injection`. */
    inject: (injection: Injection, match: InjectionMatch = {}) => {
      injections.push({ match, injection })
    },
    clearInjections: () => {
      injections.length = 0
    },
    customers,
    sessions,
    paymentIntents,
    setupIntents,
    paymentMethods,
    refunds,
    charges,
    disputes,
    /** A refund as made from the Dashboard; `charge.refunded` is then `eventFor("charge.refunded", chargeId)`. */
    refund: (paymentIntentId: string, amount?: number) =>
      clone(
        createRefund({ payment_intent: paymentIntentId, ...(amount === undefined ? {} : { amount: String(amount) }) })
      ),
    openDispute,
    closeDispute,
    /** A customer with an attached card (as a finished checkout leaves it), for off-session charges. */
    createCustomerWithCard: (opts: CardOptions = {}) => {
      const customer = newCustomer(opts.email ?? "customer@example.com", {})
      const paymentMethod = newCard(customer["id"] as string, { email: customer["email"] as string, ...opts })
      return { customer: clone(customer), paymentMethod: clone(paymentMethod) }
    },
    completeCheckout,
    sign,
    event,
    eventFor,
    stop: () => server.stop(true)
  }
}

export type FakeStripe = ReturnType<typeof startFakeStripe>
