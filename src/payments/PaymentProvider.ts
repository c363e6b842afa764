/**
 * One interface over every payment provider (decisions.md §8). Adapters translate; the billing flows above
 * them never see a provider's wire format. Amounts are whole minor units (kobo, cents) as integers.
 */
import type { Effect } from "effect"
import { Schema } from "effect"

export type ProviderName = "paystack" | "stripe" | "simulated"
export const PROVIDERS: ReadonlyArray<ProviderName> = ["paystack", "stripe", "simulated"]
export const isProviderName = (s: string): s is ProviderName => (PROVIDERS as ReadonlyArray<string>).includes(s)

/** Credentials of one provider account, decrypted only in memory. */
export interface ProviderAccount {
  readonly provider: ProviderName
  readonly secretKey: string
  /** Stripe's `whsec_…`; Paystack signs with the secret key itself; the simulated provider has its own. */
  readonly webhookSecret: string | null
  /** Where the adapter sends requests: the provider's API, or a fake of it in tests. */
  readonly baseUrl?: string | undefined
}

/** Every object we create at a provider carries these, so its webhooks can be routed back (decisions.md §8). */
export interface PaymentMetadata {
  readonly organization_id: string
  readonly customer_id: string
  /** What the payment is for: `subscription`, `addon`, `invoice` or `setup`. */
  readonly purpose: string
  /** Our object it pays for (subscription, pack purchase, invoice id). */
  readonly target_id: string
  readonly [key: string]: string
}

export interface CheckoutRequest {
  /** Our deterministic reference; providers treat it as the idempotency key. */
  readonly reference: string
  /** `payment` charges `amount` and saves a reusable method; `setup` only saves a method. */
  readonly mode: "payment" | "setup"
  readonly amount: number
  readonly currency: string
  readonly email: string
  readonly description: string
  readonly callbackUrl: string | null
  /** The provider's customer id of this customer, when we know one (Stripe `cus_…`). */
  readonly providerCustomerId: string | null
  readonly metadata: PaymentMetadata
}

export interface CheckoutSession {
  readonly checkoutUrl: string
  readonly reference: string
  /** Paystack's `access_code`; Stripe's session id. */
  readonly accessCode: string | null
}

/** A saved, reusable payment method as the provider knows it (secrets stay in `token`). */
export interface SavedMethod {
  /** Paystack `authorization_code`, Stripe `pm_…`: what an off-session charge needs. */
  readonly token: string
  readonly providerCustomerId: string | null
  /** Paystack needs the email the authorization was created with. */
  readonly email: string | null
}

export interface ChargeRequest {
  readonly reference: string
  readonly amount: number
  readonly currency: string
  readonly email: string
  readonly method: SavedMethod
  readonly metadata: PaymentMetadata
}

export type ChargeResult =
  | { readonly _tag: "Succeeded"; readonly providerReference: string }
  /** The method needs the customer present (3-D Secure): fall back to checkout. */
  | { readonly _tag: "ActionRequired"; readonly message: string }
  | { readonly _tag: "Declined"; readonly message: string }
  /** The provider no longer knows the saved method (deactivated authorization, detached PaymentMethod). */
  | { readonly _tag: "MethodGone"; readonly message: string }
  /** Accepted, outcome to arrive by webhook. */
  | { readonly _tag: "Pending"; readonly providerReference: string }

/** A method the provider reports as saved, from a verified payment or setup. */
export interface MethodDetails extends SavedMethod {
  readonly type: string
  readonly brand: string | null
  readonly last4: string | null
  readonly expMonth: number | null
  readonly expYear: number | null
  readonly reusable: boolean
  /** Identifies the same card across payments, to avoid saving it twice. */
  readonly fingerprint: string | null
}

/**
 * How the provider says a reference ended. `not_found`: the provider has no payment under it (a request that never
 * reached it; Stripe's search can lag a minute behind, so callers wait before they believe it). `amount` and
 * `currency`, when the provider says them, are compared with the attempt's before anything is applied.
 */
export interface VerifyResult {
  readonly status: "succeeded" | "failed" | "pending" | "not_found"
  readonly method: MethodDetails | null
  readonly amount?: number | undefined
  readonly currency?: string | undefined
}

/** A provider's webhook, reduced to what our flows act on. */
export type ProviderEvent =
  | {
      readonly _tag: "PaymentSucceeded"
      /** Unique per event at the provider: the dedupe key. */
      readonly eventKey: string
      readonly reference: string
      readonly amount: number
      readonly currency: string
      readonly metadata: Partial<PaymentMetadata>
      readonly method: MethodDetails | null
    }
  | {
      readonly _tag: "PaymentFailed"
      readonly eventKey: string
      readonly reference: string
      readonly message: string
      readonly metadata: Partial<PaymentMetadata>
    }
  | {
      readonly _tag: "SetupSucceeded"
      readonly eventKey: string
      readonly reference: string
      readonly metadata: Partial<PaymentMetadata>
      readonly method: MethodDetails
    }
  | {
      /**
       * Money of a settled payment went back to the customer: a refund, or a dispute the merchant lost (decisions.md
       * §7). `reference` is null when the event names only the provider's payment (`providerPaymentId`: Stripe's
       * `pi_…` or `ch_…`), which `completeEvent` resolves.
       */
      readonly _tag: "Refunded"
      readonly eventKey: string
      readonly reference: string | null
      readonly providerPaymentId: string | null
      readonly cause: "refund" | "dispute"
      /** Names this reversal at the provider: different ones add up, the same one reported again does not. */
      readonly reversalKey: string
      /** Minor units. `cumulative`: all reversed under `reversalKey` so far (Stripe's `amount_refunded`), not an increment. */
      readonly amount: number
      readonly cumulative: boolean
      readonly currency: string
      readonly metadata: Partial<PaymentMetadata>
      /** Why, when we asked for the refund ourselves (`POST /v1/billing/invoices/{id}/refund`). */
      readonly reason?: string
    }
  | {
      /** The customer disputed a settled payment; nothing moves until it is lost (then a `Refunded`). */
      readonly _tag: "Disputed"
      readonly eventKey: string
      readonly reference: string | null
      readonly providerPaymentId: string | null
      readonly metadata: Partial<PaymentMetadata>
    }
  | { readonly _tag: "Ignored"; readonly eventKey: string; readonly type: string }

/**
 * What a webhook is routed by, read before the rest of its body is validated (decisions.md §8): the sandbox route
 * must skip an event it cannot route, or of a type it does not handle, whatever else the body lacks.
 */
export interface EventRoute {
  readonly type: string
  /** Whether `parseEvent` acts on this type; events of other types are acknowledged and skipped. */
  readonly handled: boolean
  /** `organization_id` of the metadata we put on the provider's object, when the event carries one. */
  readonly organizationId: string | null
}

/** Failures talking to the provider, by what the caller should do about them. */
export class ProviderError extends Schema.TaggedError<ProviderError>()("ProviderError", {
  reason: Schema.Literal("unauthorized", "unavailable", "timeout", "rejected", "duplicate"),
  message: Schema.String
}) {}

export interface PaymentAdapter {
  readonly name: ProviderName
  readonly createCheckout: (
    account: ProviderAccount,
    request: CheckoutRequest
  ) => Effect.Effect<CheckoutSession, ProviderError>
  readonly charge: (account: ProviderAccount, request: ChargeRequest) => Effect.Effect<ChargeResult, ProviderError>
  /** Asks the provider how a reference ended (for callbacks and reconciliation). */
  readonly verify: (account: ProviderAccount, reference: string) => Effect.Effect<VerifyResult, ProviderError>
  readonly refund: (
    account: ProviderAccount,
    reference: string,
    amount: number | null
  ) => Effect.Effect<void, ProviderError>
  readonly removeMethod: (account: ProviderAccount, method: SavedMethod) => Effect.Effect<void, ProviderError>
  /** Checks the signature over the raw body, in constant time; never parses before it passes. */
  readonly verifySignature: (
    account: ProviderAccount,
    rawBody: Uint8Array,
    headers: Readonly<Record<string, string | undefined>>,
    nowMs: number
  ) => Effect.Effect<boolean>
  /** Only the routing fields; fails (`rejected`) when the body is not a JSON object naming an event type. */
  readonly routeEvent: (rawBody: Uint8Array) => Effect.Effect<EventRoute, ProviderError>
  /** The whole event, validated (`rejected` when malformed); a type it does not handle is `Ignored`. */
  readonly parseEvent: (rawBody: Uint8Array) => Effect.Effect<ProviderEvent, ProviderError>
  /**
   * Fetches what a parsed event leaves out (Stripe never expands objects inside events): a saved method's card
   * details, from its bare id; our reference of the payment a refund or dispute names by the provider's id. Called
   * before the webhook's transaction; an event that lacks nothing comes back as is.
   */
  readonly completeEvent: (
    account: ProviderAccount,
    event: ProviderEvent
  ) => Effect.Effect<ProviderEvent, ProviderError>
}
