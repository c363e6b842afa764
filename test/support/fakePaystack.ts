/**
 * A fake of Paystack's REST API (the endpoints our adapter uses), on a real port, for tests. Shapes follow
 * Paystack's OpenAPI description (/work/shared/reference/paystack-openapi.yaml): `{status: true, message, data}`
 * on success, `{status: false, message, …}` with the HTTP status Paystack uses on errors.
 *
 * Test control:
 * - `fake.account` is a `ProviderAccount` pointing at the fake with its secret key.
 * - `fake.complete(reference)` is the customer paying on the hosted page of an initialized transaction; it returns
 *   the signed `charge.success` webhook Paystack would send (`body`, `rawBody`, `signature`, `headers`), with a
 *   reusable card `authorization` by default. `fake.decline(reference)` is the customer's card being declined there:
 *   the transaction is `failed` and nothing is sent (Paystack documents no `charge.failed` event; a failure is
 *   learned by verifying the transaction). The same happens over HTTP: `POST {authorization_url}`
 *   (`?outcome=decline` to fail), which delivers the success webhook to `options.webhookUrl` when set, like the
 *   simulated provider's pay button (decisions.md §8).
 * - `fake.webhookFor(reference)` signs the webhook of any finished transaction (e.g. one made by
 *   `charge_authorization`); `fake.webhook(type, data)` signs any event; `fake.sign(body)` signs any bytes.
 * - `fake.failNext(failure)` injects the next answer: a declined / action-required / pending charge, a 401,
 *   a 5xx, a 4xx with a message, or a delay before answering normally.
 * - `fake.requests` records every API call (method, path, bearer, parsed body) for assertions.
 *
 * Account rules, as Paystack documents them: only the currencies enabled for the business (`options.currencies`),
 * each currency's transaction minimum, a reference used once.
 */
import type { ProviderAccount } from "../../src/payments/PaymentProvider.ts"

export type PaystackActionStatus =
  "send_otp" | "send_pin" | "send_phone" | "send_birthday" | "send_address" | "open_url" | "pay_offline"

export type PaystackFailure =
  /** `charge_authorization` answers 200 "Charge attempted" with `data.status: "failed"`. */
  | { readonly kind: "decline"; readonly message?: string }
  /** `charge_authorization` answers 200 with a status that needs the customer (`send_otp` by default). */
  | { readonly kind: "action"; readonly status?: PaystackActionStatus; readonly message?: string }
  /** `charge_authorization` answers 200 with `data.status: "pending"`. */
  | { readonly kind: "pending" }
  /** 401 `Invalid key`, whatever the key. */
  | { readonly kind: "unauthorized" }
  /** A 5xx (500 by default, a JSON body; 502/503/504 come as an HTML page, as from a proxy). */
  | { readonly kind: "serverError"; readonly status?: number }
  /** Any 4xx with Paystack's error body. */
  | { readonly kind: "reject"; readonly status?: number; readonly message: string }
  /** Waits `ms` before handling the request normally. */
  | { readonly kind: "delay"; readonly ms: number }

export interface FailNextOptions {
  /** Only requests to this path (e.g. "/refund"); charge outcomes default to `/transaction/charge_authorization`. */
  readonly path?: string
  /** How many matching requests it applies to (1 by default). */
  readonly times?: number
}

export interface FakeCard {
  readonly brand?: string
  readonly cardType?: string
  readonly bin?: string
  readonly last4?: string
  readonly expMonth?: string
  readonly expYear?: string
  readonly bank?: string
  readonly reusable?: boolean
  /** Paystack's card fingerprint; by default derived from the card's number-like fields. */
  readonly signature?: string
}

/** How `data.metadata` is written in a webhook (Paystack is inconsistent about it). */
export type MetadataAs = "asSent" | "object" | "string" | "zero" | "empty" | "null"

export interface CompleteOptions {
  readonly card?: FakeCard
  readonly gatewayResponse?: string
  readonly metadataAs?: MetadataAs
}

export interface DeclineOptions {
  readonly card?: FakeCard
  readonly gatewayResponse?: string
}

export interface SignedWebhook {
  readonly event: { readonly event: string; readonly data: Record<string, unknown> }
  readonly body: string
  readonly rawBody: Uint8Array
  readonly signature: string
  /** What Paystack sends: `content-type` and `x-paystack-signature`. */
  readonly headers: Readonly<Record<string, string>>
}

export interface FakeAuthorization {
  readonly authorization_code: string
  readonly bin: string
  readonly last4: string
  readonly exp_month: string
  readonly exp_year: string
  readonly channel: string
  readonly card_type: string
  readonly bank: string
  readonly country_code: string
  readonly brand: string
  readonly reusable: boolean
  readonly signature: string
  readonly account_name: null
  /** Not on the wire: the email Paystack ties the authorization to, and whether it was deactivated. */
  readonly email: string
  active: boolean
}

export interface FakeTransaction {
  readonly id: number
  readonly reference: string
  readonly accessCode: string
  readonly amount: number
  readonly currency: string
  readonly email: string
  readonly channels: ReadonlyArray<string> | null
  readonly callbackUrl: string | null
  /** As received: an object (initialize), a string (charge_authorization), or undefined. */
  readonly metadata: unknown
  readonly source: "initialize" | "charge_authorization"
  readonly createdAt: string
  status: string
  gatewayResponse: string | null
  paidAt: string | null
  authorization: FakeAuthorization | null
  refunded: number
}

export interface FakeRefund {
  readonly id: number
  readonly refundReference: string
  readonly transactionReference: string
  readonly amount: number
  readonly currency: string
}

export interface FakeDispute {
  readonly id: number
  readonly transactionReference: string
  readonly refundAmount: number
  readonly currency: string
  status: string
  resolution: string | null
}

export interface RecordedRequest {
  readonly method: string
  readonly path: string
  readonly bearer: string | null
  readonly body: unknown
}

export interface FakePaystackOptions {
  readonly secretKey?: string
  /** When set, a payment completed over HTTP on the hosted page delivers its webhook here. */
  readonly webhookUrl?: string
  /**
   * The currencies this account may charge in (Paystack enables them per business; others are refused with
   * "Currency not supported by merchant"). NGN only by default, as a new Nigerian business starts.
   */
  readonly currencies?: ReadonlyArray<string>
}

/**
 * Paystack's documented transaction minimums ("Supported currency" in its API reference), in minor units. Paystack
 * documents no maximum.
 */
export const PAYSTACK_TRANSACTION_MINIMUMS: Readonly<Record<string, number>> = {
  NGN: 5_000,
  USD: 200,
  GHS: 10,
  ZAR: 100,
  KES: 300
}

export interface FakePaystack {
  readonly baseUrl: string
  readonly secretKey: string
  readonly account: ProviderAccount
  readonly transactions: ReadonlyMap<string, FakeTransaction>
  readonly authorizations: ReadonlyMap<string, FakeAuthorization>
  readonly refunds: ReadonlyArray<FakeRefund>
  readonly requests: ReadonlyArray<RecordedRequest>
  readonly failNext: (failure: PaystackFailure, options?: FailNextOptions) => void
  /** The customer pays on the hosted page; returns the signed `charge.success` webhook Paystack sends. */
  readonly complete: (
    reference: string,
    options?: CompleteOptions
  ) => SignedWebhook & { readonly authorizationCode: string }
  /** The customer's card is declined on the hosted page: the transaction is `failed`, and Paystack sends nothing. */
  readonly decline: (reference: string, options?: DeclineOptions) => void
  /** A reusable card authorization for `email`, as if saved by an earlier payment. */
  readonly seedAuthorization: (email: string, card?: FakeCard) => FakeAuthorization
  readonly webhookFor: (reference: string, options?: { readonly metadataAs?: MetadataAs }) => SignedWebhook
  /** The signed `refund.processed` Paystack sends once a refund (made through `POST /refund`) is processed. */
  readonly refundProcessed: (refundId: number) => SignedWebhook
  /** The customer disputes a paid transaction: the signed `charge.dispute.create`. */
  readonly dispute: (reference: string) => SignedWebhook & { readonly disputeId: number }
  /** The dispute is resolved (`merchant-accepted` refunds the customer): the signed `charge.dispute.resolve`. */
  readonly resolveDispute: (disputeId: number, resolution: "merchant-accepted" | "declined") => SignedWebhook
  readonly webhook: (event: string, data: Record<string, unknown>) => SignedWebhook
  readonly sign: (body: string | Uint8Array) => string
  /** POSTs a signed webhook to `url` as Paystack would. */
  readonly deliver: (webhook: SignedWebhook, url: string) => Promise<Response>
  readonly stop: () => Promise<void>
}

const CHANNELS = new Set(["card", "bank", "ussd", "qr", "eft", "mobile_money", "bank_transfer"])
const REFERENCE = /^[A-Za-z0-9.=-]+$/

const randomCode = (length: number) => {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
  const bytes = crypto.getRandomValues(new Uint8Array(length))
  return Array.from(bytes, (b) => alphabet[b % alphabet.length]).join("")
}

const json = (status: number, body: unknown) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json; charset=utf-8" } })
const ok = (message: string, data?: unknown) =>
  json(200, data === undefined ? { status: true, message } : { status: true, message, data })
const error = (status: number, message: string, extra: Record<string, unknown> = {}) =>
  json(status, { status: false, message, ...extra })

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v)
const isPositiveInt = (v: unknown): v is number => typeof v === "number" && Number.isSafeInteger(v) && v > 0
/** Paystack takes form-encoded bodies too, where every amount is a string. */
const intOf = (v: unknown): unknown => (typeof v === "string" && /^\d+$/.test(v) ? Number(v) : v)

export const startFakePaystack = (options: FakePaystackOptions = {}): FakePaystack => {
  const secretKey = options.secretKey ?? `sk_test_${randomCode(40)}`
  const transactions = new Map<string, FakeTransaction>()
  const byAccessCode = new Map<string, FakeTransaction>()
  const authorizations = new Map<string, FakeAuthorization>()
  const customers = new Map<string, { id: number; customer_code: string; email: string }>()
  const refunds: Array<FakeRefund> = []
  const requests: Array<RecordedRequest> = []
  const failures: Array<{ failure: PaystackFailure; path: string | undefined; left: number }> = []
  let nextId = 4_100_000_000

  const customerFor = (email: string) => {
    const key = email.toLowerCase()
    let c = customers.get(key)
    if (c === undefined) {
      c = { id: ++nextId, customer_code: `CUS_${randomCode(15)}`, email }
      customers.set(key, c)
    }
    return c
  }

  const sign = (body: string | Uint8Array) => {
    const hasher = new Bun.CryptoHasher("sha512", secretKey)
    hasher.update(body)
    return hasher.digest("hex")
  }

  const makeAuthorization = (email: string, card: FakeCard = {}): FakeAuthorization => {
    const brand = card.brand ?? "visa"
    const bin = card.bin ?? "408408"
    const last4 = card.last4 ?? "4081"
    const exp_month = card.expMonth ?? "12"
    const exp_year = card.expYear ?? "2030"
    const auth: FakeAuthorization = {
      authorization_code: `AUTH_${randomCode(10)}`,
      bin,
      last4,
      exp_month,
      exp_year,
      channel: "card",
      card_type: card.cardType ?? `${brand} DEBIT`,
      bank: card.bank ?? "TEST BANK",
      country_code: "NG",
      brand,
      reusable: card.reusable ?? true,
      signature:
        card.signature ??
        `SIG_${new Bun.CryptoHasher("sha256").update(`${bin}${last4}${exp_month}${exp_year}`).digest("hex").slice(0, 20)}`,
      account_name: null,
      email,
      active: true
    }
    authorizations.set(auth.authorization_code, auth)
    return auth
  }

  const authorizationPayload = (a: FakeAuthorization) => ({
    authorization_code: a.authorization_code,
    bin: a.bin,
    last4: a.last4,
    exp_month: a.exp_month,
    exp_year: a.exp_year,
    channel: a.channel,
    card_type: a.card_type,
    bank: a.bank,
    country_code: a.country_code,
    brand: a.brand,
    reusable: a.reusable,
    signature: a.signature,
    account_name: a.account_name,
    receiver_bank_account_number: null,
    receiver_bank: null
  })

  const metadataWire = (tx: FakeTransaction, as: MetadataAs = "asSent"): unknown => {
    const asObject = typeof tx.metadata === "string" ? safeParse(tx.metadata) : tx.metadata
    switch (as) {
      case "asSent":
        return tx.metadata === undefined ? "" : tx.metadata
      case "object":
        return asObject ?? {}
      case "string":
        return JSON.stringify(asObject ?? {})
      case "zero":
        return 0
      case "empty":
        return ""
      case "null":
        return null
    }
  }

  const transactionPayload = (tx: FakeTransaction, metadataAs?: MetadataAs): Record<string, unknown> => {
    const customer = customerFor(tx.email)
    return {
      id: tx.id,
      domain: "test",
      status: tx.status,
      reference: tx.reference,
      receipt_number: null,
      amount: tx.amount,
      message: null,
      gateway_response: tx.gatewayResponse,
      paid_at: tx.paidAt,
      paidAt: tx.paidAt,
      created_at: tx.createdAt,
      createdAt: tx.createdAt,
      transaction_date: tx.createdAt,
      channel: "card",
      currency: tx.currency,
      ip_address: "127.0.0.1",
      metadata: metadataWire(tx, metadataAs),
      log: null,
      fees: tx.status === "success" ? Math.min(Math.round(tx.amount * 0.015), 200_000) : null,
      fees_split: null,
      authorization: tx.authorization === null ? {} : authorizationPayload(tx.authorization),
      customer: {
        id: customer.id,
        first_name: null,
        last_name: null,
        email: customer.email,
        customer_code: customer.customer_code,
        phone: null,
        metadata: null,
        risk_action: "default",
        international_format_phone: null
      },
      plan: null,
      split: {},
      order_id: null,
      requested_amount: tx.amount,
      pos_transaction_data: null,
      source: null,
      fees_breakdown: null,
      connect: null,
      plan_object: {},
      subaccount: {}
    }
  }

  const signed = (event: string, data: Record<string, unknown>): SignedWebhook => {
    const payload = { event, data }
    const body = JSON.stringify(payload)
    const signature = sign(body)
    return {
      event: payload,
      body,
      rawBody: new TextEncoder().encode(body),
      signature,
      headers: { "content-type": "application/json", "x-paystack-signature": signature }
    }
  }

  const webhookFor = (reference: string, opts: { readonly metadataAs?: MetadataAs } = {}): SignedWebhook => {
    const tx = transactions.get(reference)
    if (tx === undefined) throw new Error(`fakePaystack: no transaction ${reference}`)
    // Paystack's webhooks include no `charge.failed`: only a success is announced.
    if (tx.status !== "success")
      throw new Error(`fakePaystack: transaction ${reference} is ${tx.status}, Paystack sends nothing`)
    return signed("charge.success", transactionPayload(tx, opts.metadataAs))
  }

  /** A transaction the customer can still pay on its page (a declined card may be followed by another). */
  const payable = (reference: string) => {
    const tx = transactions.get(reference)
    if (tx === undefined) throw new Error(`fakePaystack: no transaction ${reference}`)
    if (tx.status === "success") throw new Error(`fakePaystack: transaction ${reference} is already paid`)
    if (tx.source !== "initialize") throw new Error(`fakePaystack: transaction ${reference} has no hosted page`)
    return tx
  }

  const complete = (reference: string, opts: CompleteOptions = {}) => {
    const tx = payable(reference)
    tx.status = "success"
    tx.gatewayResponse = opts.gatewayResponse ?? "Successful"
    tx.paidAt = new Date().toISOString()
    const authorization = makeAuthorization(tx.email, opts.card)
    tx.authorization = authorization
    const hook = webhookFor(reference, opts.metadataAs === undefined ? {} : { metadataAs: opts.metadataAs })
    return { ...hook, authorizationCode: authorization.authorization_code }
  }

  const decline = (reference: string, opts: DeclineOptions = {}) => {
    const tx = payable(reference)
    tx.status = "failed"
    tx.gatewayResponse = opts.gatewayResponse ?? "Declined"
    tx.authorization = makeAuthorization(tx.email, { ...opts.card, reusable: false })
  }

  // A processed refund names its transaction by reference only: no metadata, the amount as a string (as Paystack's
  // own samples show it).
  const refundProcessed = (refundId: number): SignedWebhook => {
    const r = refunds.find((x) => x.id === refundId)
    if (r === undefined) throw new Error(`fakePaystack: no refund ${refundId}`)
    const customer = customerFor(transactions.get(r.transactionReference)!.email)
    return signed("refund.processed", {
      status: "processed",
      transaction_reference: r.transactionReference,
      refund_reference: r.refundReference,
      amount: String(r.amount),
      currency: r.currency,
      processor: "mpgs_zen",
      customer: { first_name: null, last_name: null, email: customer.email },
      integration: 100_001,
      domain: "test"
    })
  }

  const disputes = new Map<number, FakeDispute>()
  const disputePayload = (d: FakeDispute): Record<string, unknown> => {
    const tx = transactions.get(d.transactionReference)!
    return {
      id: d.id,
      refund_amount: d.refundAmount,
      currency: d.currency,
      status: d.status,
      resolution: d.resolution,
      domain: "test",
      transaction: transactionPayload(tx),
      transaction_reference: null,
      category: "chargeback",
      customer: { email: tx.email }
    }
  }

  const dispute = (reference: string) => {
    const tx = transactions.get(reference)
    if (tx === undefined || tx.status !== "success") throw new Error(`fakePaystack: no paid transaction ${reference}`)
    const d: FakeDispute = {
      id: ++nextId,
      transactionReference: reference,
      refundAmount: tx.amount,
      currency: tx.currency,
      status: "awaiting-merchant-feedback",
      resolution: null
    }
    disputes.set(d.id, d)
    return { ...signed("charge.dispute.create", disputePayload(d)), disputeId: d.id }
  }

  const resolveDispute = (disputeId: number, resolution: "merchant-accepted" | "declined") => {
    const d = disputes.get(disputeId)
    if (d === undefined) throw new Error(`fakePaystack: no dispute ${disputeId}`)
    d.status = "resolved"
    d.resolution = resolution
    if (resolution === "merchant-accepted") transactions.get(d.transactionReference)!.status = "reversed"
    return signed("charge.dispute.resolve", disputePayload(d))
  }

  const deliver = (webhook: SignedWebhook, url: string) =>
    fetch(url, { method: "POST", headers: webhook.headers, body: webhook.body })

  const takeFailure = (path: string): PaystackFailure | null => {
    const index = failures.findIndex((f) => f.path === undefined || f.path === path)
    if (index < 0) return null
    const entry = failures[index]!
    entry.left -= 1
    if (entry.left <= 0) failures.splice(index, 1)
    return entry.failure
  }

  const readBody = async (req: Request): Promise<{ ok: true; body: Record<string, unknown> } | { ok: false }> => {
    const text = await req.text()
    if (text === "") return { ok: true, body: {} }
    const type = req.headers.get("content-type") ?? ""
    if (type.includes("application/x-www-form-urlencoded")) {
      return { ok: true, body: Object.fromEntries(new URLSearchParams(text)) }
    }
    try {
      const parsed: unknown = JSON.parse(text)
      return isObject(parsed) ? { ok: true, body: parsed } : { ok: false }
    } catch {
      return { ok: false }
    }
  }

  const referenceCheck = (reference: unknown): Response | null => {
    if (reference === undefined) return null
    if (typeof reference !== "string" || !REFERENCE.test(reference)) {
      return error(400, "Invalid transaction reference. Only -, ., = and alphanumeric characters allowed.", {
        type: "validation_error",
        code: "invalid_params"
      })
    }
    if (transactions.has(reference)) {
      return error(400, "Duplicate Transaction Reference", {
        meta: { nextStep: "Try and create the Transaction or Charge with a new reference" },
        type: "validation_error",
        code: "duplicate_reference",
        errorCodeMappingNotFound: false
      })
    }
    return null
  }

  const amountCheck = (amount: unknown): Response | null =>
    isPositiveInt(amount)
      ? null
      : error(400, "Invalid Amount Sent", { type: "validation_error", code: "invalid_amount" })

  const enabled = new Set(options.currencies ?? ["NGN"])
  // Without a currency Paystack charges in the business's default one.
  const currencyCheck = (currency: unknown): Response | null =>
    currency === undefined || (typeof currency === "string" && enabled.has(currency))
      ? null
      : error(400, "Currency not supported by merchant", { type: "validation_error", code: "unsupported_currency" })

  const minimumCheck = (amount: number, currency: unknown): Response | null => {
    const code = typeof currency === "string" ? currency : "NGN"
    const minimum = PAYSTACK_TRANSACTION_MINIMUMS[code] ?? 1
    return amount >= minimum
      ? null
      : error(400, "Invalid Amount Sent", { type: "validation_error", code: "invalid_amount" })
  }

  const newTransaction = (fields: {
    reference: string | undefined
    amount: number
    currency: string | undefined
    email: string
    channels: ReadonlyArray<string> | null
    callbackUrl: string | null
    metadata: unknown
    source: FakeTransaction["source"]
  }): FakeTransaction => {
    const tx: FakeTransaction = {
      id: ++nextId,
      reference: fields.reference ?? randomCode(10),
      accessCode: randomCode(15),
      amount: fields.amount,
      currency: fields.currency ?? "NGN",
      email: fields.email,
      channels: fields.channels,
      callbackUrl: fields.callbackUrl,
      metadata: fields.metadata,
      source: fields.source,
      createdAt: new Date().toISOString(),
      // What Paystack's verify says of an initialized transaction nobody has paid yet.
      status: "abandoned",
      gatewayResponse: "The transaction was not completed",
      paidAt: null,
      authorization: null,
      refunded: 0
    }
    customerFor(tx.email)
    transactions.set(tx.reference, tx)
    byAccessCode.set(tx.accessCode, tx)
    return tx
  }

  const isEmail = (v: unknown): v is string => typeof v === "string" && /^[^\s@]+@[^\s@]+$/.test(v)

  // --- routes ---------------------------------------------------------------------------------------------------

  const initialize = (body: Record<string, unknown>): Response => {
    if (!isEmail(body.email)) return error(400, "Invalid Email Address Passed", { type: "validation_error" })
    const amount = intOf(body.amount)
    const bad =
      amountCheck(amount) ??
      currencyCheck(body.currency) ??
      minimumCheck(amount as number, body.currency) ??
      referenceCheck(body.reference)
    if (bad !== null) return bad
    let channels: Array<string> | null = null
    if (body.channels !== undefined) {
      if (!Array.isArray(body.channels) || !body.channels.every((c) => typeof c === "string" && CHANNELS.has(c))) {
        return error(400, "Invalid channels", { type: "validation_error" })
      }
      channels = body.channels as Array<string>
    }
    if (body.metadata !== undefined && !isObject(body.metadata) && typeof body.metadata !== "string") {
      return error(400, "Invalid metadata", { type: "validation_error" })
    }
    const tx = newTransaction({
      reference: body.reference as string | undefined,
      amount: amount as number,
      currency: body.currency as string | undefined,
      email: body.email,
      channels,
      callbackUrl: typeof body.callback_url === "string" ? body.callback_url : null,
      metadata: body.metadata,
      source: "initialize"
    })
    return ok("Authorization URL created", {
      authorization_url: `${baseUrl}/checkout/${tx.accessCode}`,
      access_code: tx.accessCode,
      reference: tx.reference
    })
  }

  const chargeAuthorization = (body: Record<string, unknown>, failure: PaystackFailure | null): Response => {
    if (!isEmail(body.email)) return error(400, "Invalid Email Address Passed", { type: "validation_error" })
    const amount = intOf(body.amount)
    if (typeof body.authorization_code !== "string") {
      return error(400, "Authorization code is required", { type: "validation_error" })
    }
    const bad =
      amountCheck(amount) ??
      currencyCheck(body.currency) ??
      minimumCheck(amount as number, body.currency) ??
      referenceCheck(body.reference)
    if (bad !== null) return bad
    const auth = authorizations.get(body.authorization_code)
    if (auth === undefined || !auth.active || auth.email.toLowerCase() !== body.email.toLowerCase()) {
      return error(
        400,
        "Email does not match Authorization code. Authorization may be inactive or belong to a different email. Please confirm.",
        { type: "validation_error", code: "invalid_params" }
      )
    }
    if (!auth.reusable) return error(400, "Authorization code is not reusable", { type: "validation_error" })

    const tx = newTransaction({
      reference: body.reference as string | undefined,
      amount: amount as number,
      currency: body.currency as string | undefined,
      email: auth.email,
      channels: null,
      callbackUrl: null,
      metadata: body.metadata,
      source: "charge_authorization"
    })
    tx.authorization = auth
    const now = new Date().toISOString()
    if (failure?.kind === "decline") {
      tx.status = "failed"
      tx.gatewayResponse = failure.message ?? "Declined"
    } else if (failure?.kind === "action") {
      tx.status = failure.status ?? "send_otp"
      tx.gatewayResponse = failure.message ?? "Please enter the OTP sent to your phone"
    } else if (failure?.kind === "pending") {
      tx.status = "pending"
      tx.gatewayResponse = "Transaction in progress"
    } else {
      tx.status = "success"
      tx.gatewayResponse = "Approved"
      tx.paidAt = now
    }
    return ok("Charge attempted", transactionPayload(tx))
  }

  const verify = (reference: string): Response => {
    const tx = transactions.get(reference)
    if (tx === undefined) {
      return error(404, "Transaction reference not found", { type: "validation_error", code: "transaction_not_found" })
    }
    return ok("Verification successful", transactionPayload(tx))
  }

  const refund = (body: Record<string, unknown>): Response => {
    const key = body.transaction
    const tx =
      typeof key === "string" || typeof key === "number"
        ? (transactions.get(String(key)) ?? [...transactions.values()].find((t) => String(t.id) === String(key)))
        : undefined
    if (tx === undefined) return error(404, "Transaction not found", { type: "validation_error" })
    if (tx.status !== "success")
      return error(400, "Cannot refund an unsuccessful transaction", { type: "validation_error" })
    const amount = body.amount === undefined ? tx.amount - tx.refunded : intOf(body.amount)
    if (!isPositiveInt(amount) || amount > tx.amount - tx.refunded) {
      return error(400, "Refund amount cannot be more than the unrefunded transaction amount", {
        type: "validation_error"
      })
    }
    tx.refunded += amount
    const now = new Date().toISOString()
    const r: FakeRefund = {
      id: ++nextId,
      refundReference: `${nextId}${randomCode(6)}`,
      transactionReference: tx.reference,
      amount,
      currency: tx.currency
    }
    refunds.push(r)
    return ok("Refund has been queued for processing", {
      transaction: {
        id: tx.id,
        domain: "test",
        reference: tx.reference,
        amount: tx.amount,
        paid_at: tx.paidAt,
        channel: "card",
        currency: tx.currency,
        authorization: { exp_month: null, exp_year: null, account_name: null },
        customer: { international_format_phone: null },
        plan: {},
        subaccount: { currency: null },
        split: {},
        order_id: null,
        paidAt: tx.paidAt,
        pos_transaction_data: null,
        source: null,
        fees_breakdown: null
      },
      integration: 100_001,
      deducted_amount: 0,
      channel: null,
      merchant_note: typeof body.merchant_note === "string" ? body.merchant_note : "",
      customer_note: typeof body.customer_note === "string" ? body.customer_note : "",
      status: "pending",
      refunded_by: "fake@paystack.test",
      expected_at: now,
      currency: tx.currency,
      domain: "test",
      amount,
      fully_deducted: false,
      id: r.id,
      createdAt: now,
      updatedAt: now
    })
  }

  const deactivate = (body: Record<string, unknown>): Response => {
    const code = body.authorization_code
    const auth = typeof code === "string" ? authorizations.get(code) : undefined
    if (auth === undefined) return error(404, "Authorization code not found", { type: "validation_error" })
    auth.active = false
    return ok("Authorization has been deactivated")
  }

  /** The hosted payment page: GET shows it, POST is its Pay button. */
  const hostedPage = async (req: Request, url: URL, accessCode: string): Promise<Response> => {
    const tx = byAccessCode.get(accessCode)
    if (tx === undefined) return new Response("Not found", { status: 404 })
    if (req.method === "GET") {
      return new Response(
        `<!doctype html><title>Paystack (fake)</title><p>Pay ${tx.currency} ${tx.amount / 100} as ${tx.email}</p>` +
          `<form method="post"><button>Pay</button></form>`,
        { headers: { "content-type": "text/html; charset=utf-8" } }
      )
    }
    if (req.method !== "POST") return new Response("Method not allowed", { status: 405 })
    if (url.searchParams.get("outcome") === "decline") decline(tx.reference)
    else {
      const hook = complete(tx.reference)
      if (options.webhookUrl !== undefined) await deliver(hook, options.webhookUrl)
    }
    if (tx.callbackUrl !== null) {
      const target = new URL(tx.callbackUrl)
      target.searchParams.set("trxref", tx.reference)
      target.searchParams.set("reference", tx.reference)
      return Response.redirect(target.toString(), 302)
    }
    return new Response(`<!doctype html><p>Payment ${tx.status}</p>`, { headers: { "content-type": "text/html" } })
  }

  const handle = async (req: Request): Promise<Response> => {
    const url = new URL(req.url)
    const path = url.pathname
    const checkout = /^\/checkout\/([^/]+)$/.exec(path)
    if (checkout !== null) return hostedPage(req, url, checkout[1]!)

    const authHeader = req.headers.get("authorization")
    const bearer = authHeader?.startsWith("Bearer ") ? authHeader.slice("Bearer ".length) : null
    const parsed = req.method === "GET" ? { ok: true as const, body: {} } : await readBody(req)
    requests.push({ method: req.method, path, bearer, body: parsed.ok ? parsed.body : undefined })

    let failure = takeFailure(path)
    if (failure?.kind === "delay") {
      await Bun.sleep(failure.ms)
      failure = null
    }
    if (failure?.kind === "unauthorized") return error(401, "Invalid key")
    if (failure?.kind === "serverError") {
      const status = failure.status ?? 500
      return status === 500
        ? error(500, "An error occurred. Please try again later.")
        : new Response(`<html><body><h1>${status} Bad Gateway</h1></body></html>`, {
            status,
            headers: { "content-type": "text/html" }
          })
    }
    if (failure?.kind === "reject") return error(failure.status ?? 400, failure.message, { type: "api_error" })

    if (authHeader === null) return error(401, "No Authorization header was found")
    if (bearer !== secretKey) return error(401, "Invalid key")
    if (!parsed.ok) return error(400, "Invalid JSON body", { type: "validation_error" })

    const verifyMatch = /^\/transaction\/verify\/([^/]+)$/.exec(path)
    if (req.method === "GET" && verifyMatch !== null) return verify(decodeURIComponent(verifyMatch[1]!))
    if (req.method === "POST") {
      switch (path) {
        case "/transaction/initialize":
          return initialize(parsed.body)
        case "/transaction/charge_authorization":
          return chargeAuthorization(parsed.body, failure)
        case "/refund":
          return refund(parsed.body)
        case "/customer/authorization/deactivate":
          return deactivate(parsed.body)
      }
    }
    return error(404, "The requested resource was not found")
  }

  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: handle })
  const baseUrl = `http://127.0.0.1:${server.port}`

  return {
    baseUrl,
    secretKey,
    account: { provider: "paystack", secretKey, webhookSecret: null, baseUrl },
    transactions,
    authorizations,
    refunds,
    requests,
    failNext: (failure, opts = {}) => {
      const chargeOutcome = failure.kind === "decline" || failure.kind === "action" || failure.kind === "pending"
      failures.push({
        failure,
        path: opts.path ?? (chargeOutcome ? "/transaction/charge_authorization" : undefined),
        left: opts.times ?? 1
      })
    },
    complete,
    decline,
    seedAuthorization: (email, card) => {
      customerFor(email)
      return makeAuthorization(email, card)
    },
    webhookFor,
    refundProcessed,
    dispute,
    resolveDispute,
    webhook: signed,
    sign,
    deliver,
    stop: () => server.stop(true)
  }
}

const safeParse = (text: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
