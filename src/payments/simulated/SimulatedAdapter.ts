import { Effect } from "effect"
import { createHmac } from "node:crypto"
import { safeEqual } from "../../platform/crypto.ts"
import type { MethodDetails, PaymentAdapter, PaymentMetadata, ProviderEvent } from "../PaymentProvider.ts"
import { ProviderError } from "../PaymentProvider.ts"

/**
 * The sandbox's built-in provider: hosted pages served by this service (see Hosted.ts), charges decided by
 * the saved method's kind, and webhooks signed like a real provider's, so every flow can be exercised with no
 * outside account. It never exists on live deployments.
 */
export const SIGNATURE_HEADER = "x-simulated-signature"

export const sign = (secret: string, body: Uint8Array | string) => createHmac("sha256", secret).update(body).digest("hex")

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
  parseEvent: (rawBody) =>
    Effect.try({
      try: (): ProviderEvent => {
        const event = JSON.parse(new TextDecoder().decode(rawBody)) as SimulatedEvent
        const metadata = event.data.metadata as Partial<PaymentMetadata>
        switch (event.type) {
          case "payment.succeeded":
            return {
              _tag: "PaymentSucceeded",
              eventKey: event.id,
              reference: event.data.reference,
              amount: event.data.amount,
              currency: event.data.currency,
              metadata,
              method: event.data.method ?? null
            }
          case "payment.failed":
            return {
              _tag: "PaymentFailed",
              eventKey: event.id,
              reference: event.data.reference,
              message: event.data.message ?? "declined",
              metadata
            }
          case "setup.succeeded":
            if (event.data.method === undefined) throw new Error("setup without a method")
            return { _tag: "SetupSucceeded", eventKey: event.id, reference: event.data.reference, metadata, method: event.data.method }
          default:
            return { _tag: "Ignored", eventKey: String(event.id), type: String((event as { type?: unknown }).type) }
        }
      },
      catch: () => new ProviderError({ reason: "rejected", message: "The simulated event is not valid JSON" })
    })
})
