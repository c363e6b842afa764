import { Effect } from "effect"
import { createHash, createHmac } from "node:crypto"
import { safeEqual } from "../../platform/crypto.ts"
import type { EventRoute, MethodDetails, PaymentAdapter, PaymentMetadata, ProviderEvent } from "../PaymentProvider.ts"
import { ProviderError } from "../PaymentProvider.ts"

/**
 * The sandbox's built-in provider: hosted pages served by this service (see Hosted.ts), charges decided by
 * the saved method's kind, and webhooks signed like a real provider's, so every flow can be exercised with no
 * outside account. It never exists on live deployments.
 */
export const SIGNATURE_HEADER = "x-simulated-signature"

export const sign = (secret: string, body: Uint8Array | string) =>
  createHmac("sha256", secret).update(body).digest("hex")

/** Saved simulated methods say how they behave: `sim_pm_ok_…` pays, `sim_pm_declining_…` is declined. */
export const simulatedMethodToken = (behaviour: "ok" | "declining" | "3ds") =>
  `sim_pm_${behaviour}_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`

export interface SimulatedEvent {
  readonly id: string
  readonly type: "payment.succeeded" | "payment.failed" | "setup.succeeded"
  readonly data: {
    readonly reference: string
    readonly amount: number
    readonly currency: string
    readonly metadata: Record<string, string>
    readonly message?: string
    readonly method?: MethodDetails
  }
}

const HANDLED: ReadonlySet<string> = new Set(["payment.succeeded", "payment.failed", "setup.succeeded"])

type Json = Record<string, unknown>
class Malformed extends Error {}

const isObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value)
const str = (value: unknown): string | null => (typeof value === "string" && value !== "" ? value : null)
const int = (value: unknown): number | null => (Number.isSafeInteger(value) ? (value as number) : null)
const required = <A>(value: A | null, field: string): A => {
  if (value === null) throw new Malformed(`${field} is missing or invalid`)
  return value
}

const rejected = (error: unknown) =>
  new ProviderError({
    reason: "rejected",
    message: `Malformed simulated event: ${error instanceof Malformed ? error.message : "not valid JSON"}`
  })

/** A JSON object naming its type: the least any event must be. */
const readEvent = (rawBody: Uint8Array): Json => {
  const event: unknown = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(rawBody))
  if (!isObject(event) || str(event["type"]) === null) throw new Malformed("the event names no type")
  return event
}

const metadataOf = (value: unknown): Partial<PaymentMetadata> => {
  if (value === undefined || value === null) return {}
  if (!isObject(value)) throw new Malformed("data.metadata is not an object")
  const out: Record<string, string> = {}
  for (const [k, v] of Object.entries(value)) if (typeof v === "string") out[k] = v
  return out
}

/** The saved card our hosted page reports; the token is required, the rest is display detail. */
const methodOf = (value: unknown): MethodDetails => {
  if (!isObject(value)) throw new Malformed("data.method is missing")
  const text = (field: string) => {
    const v = value[field]
    if (v === undefined || v === null) return null
    if (typeof v !== "string") throw new Malformed(`data.method.${field} is not a string`)
    return v
  }
  const number = (field: string) => {
    const v = value[field]
    if (v === undefined || v === null) return null
    return required(int(v), `data.method.${field}`)
  }
  return {
    token: required(str(value["token"]), "data.method.token"),
    providerCustomerId: text("providerCustomerId"),
    email: text("email"),
    type: text("type") ?? "card",
    brand: text("brand"),
    last4: text("last4"),
    expMonth: number("expMonth"),
    expYear: number("expYear"),
    reusable: value["reusable"] !== false,
    fingerprint: text("fingerprint")
  }
}

export const makeSimulatedAdapter = (publicUrl: string): PaymentAdapter => ({
  name: "simulated",
  createCheckout: (_account, request) =>
    Effect.succeed({
      checkoutUrl: `${publicUrl}/simulated/${request.mode === "setup" ? "setup" : "checkout"}/${request.metadata.organization_id}/${request.reference}`,
      reference: request.reference,
      accessCode: `sim_ac_${request.reference}`
    }),
  charge: (_account, request) =>
    Effect.succeed(
      request.method.token.startsWith("sim_pm_declining_")
        ? { _tag: "Declined" as const, message: "The card was declined (simulated)" }
        : request.method.token.startsWith("sim_pm_3ds_")
          ? { _tag: "ActionRequired" as const, message: "The card needs the customer to authenticate (simulated)" }
          : { _tag: "Succeeded" as const, providerReference: `sim_tx_${request.reference}` }
    ),
  verify: () => Effect.succeed({ status: "pending" as const, method: null }),
  refund: () => Effect.void,
  removeMethod: () => Effect.void,
  verifySignature: (account, rawBody, headers) =>
    Effect.sync(() => {
      const given = headers[SIGNATURE_HEADER]
      if (given === undefined || account.webhookSecret === null) return false
      return safeEqual(sign(account.webhookSecret, rawBody), given)
    }),
  routeEvent: (rawBody) =>
    Effect.try({
      try: (): EventRoute => {
        const event = readEvent(rawBody)
        const data = isObject(event["data"]) ? event["data"] : {}
        const metadata = isObject(data["metadata"]) ? data["metadata"] : {}
        const type = event["type"] as string
        return { type, handled: HANDLED.has(type), organizationId: str(metadata["organization_id"]) }
      },
      catch: rejected
    }),
  parseEvent: (rawBody) =>
    Effect.try({
      try: (): ProviderEvent => {
        const event = readEvent(rawBody)
        const type = event["type"] as string
        const id = str(event["id"])
        if (!HANDLED.has(type)) {
          return { _tag: "Ignored", eventKey: id ?? createHash("sha256").update(rawBody).digest("hex"), type }
        }
        if (id === null) throw new Malformed("id is missing")
        const data = event["data"]
        if (!isObject(data)) throw new Malformed("data is missing")
        const reference = required(str(data["reference"]), "data.reference")
        const metadata = metadataOf(data["metadata"])
        switch (type) {
          case "payment.succeeded":
            return {
              _tag: "PaymentSucceeded",
              eventKey: id,
              reference,
              amount: required(int(data["amount"]), "data.amount"),
              currency: required(str(data["currency"]), "data.currency"),
              metadata,
              method: data["method"] === undefined || data["method"] === null ? null : methodOf(data["method"])
            }
          case "payment.failed":
            return {
              _tag: "PaymentFailed",
              eventKey: id,
              reference,
              message: str(data["message"]) ?? "declined",
              metadata
            }
          default:
            return { _tag: "SetupSucceeded", eventKey: id, reference, metadata, method: methodOf(data["method"]) }
        }
      },
      catch: rejected
    }),
  // Our own hosted page reports the whole method.
  completeEvent: (_account, event) => Effect.succeed(event)
})
