/**
 * Stripe webhook events reduced to our `ProviderEvent`s: pure parsing of the verified raw body.
 */
import { Effect } from "effect"
import { createHash } from "node:crypto"
import type { EventRoute, MethodDetails, ProviderEvent } from "../PaymentProvider.ts"
import { ProviderError } from "../PaymentProvider.ts"

type Metadata = Record<string, string>

type Json = Record<string, unknown>

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const str = (value: unknown): string | null => (typeof value === "string" && value.length > 0 ? value : null)
const num = (value: unknown): number | null => (typeof value === "number" && Number.isFinite(value) ? value : null)

class Malformed extends Error {}

const metadataOf = (value: unknown): Metadata => {
  if (value == null) return {}
  if (!isObject(value)) throw new Malformed("metadata is not an object")
  const out: Metadata = {}
  for (const [k, v] of Object.entries(value)) if (typeof v === "string") out[k] = v
  return out
}

const requireNumber = (value: unknown, field: string): number => {
  const n = num(value)
  if (n === null) throw new Malformed(`${field} is missing`)
  return n
}

const requireString = (value: unknown, field: string): string => {
  const s = str(value)
  if (s === null) throw new Malformed(`${field} is missing`)
  return s
}

/** A MethodDetails from an event's (expanded) PaymentMethod object, or from a bare `pm_…` id and a customer. */
const methodFromEvent = (pm: unknown, customer: string | null, email: string | null): MethodDetails | null => {
  if (typeof pm === "string") {
    if (customer === null) return null
    return {
      token: pm,
      providerCustomerId: customer,
      email,
      type: "card",
      brand: null,
      last4: null,
      expMonth: null,
      expYear: null,
      reusable: true,
      fingerprint: null
    }
  }
  if (!isObject(pm)) return null
  const id = str(pm["id"])
  const owner = (isObject(pm["customer"]) ? str(pm["customer"]["id"]) : str(pm["customer"])) ?? customer
  if (id === null || owner === null) return null
  const card = isObject(pm["card"]) ? pm["card"] : {}
  const billing = isObject(pm["billing_details"]) ? pm["billing_details"] : {}
  return {
    token: id,
    providerCustomerId: owner,
    email: str(billing["email"]) ?? email,
    type: str(pm["type"]) ?? "card",
    brand: str(card["brand"]),
    last4: str(card["last4"]),
    expMonth: num(card["exp_month"]),
    expYear: num(card["exp_year"]),
    reusable: true,
    fingerprint: str(card["fingerprint"])
  }
}

/** An id, whether Stripe sent the bare id (as events do) or the object. */
const idOf = (value: unknown): string | null => (isObject(value) ? str(value["id"]) : str(value))
const customerId = idOf

const fromCheckoutSession = (eventKey: string, type: string, session: Json): ProviderEvent => {
  const metadata = metadataOf(session["metadata"])
  const reference = str(session["client_reference_id"]) ?? str(metadata["reference"])
  if (reference === null) return { _tag: "Ignored", eventKey, type }
  const customer = customerId(session["customer"])
  const details = isObject(session["customer_details"]) ? session["customer_details"] : {}
  const email = str(details["email"]) ?? str(session["customer_email"])
  const mode = requireString(session["mode"], "data.object.mode")
  if (type === "checkout.session.async_payment_failed") {
    return { _tag: "PaymentFailed", eventKey, reference, message: "The payment failed", metadata }
  }
  if (mode === "setup") {
    // Stripe sends `setup_intent` as an id: the method then comes with `setup_intent.succeeded`, which we handle.
    const si = session["setup_intent"]
    if (!isObject(si) || str(si["status"]) !== "succeeded") return { _tag: "Ignored", eventKey, type }
    const method = methodFromEvent(si["payment_method"], customerId(si["customer"]) ?? customer, email)
    if (method === null) return { _tag: "Ignored", eventKey, type }
    return { _tag: "SetupSucceeded", eventKey, reference, metadata, method }
  }
  if (mode !== "payment") return { _tag: "Ignored", eventKey, type }
  // `unpaid` on completion: an asynchronous method, settled later by `checkout.session.async_payment_*`.
  if (str(session["payment_status"]) !== "paid") return { _tag: "Ignored", eventKey, type }
  const pi = session["payment_intent"]
  const method = isObject(pi)
    ? methodFromEvent(pi["payment_method"], customerId(pi["customer"]) ?? customer, email)
    : null
  return {
    _tag: "PaymentSucceeded",
    eventKey,
    reference,
    amount: requireNumber(session["amount_total"], "data.object.amount_total"),
    currency: requireString(session["currency"], "data.object.currency").toUpperCase(),
    metadata,
    method
  }
}

const fromPaymentIntent = (eventKey: string, type: string, pi: Json): ProviderEvent => {
  const metadata = metadataOf(pi["metadata"])
  const reference = str(metadata["reference"])
  if (reference === null) return { _tag: "Ignored", eventKey, type }
  if (type === "payment_intent.payment_failed") {
    const error = isObject(pi["last_payment_error"]) ? pi["last_payment_error"] : {}
    return {
      _tag: "PaymentFailed",
      eventKey,
      reference,
      message: str(error["message"]) ?? "The payment failed",
      metadata
    }
  }
  const pm = pi["payment_method"]
  return {
    _tag: "PaymentSucceeded",
    eventKey,
    reference,
    amount: num(pi["amount_received"]) ?? requireNumber(pi["amount"], "data.object.amount"),
    currency: requireString(pi["currency"], "data.object.currency").toUpperCase(),
    metadata,
    // A bare `pm_…` id in an event is not enough to call the method saved: only an expanded one is reported.
    method: isObject(pm) ? methodFromEvent(pm, customerId(pi["customer"]), str(pi["receipt_email"])) : null
  }
}

const fromSetupIntent = (eventKey: string, type: string, si: Json): ProviderEvent => {
  const metadata = metadataOf(si["metadata"])
  const reference = str(metadata["reference"])
  if (reference === null) return { _tag: "Ignored", eventKey, type }
  const method = methodFromEvent(si["payment_method"], customerId(si["customer"]), null)
  if (method === null) throw new Malformed("data.object.payment_method or customer is missing")
  return { _tag: "SetupSucceeded", eventKey, reference, metadata, method }
}

/**
 * `charge.refunded`: the Charge, with `amount_refunded` the running total of its refunds (one reversal per charge,
 * cumulative). Its metadata is the PaymentIntent's as it was when the charge was made; without our reference there,
 * the event names the payment by `payment_intent` and `completeEvent` asks.
 */
const fromCharge = (eventKey: string, charge: Json): ProviderEvent => {
  const metadata = metadataOf(charge["metadata"])
  const chargeId = requireString(charge["id"], "data.object.id")
  const providerPaymentId = idOf(charge["payment_intent"]) ?? chargeId
  return {
    _tag: "Refunded",
    eventKey,
    reference: str(metadata["reference"]),
    providerPaymentId,
    cause: "refund",
    reversalKey: `charge:${chargeId}`,
    amount: requireNumber(charge["amount_refunded"], "data.object.amount_refunded"),
    cumulative: true,
    currency: requireString(charge["currency"], "data.object.currency").toUpperCase(),
    metadata
  }
}

/**
 * `charge.dispute.created` and `charge.dispute.closed` (only `lost` moves money back). A Dispute's metadata is its
 * own: the payment is named by `payment_intent` (or `charge`), resolved to our reference by `completeEvent`.
 */
const fromDispute = (eventKey: string, type: string, dispute: Json): ProviderEvent => {
  const disputeId = requireString(dispute["id"], "data.object.id")
  const providerPaymentId = idOf(dispute["payment_intent"]) ?? idOf(dispute["charge"])
  if (providerPaymentId === null) throw new Malformed("data.object.charge is missing")
  const metadata = metadataOf(dispute["metadata"])
  const reference = str(metadata["reference"])
  if (type === "charge.dispute.created") return { _tag: "Disputed", eventKey, reference, providerPaymentId, metadata }
  if (str(dispute["status"]) !== "lost") return { _tag: "Ignored", eventKey, type }
  return {
    _tag: "Refunded",
    eventKey,
    reference,
    providerPaymentId,
    cause: "dispute",
    reversalKey: `dispute:${disputeId}`,
    amount: requireNumber(dispute["amount"], "data.object.amount"),
    cumulative: false,
    currency: requireString(dispute["currency"], "data.object.currency").toUpperCase(),
    metadata
  }
}

/** The event types we act on; every other one is acknowledged and skipped. */
const HANDLED: ReadonlySet<string> = new Set([
  "checkout.session.completed",
  "checkout.session.async_payment_succeeded",
  "checkout.session.async_payment_failed",
  "payment_intent.succeeded",
  "payment_intent.payment_failed",
  "setup_intent.succeeded",
  "charge.refunded",
  "charge.dispute.created",
  "charge.dispute.closed"
])

/** An event as far as every event goes: a JSON object naming its type. */
const readEvent = (rawBody: Uint8Array): { readonly event: Json; readonly type: string } => {
  const event: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(rawBody))
  if (!isObject(event)) throw new Malformed("the event is not an object")
  return { event, type: requireString(event["type"], "type") }
}

const rejected = (error: unknown) =>
  new ProviderError({
    reason: "rejected",
    message: `Malformed Stripe event: ${error instanceof Malformed ? error.message : "not valid JSON"}`
  })

/** Type and `data.object.metadata.organization_id`, without validating the rest (decisions.md §8). */
export const routeStripeEvent = (rawBody: Uint8Array): Effect.Effect<EventRoute, ProviderError> =>
  Effect.try({
    try: (): EventRoute => {
      const { event, type } = readEvent(rawBody)
      const data = isObject(event["data"]) ? event["data"] : {}
      const object = isObject(data["object"]) ? data["object"] : {}
      const metadata = isObject(object["metadata"]) ? object["metadata"] : {}
      return { type, handled: HANDLED.has(type), organizationId: str(metadata["organization_id"]) }
    },
    catch: rejected
  })

/**
 * `checkout.session.completed` (paid payment mode → PaymentSucceeded; setup mode → SetupSucceeded when the event
 * carries an expanded, succeeded SetupIntent, else Ignored), `checkout.session.async_payment_succeeded|failed`,
 * `payment_intent.succeeded` → PaymentSucceeded, `payment_intent.payment_failed` → PaymentFailed,
 * `setup_intent.succeeded` → SetupSucceeded, `charge.refunded` → Refunded (a running total per charge),
 * `charge.dispute.created` → Disputed, `charge.dispute.closed` lost → Refunded (the disputed amount; won → Ignored);
 * objects without our reference → Ignored (refunds and disputes may name the payment by id instead); other types → Ignored
 * whatever the rest of the body (keyed by the event's id, or the body's hash without one).
 * Note: a paid checkout yields both `checkout.session.completed` and `payment_intent.succeeded` for one reference.
 */
export const parseStripeEvent = (rawBody: Uint8Array): Effect.Effect<ProviderEvent, ProviderError> =>
  Effect.try({
    try: (): ProviderEvent => {
      const { event, type } = readEvent(rawBody)
      if (!HANDLED.has(type)) {
        return {
          _tag: "Ignored",
          eventKey: str(event["id"]) ?? createHash("sha256").update(rawBody).digest("hex"),
          type
        }
      }
      const eventKey = requireString(event["id"], "id")
      const data = event["data"]
      if (!isObject(data) || !isObject(data["object"])) throw new Malformed("data.object is missing")
      const object = data["object"]
      switch (type) {
        case "checkout.session.completed":
        case "checkout.session.async_payment_succeeded":
        case "checkout.session.async_payment_failed":
          return fromCheckoutSession(eventKey, type, object)
        case "payment_intent.succeeded":
        case "payment_intent.payment_failed":
          return fromPaymentIntent(eventKey, type, object)
        case "charge.refunded":
          return fromCharge(eventKey, object)
        case "charge.dispute.created":
        case "charge.dispute.closed":
          return fromDispute(eventKey, type, object)
        default:
          return fromSetupIntent(eventKey, type, object)
      }
    },
    catch: rejected
  })
