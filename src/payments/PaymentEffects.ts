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
}

/**
 * What a confirmed payment does to our objects: activate a subscription, add credits, pay an invoice. Runs inside
 * the settling transaction; `false` when the object was no longer payable (the money is then recorded, unapplied).
 */
export type PaymentEffect = (org: string, paid: PaidTarget) => Effect.Effect<boolean>

/**
 * Filled by the features that own the targets (src/wiring), read when a payment is confirmed, so payments never
 * imports the features it pays for.
 */
export class PaymentEffects extends Context.Reference<PaymentEffects>()("PaymentEffects", {
  defaultValue: (): Partial<Record<Purpose, PaymentEffect>> => ({})
}) {}
