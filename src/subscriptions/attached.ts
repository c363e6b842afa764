import type { InvoiceRecord } from "../billing/Invoices.ts"
import type { Plan } from "../catalog/model.ts"
import type {
  Conflict,
  NotFound,
  PaymentFailed,
  ProviderFailure,
  ProviderNotConfigured,
  Unprocessable
} from "../domain/errors.ts"
import type { SubscriptionRecord } from "./model.ts"

/** What an attach (or a pending subscription's checkout) answers. */
export interface Attached {
  readonly subscription: SubscriptionRecord
  readonly plan: Plan
  readonly checkoutUrl: string | null
  readonly reference: string | null
  readonly accessCode: string | null
  readonly message: string
  /** `payment_processing` when a charge of the first payment is in flight at the provider. */
  readonly code?: "payment_processing"
  /** A plan change's invoice, when it made one. */
  readonly invoice?: InvoiceRecord | undefined
}

export type AttachError = NotFound | Conflict | Unprocessable | PaymentFailed | ProviderNotConfigured | ProviderFailure

/** An attach that finds the plan attached (by an earlier or a concurrent request) answers the subscription as it is. */
export const alreadyAttached = (subscription: SubscriptionRecord, plan: Plan): Attached => ({
  subscription,
  plan,
  checkoutUrl: null,
  reference: null,
  accessCode: null,
  message: `${plan.slug} was already attached`
})
