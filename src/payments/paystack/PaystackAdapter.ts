/**
 * Paystack behind the `PaymentAdapter` interface (decisions.md §8): a thin layer over Effect's `HttpClient`
 * (the official SDK is not used). Only the fields our flows need are decoded, leniently.
 *
 * - Amounts go to Paystack as they are: integer minor units (kobo, pesewas, cents), which is what it expects.
 * - Paystack has no "setup" mode. A `setup` checkout is a real, small charge of `request.amount`, restricted to
 *   cards so that the authorization is reusable; THE CALLER MUST REFUND IT once the method is saved
 *   (`refund(account, reference, null)`).
 * - Webhooks carry no event id: the dedupe key is the event type plus `data.id` (falling back to
 *   `data.reference`). `data.metadata` may be an object, a JSON string, `0`, `""` or `null`; it is normalised to
 *   an object of strings.
 * - Events handled: `charge.success`, `refund.processed`, `charge.dispute.create`, `charge.dispute.resolve` (Paystack
 *   has no `charge.failed`). A charge refused because the authorization is gone is `MethodGone`.
 * - The secret key is only ever put in the `Authorization` header; every error message is scrubbed of it.
 */
import { HttpClient, HttpClientRequest } from "@effect/platform"
import { Duration, Effect, Either, Schema } from "effect"
import { createHash, createHmac, timingSafeEqual } from "node:crypto"
import {
  type ChargeResult,
  type MethodDetails,
  type PaymentAdapter,
  type PaymentMetadata,
  type ProviderAccount,
  ProviderError,
  type ProviderEvent
} from "../PaymentProvider.ts"

export const PAYSTACK_BASE_URL = "https://api.paystack.co"
export const PAYSTACK_DEFAULT_TIMEOUT_MS = 10_000
export const PAYSTACK_SIGNATURE_HEADER = "x-paystack-signature"

export interface PaystackAdapterOptions {
  /** Per request, from sending it to reading the whole body; 15 s by default. */
  readonly timeoutMs?: number | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// Lenient wire schemas: only what we read; anything may be missing or null; ids and card fields may be numbers
// or strings depending on the endpoint.

const LooseString = Schema.transform(Schema.Union(Schema.String, Schema.Number, Schema.Boolean), Schema.String, {
  strict: true,
  decode: (v) => String(v),
  encode: (s) => s
})
const LooseInt = Schema.Union(Schema.Int, Schema.NumberFromString.pipe(Schema.int()))
const opt = <A, I>(schema: Schema.Schema<A, I>) => Schema.optional(Schema.NullishOr(schema))

const Envelope = Schema.Struct({
  status: opt(Schema.Boolean),
  message: opt(LooseString),
  code: opt(LooseString),
  data: opt(Schema.Unknown)
})

const Authorization = Schema.Struct({
  authorization_code: opt(LooseString),
  channel: opt(LooseString),
  card_type: opt(LooseString),
  brand: opt(LooseString),
  last4: opt(LooseString),
  exp_month: opt(LooseString),
  exp_year: opt(LooseString),
  reusable: opt(Schema.Boolean),
  signature: opt(LooseString)
})
type Authorization = typeof Authorization.Type

const Customer = Schema.Struct({
  email: opt(LooseString),
  customer_code: opt(LooseString)
})
type Customer = typeof Customer.Type

/** A transaction as initialize / charge_authorization / verify / webhooks describe it. */
const Transaction = Schema.Struct({
  id: opt(LooseString),
  status: opt(LooseString),
  reference: opt(LooseString),
  amount: opt(LooseInt),
  currency: opt(LooseString),
  channel: opt(LooseString),
  gateway_response: opt(LooseString),
  message: opt(LooseString),
  display_text: opt(LooseString),
  metadata: opt(Schema.Unknown),
  // An unpaid transaction's authorization is `{}`; some payloads send an empty array or string instead.
  authorization: opt(Schema.Union(Authorization, Schema.Unknown)),
  customer: opt(Schema.Union(Customer, Schema.Unknown))
})
type Transaction = typeof Transaction.Type

/** `refund.*` events: the refund, naming its transaction by `transaction_reference` (amounts may be strings). */
const Refund = Schema.Struct({
  id: opt(LooseString),
  status: opt(LooseString),
  transaction_reference: opt(LooseString),
  refund_reference: opt(LooseString),
  amount: opt(LooseInt),
  currency: opt(LooseString),
  transaction: opt(Schema.Unknown)
})

/** `charge.dispute.*` events: the dispute with its whole transaction (and our metadata on it). */
const Dispute = Schema.Struct({
  id: opt(LooseString),
  refund_amount: opt(LooseInt),
  currency: opt(LooseString),
  status: opt(LooseString),
  resolution: opt(LooseString),
  transaction_reference: opt(LooseString),
  transaction: opt(Schema.Unknown)
})

const Initialized = Schema.Struct({
  authorization_url: LooseString,
  access_code: opt(LooseString),
  reference: opt(LooseString)
})

const WebhookEvent = Schema.Struct({
  event: Schema.String,
  data: opt(Schema.Unknown)
})

/**
 * The event types we act on; every other one is acknowledged and skipped. Paystack documents no `charge.failed`: a
 * declined hosted payment is learned by verifying the transaction (the reconciler verifies open checkouts).
 * `charge.dispute.resolve` moves money back when the dispute was accepted (by the merchant, or for want of an answer).
 */
const HANDLED_EVENTS: ReadonlySet<string> = new Set([
  "charge.success",
  "refund.processed",
  "charge.dispute.create",
  "charge.dispute.resolve"
])
const LOST_DISPUTE = new Set(["merchant-accepted", "auto-accepted"])

/** A webhook body as far as every event goes: JSON naming its `event`. */
const readWebhookEvent = (rawBody: Uint8Array): Effect.Effect<typeof WebhookEvent.Type, ProviderError> => {
  let json: unknown
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(rawBody))
  } catch {
    return Effect.fail(new ProviderError({ reason: "rejected", message: "Paystack webhook: body is not JSON" }))
  }
  return Either.match(Schema.decodeUnknownEither(WebhookEvent)(json), {
    onLeft: () => Effect.fail(new ProviderError({ reason: "rejected", message: "Paystack webhook: no event type" })),
    onRight: Effect.succeed
  })
}

const decodeEnvelope = Schema.decodeUnknownEither(Envelope)
const decodeTransaction = Schema.decodeUnknownEither(Transaction)
const decodeRefund = Schema.decodeUnknownEither(Refund)
const decodeDispute = Schema.decodeUnknownEither(Dispute)
const decodeAuthorization = Schema.decodeUnknownEither(Authorization)
const decodeCustomer = Schema.decodeUnknownEither(Customer)

// ---------------------------------------------------------------------------------------------------------------
// Pure helpers

/** `data.metadata` as Paystack may send it (object, JSON string, `0`, `""`, `null`) → an object of strings. */
export const normalizePaystackMetadata = (raw: unknown): Partial<PaymentMetadata> => {
  let value = raw
  if (typeof value === "string") {
    const text = value.trim()
    if (text === "") return {}
    try {
      value = JSON.parse(text)
    } catch {
      return {}
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return {}
  const out: Record<string, string> = {}
  for (const [key, v] of Object.entries(value)) {
    if (typeof v === "string") out[key] = v
    else if (typeof v === "number" || typeof v === "boolean") out[key] = String(v)
    // Nested values (Paystack's own `custom_fields`, `referrer` objects…) are not ours: dropped.
  }
  return out
}

const toInt = (s: string | null | undefined): number | null => {
  if (s === null || s === undefined) return null
  const n = Number.parseInt(s.trim(), 10)
  return Number.isFinite(n) ? n : null
}

const nonEmpty = (s: string | null | undefined): string | null =>
  s === null || s === undefined || s.trim() === "" ? null : s

const asAuthorization = (raw: unknown): Authorization | null => {
  const r = decodeAuthorization(raw)
  return Either.isRight(r) ? r.right : null
}
const asCustomer = (raw: unknown): Customer | null => {
  const r = decodeCustomer(raw)
  return Either.isRight(r) ? r.right : null
}

/** The saved method a transaction's authorization describes, when Paystack says it can be charged again. */
const methodOf = (tx: Transaction): MethodDetails | null => {
  const auth = asAuthorization(tx.authorization)
  const token = nonEmpty(auth?.authorization_code)
  if (auth === null || token === null || auth.reusable !== true) return null
  const customer = asCustomer(tx.customer)
  const expYear = toInt(auth.exp_year)
  return {
    token,
    providerCustomerId: nonEmpty(customer?.customer_code),
    email: nonEmpty(customer?.email),
    type: nonEmpty(auth.channel) ?? nonEmpty(tx.channel) ?? "card",
    brand: nonEmpty(auth.brand) ?? nonEmpty(auth.card_type),
    last4: nonEmpty(auth.last4),
    expMonth: toInt(auth.exp_month),
    expYear: expYear !== null && expYear < 100 ? 2000 + expYear : expYear,
    reusable: true,
    fingerprint: nonEmpty(auth.signature)
  }
}

const ACTION_STATUSES = new Set([
  "send_otp",
  "send_pin",
  "send_phone",
  "send_birthday",
  "send_address",
  "open_url",
  "pay_offline"
])
const DECLINED_STATUSES = new Set(["failed", "abandoned", "reversed"])

/**
 * How Paystack refuses an authorization that can no longer be charged: deactivated (by us, the customer or the bank),
 * unknown, not reusable, or tied to another email than the one it was saved with. Its messages say "authorization"
 * and one of these words.
 */
const AUTHORIZATION_GONE =
  /authorization[^]*\b(inactive|invalid|deactivated|not found|not reusable|does not match)\b|\b(invalid|inactive)\b[^]*authorization/i

const chargeResultOf = (tx: Transaction, reference: string): ChargeResult => {
  const status = (tx.status ?? "").toLowerCase()
  const providerReference = nonEmpty(tx.reference) ?? reference
  const said = nonEmpty(tx.gateway_response) ?? nonEmpty(tx.display_text) ?? nonEmpty(tx.message)
  if (status === "success") return { _tag: "Succeeded", providerReference }
  if (DECLINED_STATUSES.has(status)) return { _tag: "Declined", message: said ?? "Declined" }
  if (ACTION_STATUSES.has(status)) {
    return { _tag: "ActionRequired", message: said ?? `Customer action required (${status})` }
  }
  // pending, ongoing, processing, queued, or anything new: the webhook will tell.
  return { _tag: "Pending", providerReference }
}

/**
 * How a verified transaction ended. `abandoned` is what Paystack reports for an initialized transaction the
 * customer has not (yet) paid, and the hosted page stays payable, so it is `pending`; `reversed` (refunded or
 * charged back) counts as `failed`.
 */
const verifyStatusOf = (status: string | null | undefined): "succeeded" | "failed" | "pending" => {
  const s = (status ?? "").toLowerCase()
  if (s === "success") return "succeeded"
  if (s === "failed" || s === "reversed") return "failed"
  return "pending"
}

/** Hex HMAC-SHA512 of the raw body keyed with the secret key: Paystack's `x-paystack-signature`. */
const hmacSha512 = (secret: string, body: Uint8Array) => createHmac("sha512", secret).update(body).digest()

const headerValue = (headers: Readonly<Record<string, string | undefined>>, name: string): string | undefined => {
  const direct = headers[name]
  if (direct !== undefined) return direct
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() === name) return value
  }
  return undefined
}

const scrub = (secret: string, text: string) => (secret.length > 0 ? text.split(secret).join("[redacted]") : text)

const checkAmount = (amount: number, what: string): Effect.Effect<void, ProviderError> =>
  Number.isSafeInteger(amount) && amount > 0
    ? Effect.void
    : Effect.fail(
        new ProviderError({ reason: "rejected", message: `${what} must be a positive integer in minor units` })
      )

// ---------------------------------------------------------------------------------------------------------------
// The adapter

export const makePaystackAdapter = (
  client: HttpClient.HttpClient,
  options: PaystackAdapterOptions = {}
): PaymentAdapter => {
  const timeout = Duration.millis(options.timeoutMs ?? PAYSTACK_DEFAULT_TIMEOUT_MS)

  /**
   * One call: the `data` of a successful envelope, or a `ProviderError` by what the caller should do about it.
   * The timeout covers sending and reading the whole response.
   */
  const call = (
    account: ProviderAccount,
    method: "GET" | "POST",
    path: string,
    body?: Record<string, unknown>
  ): Effect.Effect<unknown, ProviderError> => {
    const base = (account.baseUrl ?? PAYSTACK_BASE_URL).replace(/\/+$/, "")
    const label = `Paystack ${method} ${path.split("?")[0]}`
    const fail = (reason: ProviderError["reason"], message: string) =>
      Effect.fail(new ProviderError({ reason, message: scrub(account.secretKey, `${label}: ${message}`) }))

    let request = HttpClientRequest.make(method)(`${base}${path}`).pipe(
      HttpClientRequest.bearerToken(account.secretKey),
      HttpClientRequest.acceptJson
    )
    if (body !== undefined) request = HttpClientRequest.bodyUnsafeJson(request, body)

    return client.execute(request).pipe(
      Effect.flatMap((response) => response.text.pipe(Effect.map((text) => ({ status: response.status, text })))),
      // Transport failures (refused, reset, DNS, unreadable body): nothing of the request is repeated here.
      Effect.catchAll(() => fail("unavailable", "could not reach Paystack")),
      Effect.flatMap(({ status, text }) => {
        let json: unknown = undefined
        try {
          json = text === "" ? undefined : JSON.parse(text)
        } catch {
          json = undefined
        }
        const decoded = decodeEnvelope(json)
        const envelope = Either.isRight(decoded) ? decoded.right : null
        const said = nonEmpty(envelope?.message)
        const detail = said ?? `HTTP ${status}`

        if (status === 401 || status === 403) return fail("unauthorized", `${detail} (HTTP ${status})`)
        if (status === 429 || status >= 500) return fail("unavailable", `${detail} (HTTP ${status})`)
        const isDuplicate = (said !== null && /duplicate/i.test(said)) || envelope?.code === "duplicate_reference"
        if (status >= 400) return fail(isDuplicate ? "duplicate" : "rejected", detail)
        if (status < 200 || status >= 300) return fail("unavailable", `unexpected HTTP ${status}`)
        if (envelope === null) return fail("unavailable", "unreadable response")
        if (envelope.status === false) return fail(isDuplicate ? "duplicate" : "rejected", detail)
        return Effect.succeed(envelope.data)
      }),
      Effect.timeoutFail({
        duration: timeout,
        onTimeout: () =>
          new ProviderError({ reason: "timeout", message: `${label}: no answer within ${Duration.format(timeout)}` })
      })
    )
  }

  const transactionOf = (label: string, data: unknown): Effect.Effect<Transaction, ProviderError> => {
    const r = decodeTransaction(data ?? {})
    return Either.isRight(r)
      ? Effect.succeed(r.right)
      : Effect.fail(new ProviderError({ reason: "unavailable", message: `Paystack ${label}: unexpected response` }))
  }

  return {
    name: "paystack",

    createCheckout: (account, request) =>
      Effect.gen(function* () {
        yield* checkAmount(request.amount, "amount")
        const data = yield* call(account, "POST", "/transaction/initialize", {
          email: request.email,
          amount: request.amount,
          currency: request.currency.toUpperCase(),
          reference: request.reference,
          ...(request.callbackUrl !== null ? { callback_url: request.callbackUrl } : {}),
          metadata: request.metadata,
          // No setup mode at Paystack: a small card charge whose reusable authorization we keep (caller refunds).
          ...(request.mode === "setup" ? { channels: ["card"] } : {})
        })
        const decoded = Schema.decodeUnknownEither(Initialized)(data)
        if (Either.isLeft(decoded)) {
          return yield* new ProviderError({
            reason: "unavailable",
            message: "Paystack initialize: unexpected response"
          })
        }
        return {
          checkoutUrl: decoded.right.authorization_url,
          reference: nonEmpty(decoded.right.reference) ?? request.reference,
          accessCode: nonEmpty(decoded.right.access_code)
        }
      }),

    charge: (account, request) =>
      Effect.gen(function* () {
        yield* checkAmount(request.amount, "amount")
        const answered = yield* call(account, "POST", "/transaction/charge_authorization", {
          authorization_code: request.method.token,
          // Paystack only charges an authorization with the email it was created with.
          email: request.method.email ?? request.email,
          amount: request.amount,
          currency: request.currency.toUpperCase(),
          reference: request.reference,
          // This endpoint documents metadata as "stringified JSON".
          metadata: JSON.stringify(request.metadata)
        }).pipe(Effect.either)
        if (Either.isLeft(answered)) {
          const e = answered.left
          // Nothing was charged: Paystack refused the authorization itself, and will refuse it every time.
          const said = e.message.slice(e.message.indexOf(": ") + 2) // Paystack's words, without our label
          if (e.reason === "rejected" && AUTHORIZATION_GONE.test(said))
            return { _tag: "MethodGone", message: said } as const
          return yield* e
        }
        const tx = yield* transactionOf("charge_authorization", answered.right)
        return chargeResultOf(tx, request.reference)
      }),

    verify: (account, reference) =>
      Effect.gen(function* () {
        const data = yield* call(account, "GET", `/transaction/verify/${encodeURIComponent(reference)}`)
        const tx = yield* transactionOf("verify", data)
        const status = verifyStatusOf(tx.status)
        const amount = typeof tx.amount === "number" && Number.isSafeInteger(tx.amount) ? tx.amount : null
        const currency = nonEmpty(tx.currency)
        return {
          status,
          method: status === "succeeded" ? methodOf(tx) : null,
          ...(amount === null || currency === null ? {} : { amount, currency: currency.toUpperCase() })
        }
      }).pipe(
        // Paystack answers 400 "Transaction reference not found" for a reference it never saw: the request never
        // reached it (decisions.md §7: only then may the attempt be closed as failed).
        Effect.catchIf(
          (e) => e.reason === "rejected" && /not found/i.test(e.message),
          () => Effect.succeed({ status: "not_found" as const, method: null })
        )
      ),

    refund: (account, reference, amount) =>
      Effect.gen(function* () {
        if (amount !== null) yield* checkAmount(amount, "refund amount")
        yield* call(account, "POST", "/refund", {
          transaction: reference,
          ...(amount !== null ? { amount } : {})
        })
      }),

    removeMethod: (account, method) =>
      call(account, "POST", "/customer/authorization/deactivate", { authorization_code: method.token }).pipe(
        Effect.asVoid
      ),

    verifySignature: (account, rawBody, headers, _nowMs) =>
      Effect.sync(() => {
        const given = headerValue(headers, PAYSTACK_SIGNATURE_HEADER)?.trim()
        if (given === undefined || given === "" || account.secretKey === "") return false
        if (!/^[0-9a-fA-F]+$/.test(given)) return false
        const expected = hmacSha512(account.secretKey, rawBody)
        if (given.length !== expected.length * 2) return false
        const actual = Buffer.from(given, "hex")
        return actual.length === expected.length && timingSafeEqual(actual, expected)
      }),

    routeEvent: (rawBody) =>
      Effect.map(readWebhookEvent(rawBody), ({ data, event: type }) => {
        // A dispute carries our metadata on its transaction; a refund carries none (on the sandbox route it cannot
        // be routed).
        const of = (v: unknown) =>
          typeof v === "object" && v !== null ? (v as { metadata?: unknown; transaction?: unknown }) : null
        const metadata = of(data)?.metadata ?? of(of(data)?.transaction)?.metadata ?? null
        return {
          type,
          handled: HANDLED_EVENTS.has(type),
          organizationId: nonEmpty(normalizePaystackMetadata(metadata).organization_id)
        }
      }),
    parseEvent: (rawBody) =>
      Effect.gen(function* () {
        const event = yield* readWebhookEvent(rawBody)
        const type = event.event
        const data = event.data

        if (!HANDLED_EVENTS.has(type)) {
          const ids = decodeTransaction(data ?? {})
          const id = Either.isRight(ids) ? (nonEmpty(ids.right.id) ?? nonEmpty(ids.right.reference)) : null
          const key = id ?? createHash("sha256").update(rawBody).digest("hex")
          return { _tag: "Ignored", eventKey: `${type}:${key}`, type } satisfies ProviderEvent
        }

        const rejected = (message: string) => new ProviderError({ reason: "rejected", message })
        const bodyHash = () => createHash("sha256").update(rawBody).digest("hex")
        if (type === "refund.processed") {
          const decodedRefund = decodeRefund(data)
          if (Either.isLeft(decodedRefund)) return yield* rejected("Paystack webhook: malformed refund.processed data")
          const refund = decodedRefund.right
          const reference =
            nonEmpty(refund.transaction_reference) ??
            Either.getOrNull(decodeTransaction(refund.transaction ?? {}))?.reference ??
            null
          const currency = nonEmpty(refund.currency)
          if (reference === null || refund.amount === null || refund.amount === undefined || currency === null) {
            return yield* rejected("Paystack webhook: refund.processed without a transaction, amount or currency")
          }
          const key = nonEmpty(refund.refund_reference) ?? nonEmpty(refund.id) ?? bodyHash()
          return {
            _tag: "Refunded",
            eventKey: `${type}:${key}`,
            reference,
            providerPaymentId: null,
            cause: "refund",
            reversalKey: `refund:${key}`,
            amount: refund.amount,
            cumulative: false,
            currency: currency.toUpperCase(),
            metadata: {}
          } satisfies ProviderEvent
        }
        if (type === "charge.dispute.create" || type === "charge.dispute.resolve") {
          const decodedDispute = decodeDispute(data)
          if (Either.isLeft(decodedDispute)) return yield* rejected(`Paystack webhook: malformed ${type} data`)
          const dispute = decodedDispute.right
          const tx = Either.getOrNull(decodeTransaction(dispute.transaction ?? {}))
          const reference = nonEmpty(tx?.reference) ?? nonEmpty(dispute.transaction_reference)
          if (reference === null) return yield* rejected(`Paystack webhook: ${type} without a transaction`)
          const id = nonEmpty(dispute.id) ?? bodyHash()
          const metadata = normalizePaystackMetadata(tx?.metadata)
          if (type === "charge.dispute.create") {
            return {
              _tag: "Disputed",
              eventKey: `${type}:${id}`,
              reference,
              providerPaymentId: null,
              metadata
            } satisfies ProviderEvent
          }
          if (!LOST_DISPUTE.has((dispute.resolution ?? "").toLowerCase())) {
            return { _tag: "Ignored", eventKey: `${type}:${id}`, type } satisfies ProviderEvent
          }
          const amount = dispute.refund_amount ?? tx?.amount
          const currency = nonEmpty(dispute.currency) ?? nonEmpty(tx?.currency)
          if (amount === null || amount === undefined || currency === null) {
            return yield* rejected("Paystack webhook: charge.dispute.resolve without an amount or currency")
          }
          return {
            _tag: "Refunded",
            eventKey: `${type}:${id}`,
            reference,
            providerPaymentId: null,
            cause: "dispute",
            reversalKey: `dispute:${id}`,
            amount,
            cumulative: false,
            currency: currency.toUpperCase(),
            metadata
          } satisfies ProviderEvent
        }
        const decoded = decodeTransaction(data)
        if (Either.isLeft(decoded)) return yield* rejected(`Paystack webhook: malformed ${type} data`)
        const tx = decoded.right
        const reference = nonEmpty(tx.reference)
        if (reference === null) return yield* rejected(`Paystack webhook: ${type} without a reference`)
        const eventKey = `${type}:${nonEmpty(tx.id) ?? reference}`
        const metadata = normalizePaystackMetadata(tx.metadata)

        if (tx.amount === null || tx.amount === undefined || nonEmpty(tx.currency) === null) {
          return yield* rejected("Paystack webhook: charge.success without amount or currency")
        }
        return {
          _tag: "PaymentSucceeded",
          eventKey,
          reference,
          amount: tx.amount,
          currency: (tx.currency ?? "").toUpperCase(),
          metadata,
          method: methodOf(tx)
        } satisfies ProviderEvent
      }),
    // A charge.success carries its whole authorization: nothing to fetch.
    completeEvent: (_account, event) => Effect.succeed(event)
  }
}

/** The adapter over the ambient `HttpClient`, with options (tests shorten the timeout). */
export const makePaystackAdapterEffect = (
  options: PaystackAdapterOptions = {}
): Effect.Effect<PaymentAdapter, never, HttpClient.HttpClient> =>
  Effect.map(HttpClient.HttpClient, (client) => makePaystackAdapter(client, options))

export const PaystackAdapter: Effect.Effect<PaymentAdapter, never, HttpClient.HttpClient> = makePaystackAdapterEffect()
