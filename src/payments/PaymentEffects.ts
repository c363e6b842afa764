import { Context, type Effect } from "effect"
import type { Purpose } from "./PaymentsRepo.ts"

/** What a confirmed payment paid for. */
export interface PaidTarget {
  readonly customerId: string
  readonly targetId: string
  readonly quantity: number
  readonly amount: string
  readonly currency: string
  readonly reference: string
  /** What the payment was priced as when it is to become an invoice (a first payment's quote); else null. */
  readonly invoiceQuote: Record<string, unknown> | null
  /** The invoice the payment was recorded as (a first payment, once settled); null otherwise. */
  readonly invoiceId: string | null
}

/**
 * What a confirmed payment does to our objects: activate a subscription, add credits, pay an invoice. Runs inside
 * the settling transaction; `false` when the object was no longer payable (the money is then recorded, unapplied);
 * `{invoiceId}` when it applied and wrote an invoice of the payment (a subscription's first payment), which the
 * payment then names.
 */
export type PaymentEffect = (org: string, paid: PaidTarget) => Effect.Effect<boolean | { readonly invoiceId: string }>

/** Money of an applied payment that went back to the customer (a refund, a lost dispute). */
export interface RefundedTarget extends PaidTarget {
  /** This reversal's whole minor units (not the running total), at most the payment's `amount`. */
  readonly refunded: string
  readonly cause: "refund" | "dispute"
  /** The provider's name for this reversal (or our refund's): what it is known by when reported again. */
  readonly reversalKey: string
  readonly reason: string | null
}

/** What money going back undoes, inside the transaction that records it. */
export type RefundEffect = (org: string, refunded: RefundedTarget) => Effect.Effect<void>

/** What a failed payment attempt (declined, refused, failed at the provider) tells its target, inside its transaction. */
export type FailureEffect = (org: string, failed: PaidTarget & { readonly message: string }) => Effect.Effect<void>

export interface PaymentEffectsShape {
  readonly paid: Partial<Record<Purpose, PaymentEffect>>
  /** An invoice's failed attempt is announced (`invoice.payment_failed`); other purposes need nothing. */
  readonly failed?: Partial<Record<Purpose, FailureEffect>>
  /** A purpose without one keeps what it gave (decisions.md §7: access is not revoked, a paid invoice stays paid). */
  readonly refunded: Partial<Record<Purpose, RefundEffect>>
}

/**
 * Filled by the features that own the targets (src/wiring), read when a payment is confirmed or reversed, so
 * payments never imports the features it pays for.
 */
export class PaymentEffects extends Context.Reference<PaymentEffects>()("PaymentEffects", {
  defaultValue: (): PaymentEffectsShape => ({ paid: {}, refunded: {} })
}) {}
