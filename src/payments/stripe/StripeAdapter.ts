/**
 * Stripe behind the `PaymentAdapter` interface (decisions.md §8), through the official `stripe` package.
 *
 * - One `Stripe` client per (secret, baseUrl), cached inside each adapter instance. `account.baseUrl` (tests: a fake
 *   of Stripe's API) supplies protocol, host and port; any path in it is ignored (the SDK always sends `/v1/…`).
 * - Every object we create carries our metadata plus `reference` (our deterministic reference), and every create
 *   sends an `Idempotency-Key` of `<reference>:<operation>` (`:customer`, `:checkout`, `:charge`,
 *   `:refund:<amount|full>`), so a retried call can never create a second object.
 * - `verify` / `refund` accept our reference, a Checkout Session id (`cs_…`, the `accessCode` that `createCheckout`
 *   returns), a PaymentIntent id (`pi_…`) or (verify only) a SetupIntent id (`seti_…`). Our reference is resolved by
 *   PaymentIntent search on `metadata['reference']` (covers off-session charges and payment-mode checkouts), then, as
 *   search is eventually consistent at Stripe and SetupIntents cannot be searched, by scanning the newest Checkout
 *   Sessions for `client_reference_id` (bounded; see `SESSION_SCAN_PAGES`). Nothing found → `pending`.
 * - A charge refused because the saved PaymentMethod is gone (`resource_missing`, detached) is `MethodGone`.
 * - Events never carry expanded objects: `completeEvent` fetches a method's card details from its `pm_…`, and the
 *   reference of a refund's or dispute's payment from its PaymentIntent's metadata.
 * - Webhooks: signature checked with `stripe.webhooks.signature.verifyHeaderAsync` (what `constructEventAsync` runs,
 *   minus the JSON parse) with `receivedAt = nowMs`, 300 s tolerance in both directions; `parseEvent` is pure.
 * - No error message ever carries the secret key: credentials failures get a fixed message, every other message is
 *   scrubbed of the key and of anything shaped like a Stripe key.
 */
import { Effect } from "effect"
import Stripe from "stripe"
import { parseStripeEvent, routeStripeEvent } from "./events.ts"
import type {
  ChargeRequest,
  ChargeResult,
  CheckoutRequest,
  CheckoutSession,
  MethodDetails,
  PaymentAdapter,
  PaymentMetadata,
  ProviderAccount,
  ProviderEvent,
  SavedMethod
} from "../PaymentProvider.ts"
import { ProviderError } from "../PaymentProvider.ts"

export interface StripeAdapterOptions {
  /** Per-request timeout of the Stripe client, in milliseconds (default 10 000: provider calls end before the request does). */
  readonly timeoutMs?: number
  /** Automatic network retries of the Stripe client (default 0: callers retry with the same idempotency key). */
  readonly maxNetworkRetries?: number
  /** `success_url` / `cancel_url` when a checkout has no `callbackUrl` (default `http://localhost/`). */
  readonly defaultReturnUrl?: string
}

/** Webhook timestamp tolerance, seconds (decisions.md §8). */
export const STRIPE_SIGNATURE_TOLERANCE_SECONDS = 300
/** `verify` by our reference scans at most this many pages of 100 newest Checkout Sessions. */
const SESSION_SCAN_PAGES = 3

type Metadata = Record<string, string>
type VerifyResult = {
  readonly status: "succeeded" | "failed" | "pending" | "not_found"
  readonly method: MethodDetails | null
  readonly amount?: number
  readonly currency?: string
}

// ---------------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------------

const STRIPE_KEY_PATTERN = /\b(?:sk|rk|pk|whsec)_[A-Za-z0-9_*]+/g

const scrub = (message: string, secret: string): string => {
  let out = message
  if (secret.length > 0) out = out.split(secret).join("[redacted]")
  return out.replace(STRIPE_KEY_PATTERN, "[redacted]")
}

const isTimeout = (error: Stripe.errors.StripeError): boolean => {
  const detail = error.detail as { code?: unknown } | undefined
  return (
    (typeof detail === "object" && detail !== null && detail.code === "ETIMEDOUT") || /timeout/i.test(error.message)
  )
}

/** Maps anything the SDK throws to a `ProviderError`; the secret never reaches a message. */
export const toProviderError = (error: unknown, secret: string): ProviderError => {
  const fail = (reason: ProviderError["reason"], message: string) =>
    new ProviderError({ reason, message: scrub(message, secret) })
  if (error instanceof ProviderError) return error
  if (error instanceof Stripe.errors.StripeAuthenticationError) {
    return fail("unauthorized", "Stripe rejected the account's secret key")
  }
  if (error instanceof Stripe.errors.StripePermissionError) {
    return fail("unauthorized", "The Stripe key is not permitted to make this request")
  }
  if (error instanceof Stripe.errors.StripeIdempotencyError) {
    return fail("duplicate", `Stripe idempotency conflict: ${error.message}`)
  }
  if (error instanceof Stripe.errors.StripeConnectionError) {
    return isTimeout(error)
      ? fail("timeout", "Stripe did not answer in time")
      : fail("unavailable", "Could not reach Stripe")
  }
  if (error instanceof Stripe.errors.StripeRateLimitError)
    return fail("unavailable", "Stripe is rate limiting requests")
  if (error instanceof Stripe.errors.StripeAPIError) return fail("unavailable", `Stripe API error: ${error.message}`)
  if (error instanceof Stripe.errors.StripeError) {
    if (error.rawType === "idempotency_error") return fail("duplicate", `Stripe idempotency conflict: ${error.message}`)
    if ((error.statusCode ?? 0) >= 500) return fail("unavailable", `Stripe API error: ${error.message}`)
    return fail("rejected", `Stripe rejected the request: ${error.message}`)
  }
  return fail("unavailable", `Stripe request failed: ${error instanceof Error ? error.message : String(error)}`)
}

// ---------------------------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------------------------

const idOf = (value: string | { readonly id: string } | null | undefined): string | null =>
  value == null ? null : typeof value === "string" ? value : value.id

const withReference = (metadata: PaymentMetadata, reference: string): Metadata => ({ ...metadata, reference })

/** Our reference as a Stripe Search query literal: `metadata['reference']:'…'`. */
export const referenceQuery = (reference: string): string =>
  `metadata['reference']:'${reference.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`

const methodFromPaymentMethod = (
  pm: Stripe.PaymentMethod,
  fallback: { readonly customer: string | null; readonly email: string | null }
): MethodDetails | null => {
  const customer = idOf(pm.customer) ?? fallback.customer
  // Only a method attached to a customer can be charged again off-session.
  if (customer === null) return null
  return {
    token: pm.id,
    providerCustomerId: customer,
    email: pm.billing_details?.email ?? fallback.email,
    type: pm.type,
    brand: pm.card?.brand ?? null,
    last4: pm.card?.last4 ?? null,
    expMonth: pm.card?.exp_month ?? null,
    expYear: pm.card?.exp_year ?? null,
    reusable: true,
    fingerprint: pm.card?.fingerprint ?? null
  }
}

const paymentIntentStatus = (pi: Stripe.PaymentIntent): VerifyResult["status"] => {
  switch (pi.status) {
    case "succeeded":
      return "succeeded"
    case "canceled":
      return "failed"
    case "requires_payment_method":
      return pi.last_payment_error ? "failed" : "pending"
    default:
      return "pending"
  }
}

/** A method known only by its id (from an event): none of what identifies or labels the card. */
const lacksDetails = (m: MethodDetails): boolean => m.fingerprint === null && m.last4 === null && m.brand === null

/**
 * The saved PaymentMethod can never be charged again: Stripe no longer has it (`resource_missing` on
 * `payment_method`), or it was detached from its customer ("… may not be used again").
 */
const methodGone = (error: unknown): error is Stripe.errors.StripeInvalidRequestError =>
  error instanceof Stripe.errors.StripeInvalidRequestError &&
  ((error.code === "resource_missing" && error.param === "payment_method") ||
    /detached from a Customer|may not be used again/i.test(error.message))

const returnUrl = (callbackUrl: string | null, fallback: string): string => callbackUrl ?? fallback

// ---------------------------------------------------------------------------------------------------------------
// Adapter
// ---------------------------------------------------------------------------------------------------------------

export const makeStripeAdapter = (options: StripeAdapterOptions = {}): PaymentAdapter => {
  const timeoutMs = options.timeoutMs ?? 10_000
  const maxNetworkRetries = options.maxNetworkRetries ?? 0
  const defaultReturnUrl = options.defaultReturnUrl ?? "http://localhost/"
  const clients = new Map<string, Stripe>()

  const clientFor = (account: ProviderAccount): Stripe => {
    const key = `${account.secretKey}\u0000${account.baseUrl ?? ""}`
    const cached = clients.get(key)
    if (cached) return cached
    const config: Stripe.StripeConfig = {
      maxNetworkRetries,
      timeout: timeoutMs,
      httpClient: Stripe.createFetchHttpClient(),
      telemetry: false
    }
    if (account.baseUrl) {
      const url = new URL(account.baseUrl)
      const protocol = url.protocol === "http:" ? "http" : "https"
      config.protocol = protocol
      config.host = url.hostname
      config.port = url.port !== "" ? Number(url.port) : protocol === "http" ? 80 : 443
    }
    const client = new Stripe(account.secretKey, config)
    clients.set(key, client)
    return client
  }

  /** One Stripe call: failures become `ProviderError`s; a hard deadline backs up the client's own timeout. */
  const call = <A>(account: ProviderAccount, f: (stripe: Stripe) => Promise<A>): Effect.Effect<A, ProviderError> =>
    Effect.suspend(() => {
      let stripe: Stripe
      try {
        stripe = clientFor(account)
      } catch (error) {
        return Effect.fail(
          new ProviderError({
            reason: "rejected",
            message: scrub(
              `Invalid Stripe account configuration: ${error instanceof Error ? error.message : String(error)}`,
              account.secretKey
            )
          })
        )
      }
      return Effect.tryPromise({ try: () => f(stripe), catch: (error) => toProviderError(error, account.secretKey) })
    }).pipe(
      Effect.timeoutFail({
        duration: timeoutMs * (maxNetworkRetries + 1) + 2_000,
        onTimeout: () => new ProviderError({ reason: "timeout", message: "Stripe did not answer in time" })
      })
    )

  const createCheckout = (
    account: ProviderAccount,
    request: CheckoutRequest
  ): Effect.Effect<CheckoutSession, ProviderError> =>
    Effect.gen(function* () {
      const metadata = withReference(request.metadata, request.reference)
      const currency = request.currency.toLowerCase()
      const url = returnUrl(request.callbackUrl, defaultReturnUrl)
      const common = {
        client_reference_id: request.reference,
        success_url: url,
        cancel_url: url,
        metadata
      }
      let params: Stripe.Checkout.SessionCreateParams
      if (request.mode === "payment") {
        params = {
          ...common,
          mode: "payment",
          line_items: [
            {
              quantity: 1,
              price_data: { currency, unit_amount: request.amount, product_data: { name: request.description } }
            }
          ],
          payment_intent_data: { setup_future_usage: "off_session", metadata },
          ...(request.providerCustomerId !== null
            ? { customer: request.providerCustomerId }
            : { customer_creation: "always" as const, customer_email: request.email })
        }
      } else {
        const customer =
          request.providerCustomerId ??
          (yield* call(account, (stripe) =>
            stripe.customers.create(
              { email: request.email, metadata },
              { idempotencyKey: `${request.reference}:customer` }
            )
          )).id
        params = {
          ...common,
          mode: "setup",
          currency,
          customer,
          setup_intent_data: { metadata }
        }
      }
      const session = yield* call(account, (stripe) =>
        stripe.checkout.sessions.create(params, { idempotencyKey: `${request.reference}:checkout` })
      )
      if (!session.url) {
        return yield* Effect.fail(
          new ProviderError({ reason: "rejected", message: "Stripe returned a Checkout Session without a URL" })
        )
      }
      return { checkoutUrl: session.url, reference: request.reference, accessCode: session.id }
    })

  const charge = (account: ProviderAccount, request: ChargeRequest): Effect.Effect<ChargeResult, ProviderError> =>
    call(account, async (stripe): Promise<ChargeResult> => {
      try {
        const pi = await stripe.paymentIntents.create(
          {
            amount: request.amount,
            currency: request.currency.toLowerCase(),
            payment_method: request.method.token,
            ...(request.method.providerCustomerId !== null ? { customer: request.method.providerCustomerId } : {}),
            off_session: true,
            confirm: true,
            metadata: withReference(request.metadata, request.reference)
          },
          { idempotencyKey: `${request.reference}:charge` }
        )
        switch (pi.status) {
          case "succeeded":
            return { _tag: "Succeeded", providerReference: pi.id }
          case "requires_action":
          case "requires_confirmation":
            return { _tag: "ActionRequired", message: "The payment method needs the customer to authenticate" }
          case "requires_payment_method":
          case "canceled":
            return { _tag: "Declined", message: pi.last_payment_error?.message ?? "The payment was declined" }
          default:
            return { _tag: "Pending", providerReference: pi.id }
        }
      } catch (error) {
        if (methodGone(error)) {
          return {
            _tag: "MethodGone",
            message: scrub(error.message || "The payment method is gone", account.secretKey)
          }
        }
        if (error instanceof Stripe.errors.StripeCardError) {
          const message = scrub(error.message || "The card was declined", account.secretKey)
          return error.code === "authentication_required"
            ? { _tag: "ActionRequired", message }
            : { _tag: "Declined", message }
        }
        throw error
      }
    })

  const verifySession = (account: ProviderAccount, sessionId: string): Effect.Effect<VerifyResult, ProviderError> =>
    Effect.gen(function* () {
      const session = yield* call(account, (stripe) =>
        stripe.checkout.sessions.retrieve(sessionId, {
          expand: ["payment_intent.payment_method", "setup_intent.payment_method"]
        })
      )
      const customer = idOf(session.customer)
      const email = session.customer_details?.email ?? session.customer_email ?? null
      if (session.mode === "setup") {
        const si = session.setup_intent
        if (si === null || typeof si === "string") {
          return { status: session.status === "expired" ? "failed" : "pending", method: null } as const
        }
        const status: VerifyResult["status"] =
          si.status === "succeeded"
            ? "succeeded"
            : si.status === "canceled" || session.status === "expired"
              ? "failed"
              : "pending"
        const pm = si.payment_method
        const method =
          status === "succeeded" && pm !== null && typeof pm !== "string"
            ? methodFromPaymentMethod(pm, { customer: idOf(si.customer) ?? customer, email })
            : null
        return { status, method }
      }
      const pi = session.payment_intent
      if (pi !== null && typeof pi !== "string") {
        const result = paymentIntentResult(pi, { customer, email })
        if (result.status === "pending" && session.status === "expired") return { status: "failed", method: null }
        return result
      }
      const status: VerifyResult["status"] =
        session.status === "complete" && session.payment_status === "paid"
          ? "succeeded"
          : session.status === "expired"
            ? "failed"
            : "pending"
      return { status, method: null }
    })

  const paymentIntentResult = (
    pi: Stripe.PaymentIntent,
    fallback: { readonly customer: string | null; readonly email: string | null }
  ): VerifyResult => {
    const status = paymentIntentStatus(pi)
    const pm = pi.payment_method
    const method =
      status === "succeeded" && pm !== null && typeof pm !== "string"
        ? methodFromPaymentMethod(pm, {
            customer: idOf(pi.customer) ?? fallback.customer,
            email: pi.receipt_email ?? fallback.email
          })
        : null
    return { status, method, amount: pi.amount_received || pi.amount, currency: pi.currency.toUpperCase() }
  }

  const verifyPaymentIntent = (account: ProviderAccount, id: string): Effect.Effect<VerifyResult, ProviderError> =>
    call(account, (stripe) => stripe.paymentIntents.retrieve(id, { expand: ["payment_method"] })).pipe(
      Effect.map((pi) => paymentIntentResult(pi, { customer: null, email: null }))
    )

  const verifySetupIntent = (account: ProviderAccount, id: string): Effect.Effect<VerifyResult, ProviderError> =>
    call(account, (stripe) => stripe.setupIntents.retrieve(id, { expand: ["payment_method"] })).pipe(
      Effect.map((si): VerifyResult => {
        const pm = si.payment_method
        const status = si.status === "succeeded" ? "succeeded" : si.status === "canceled" ? "failed" : "pending"
        return {
          status,
          method:
            status === "succeeded" && pm !== null && typeof pm !== "string"
              ? methodFromPaymentMethod(pm, { customer: idOf(si.customer), email: null })
              : null
        }
      })
    )

  /** The PaymentIntents carrying our reference, the most conclusive first (succeeded, then in flight, then failed). */
  const searchPaymentIntents = (account: ProviderAccount, reference: string) =>
    call(account, (stripe) =>
      stripe.paymentIntents.search({ query: referenceQuery(reference), limit: 20, expand: ["data.payment_method"] })
    ).pipe(
      Effect.map((result) => {
        const rank = (pi: Stripe.PaymentIntent) => {
          const s = paymentIntentStatus(pi)
          return s === "succeeded" ? 0 : s === "pending" ? 1 : 2
        }
        return result.data
          .filter((pi) => pi.metadata?.["reference"] === reference)
          .sort((a, b) => rank(a) - rank(b) || b.created - a.created)
      })
    )

  /** The newest Checkout Session whose `client_reference_id` is our reference, among the newest few hundred. */
  const findSession = (account: ProviderAccount, reference: string) =>
    call(account, async (stripe) => {
      let startingAfter: string | undefined
      for (let page = 0; page < SESSION_SCAN_PAGES; page++) {
        const list = await stripe.checkout.sessions.list({
          limit: 100,
          ...(startingAfter !== undefined ? { starting_after: startingAfter } : {})
        })
        const found = list.data.find((s) => s.client_reference_id === reference)
        if (found) return found.id
        const last = list.data[list.data.length - 1]
        if (!list.has_more || last === undefined) return null
        startingAfter = last.id
      }
      return null
    })

  const verify = (account: ProviderAccount, reference: string): Effect.Effect<VerifyResult, ProviderError> => {
    if (reference.startsWith("cs_")) return verifySession(account, reference)
    if (reference.startsWith("pi_")) return verifyPaymentIntent(account, reference)
    if (reference.startsWith("seti_")) return verifySetupIntent(account, reference)
    return Effect.gen(function* () {
      const intents = yield* searchPaymentIntents(account, reference)
      const best = intents[0]
      if (best !== undefined) {
        // Search results do not carry the session's customer email; the PaymentMethod's billing email is used.
        return paymentIntentResult(best, { customer: null, email: null })
      }
      const sessionId = yield* findSession(account, reference)
      if (sessionId !== null) return yield* verifySession(account, sessionId)
      // Nothing under our reference (search lags about a minute behind writes: the caller waits before it
      // believes this).
      return { status: "not_found", method: null } as const
    })
  }

  /** The PaymentIntent to refund: given directly, through a Checkout Session, or by our reference. */
  const resolvePaymentIntent = (account: ProviderAccount, reference: string): Effect.Effect<string, ProviderError> => {
    const notFound = new ProviderError({ reason: "rejected", message: `No Stripe payment found for ${reference}` })
    if (reference.startsWith("pi_")) return Effect.succeed(reference)
    if (reference.startsWith("cs_")) {
      return call(account, (stripe) => stripe.checkout.sessions.retrieve(reference)).pipe(
        Effect.flatMap((s) => {
          const id = idOf(s.payment_intent)
          return id === null ? Effect.fail(notFound) : Effect.succeed(id)
        })
      )
    }
    return Effect.gen(function* () {
      const succeeded = (yield* searchPaymentIntents(account, reference)).find((pi) => pi.status === "succeeded")
      if (succeeded) return succeeded.id
      const sessionId = yield* findSession(account, reference)
      if (sessionId === null) return yield* Effect.fail(notFound)
      return yield* resolvePaymentIntent(account, sessionId)
    })
  }

  const refund = (
    account: ProviderAccount,
    reference: string,
    amount: number | null
  ): Effect.Effect<void, ProviderError> =>
    Effect.gen(function* () {
      const paymentIntent = yield* resolvePaymentIntent(account, reference)
      yield* call(account, (stripe) =>
        stripe.refunds.create(
          { payment_intent: paymentIntent, ...(amount !== null ? { amount } : {}) },
          { idempotencyKey: `${reference}:refund:${amount ?? "full"}` }
        )
      )
    })

  const removeMethod = (account: ProviderAccount, method: SavedMethod): Effect.Effect<void, ProviderError> =>
    call(account, (stripe) => stripe.paymentMethods.detach(method.token)).pipe(Effect.asVoid)

  /**
   * Stripe sends objects unexpanded: `setup_intent.succeeded` names its PaymentMethod by a bare `pm_…`. Without the
   * card's brand, last4, expiry and fingerprint a saved method is unlabelled and never recognised as a card saved
   * before, so they are fetched here.
   */
  const completeEvent = (account: ProviderAccount, event: ProviderEvent): Effect.Effect<ProviderEvent, ProviderError> =>
    Effect.gen(function* () {
      if (
        (event._tag === "SetupSucceeded" || event._tag === "PaymentSucceeded") &&
        event.method !== null &&
        lacksDetails(event.method)
      ) {
        const given = event.method
        const pm = yield* call(account, (stripe) => stripe.paymentMethods.retrieve(given.token))
        const method = methodFromPaymentMethod(pm, { customer: given.providerCustomerId, email: given.email })
        return method === null ? event : { ...event, method }
      }
      if (
        (event._tag === "Refunded" || event._tag === "Disputed") &&
        event.reference === null &&
        event.providerPaymentId !== null
      ) {
        const found = yield* referenceOfPayment(account, event.providerPaymentId)
        return found === null
          ? event
          : { ...event, reference: found.reference, metadata: { ...found.metadata, ...event.metadata } }
      }
      return event
    })

  /** Our reference of a payment Stripe names by its PaymentIntent (or Charge) id: the metadata we put on it. */
  const referenceOfPayment = (account: ProviderAccount, id: string) =>
    Effect.gen(function* () {
      let paymentIntent: string | null = id.startsWith("pi_") ? id : null
      if (id.startsWith("ch_")) {
        const charge = yield* call(account, (stripe) => stripe.charges.retrieve(id))
        const reference = charge.metadata?.["reference"]
        if (reference !== undefined && reference !== "") return { reference, metadata: charge.metadata }
        paymentIntent = idOf(charge.payment_intent)
      }
      if (paymentIntent === null) return null
      const pi = yield* call(account, (stripe) => stripe.paymentIntents.retrieve(paymentIntent))
      const reference = pi.metadata?.["reference"]
      return reference === undefined || reference === "" ? null : { reference, metadata: pi.metadata }
    })

  const verifySignature = (
    account: ProviderAccount,
    rawBody: Uint8Array,
    headers: Readonly<Record<string, string | undefined>>,
    nowMs: number
  ): Effect.Effect<boolean> =>
    Effect.promise(async () => {
      const secret = account.webhookSecret
      if (!secret) return false
      const header = Object.entries(headers).find(([name]) => name.toLowerCase() === "stripe-signature")?.[1]
      if (!header) return false
      const signature = Stripe.webhooks.signature
      if (!signature) return false
      try {
        // Stripe's own check only rejects old timestamps; one from far in the future is refused here too.
        const t = /(?:^|,)\s*t=(\d+)(?:,|$)/.exec(header)?.[1]
        if (t === undefined || Number(t) - Math.floor(nowMs / 1000) > STRIPE_SIGNATURE_TOLERANCE_SECONDS) return false
        return await signature.verifyHeaderAsync(
          rawBody,
          header,
          secret,
          STRIPE_SIGNATURE_TOLERANCE_SECONDS,
          undefined,
          nowMs
        )
      } catch {
        return false
      }
    })

  return {
    name: "stripe",
    createCheckout,
    charge,
    verify,
    refund,
    removeMethod,
    verifySignature,
    routeEvent: routeStripeEvent,
    parseEvent: parseStripeEvent,
    completeEvent
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Webhook events (pure: no network, no account)
// ---------------------------------------------------------------------------------------------------------------

export { parseStripeEvent } from "./events.ts"
