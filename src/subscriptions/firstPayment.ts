import type { SqlClient } from "@effect/sql"
import { Clock, type Context, Effect, Option } from "effect"
import { encodeInvoiceQuote, type InvoiceQuote, invoiceQuoteOf } from "../billing/invoiceQuote.ts"
import type { Invoices } from "../billing/Invoices.ts"
import type { CouponRecord } from "../catalog/coupons.ts"
import type { Plan } from "../catalog/model.ts"
import type { SubscriptionDiscounts } from "../catalog/subscriptionDiscounts.ts"
import type { CreditBalance } from "../creditBalance/CreditBalance.ts"
import type { CustomerRecord } from "../customers/CustomersRepo.ts"
import { Conflict, PaymentFailed } from "../domain/errors.ts"
import { toNumber } from "../domain/money.ts"
import { creditToApply } from "../domain/planChange.ts"
import type { Payments } from "../payments/Payments.ts"
import type { IdempotencyKey } from "../platform/idempotencyKey.ts"
import { alreadyAttached, type AttachError, type Attached } from "./attached.ts"
import { newAttachProposal } from "./changeProposal.ts"
import { firstInvoiceOf } from "./firstInvoice.ts"
import { effectiveStatus, isGranting, type SubscriptionRecord } from "./model.ts"
import type { SubscriptionsRepo } from "./SubscriptionsRepo.ts"

/**
 * A new paid subscription's first payment (docs/decisions.md h13, h18): priced as its first invoice (the attach's
 * coupon, the customer's discount, taxes), paid from the credit balance first, the rest charged on a saved method or
 * collected through a hosted checkout; settled, it becomes that invoice.
 */
export interface FirstPaymentDeps {
  readonly sql: SqlClient.SqlClient
  readonly repo: Context.Tag.Service<typeof SubscriptionsRepo>
  readonly payments: Context.Tag.Service<typeof Payments>
  readonly invoices: Context.Tag.Service<typeof Invoices>
  readonly credit: Context.Tag.Service<typeof CreditBalance>
  readonly subscriptionDiscounts: Context.Tag.Service<typeof SubscriptionDiscounts>
  /** Pending → active now, inside the caller's transaction; null when it was no longer pending. */
  readonly activate: (
    organizationId: string,
    id: string
  ) => Effect.Effect<{ readonly subscription: SubscriptionRecord; readonly plan: Plan | undefined } | null>
}

export const makeFirstPayment = ({
  sql,
  repo,
  payments,
  invoices,
  credit,
  subscriptionDiscounts,
  activate
}: FirstPaymentDeps) => {
  /**
   * The first payment of a paid plan: charge a saved method, else a hosted checkout. On `attach`, a request that
   * finds another's attempt waits for its outcome and answers with it (issue 37 item 7: concurrent identical
   * attaches describe one outcome); `checkoutOnly` after another's charge was declined.
   */
  const collectFirstPayment = (
    organizationId: string,
    customer: CustomerRecord,
    subscription: SubscriptionRecord,
    plan: Plan,
    callbackUrl: string | null,
    idempotency?: IdempotencyKey,
    mode: { readonly attaching: boolean; readonly duplicate?: boolean; readonly checkoutOnly?: boolean } = {
      attaching: false
    }
  ): Effect.Effect<Attached, AttachError> =>
    Effect.gen(function* () {
      const bound = yield* subscriptionDiscounts.find(organizationId, subscription.id)
      const charge = yield* firstCharge(
        organizationId,
        customer.id,
        plan,
        subscription.createdAt,
        Option.match(bound, { onNone: () => null, onSome: (d) => d.coupon })
      )
      // The customer's credit balance pays first (§14), the payment the rest; it is spent when the invoice is
      // written, in the settling transaction (h18).
      const currency = (plan.currency ?? "NGN").toUpperCase()
      const total = BigInt(toNumber(charge.total))
      const planned = creditToApply(yield* credit.balance(organizationId, customer.id, currency), total)
      const quote = invoiceQuoteOf(charge, planned)
      if (planned === total) return yield* coveredByCredit(organizationId, subscription, plan, quote, mode.attaching)
      const collected = yield* payments.collect(organizationId, customer, {
        purpose: "subscription",
        targetId: subscription.id,
        amount: Number(total - planned),
        currency: plan.currency ?? "NGN",
        // Settled, the payment becomes the subscription's first invoice with exactly these numbers (h18).
        invoiceQuote: encodeInvoiceQuote(quote),
        description: `${plan.name} subscription`,
        callbackUrl,
        provider: plan.provider,
        ...(mode.checkoutOnly === true ? { checkoutOnly: true } : {}),
        ...(mode.duplicate === true ? { duplicate: true } : {}),
        payable: Effect.map(
          repo.getForUpdate(organizationId, subscription.id),
          Option.exists((s) => s.status === "pending")
        ),
        ...(idempotency === undefined ? {} : { idempotency })
      })
      // Another request's attempt: its outcome, not "in progress" while that request is still deciding it.
      const awaited =
        mode.attaching && collected._tag === "Processing" && collected.elsewhere === true
          ? yield* payments.awaitOutcome(organizationId, collected.reference)
          : null
      const result = awaited ?? collected
      const current = Option.getOrElse(yield* repo.get(organizationId, subscription.id), () => subscription)
      if (mode.attaching) {
        // Paid by another request, or activated by its payment before this one claimed: the plan is attached.
        const byAnother = (awaited !== null && result._tag === "Paid") || result._tag === "NotPayable"
        if (byAnother && isGranting(current, yield* Clock.currentTimeMillis)) return alreadyAttached(current, plan)
        // Another request's charge was declined: it falls back to a hosted page, and so does this answer (never a
        // second charge of the card that was just declined).
        if (
          awaited !== null &&
          result._tag === "Failed" &&
          current.status === "pending" &&
          mode.checkoutOnly !== true
        ) {
          return yield* collectFirstPayment(organizationId, customer, current, plan, callbackUrl, idempotency, {
            attaching: true,
            duplicate: true,
            checkoutOnly: true
          })
        }
      }
      if (result._tag === "NotPayable") {
        return yield* new Conflict({
          code: "subscription_not_pending",
          message: `The subscription is ${effectiveStatus(current, yield* Clock.currentTimeMillis)}, not pending`
        })
      }
      if (result._tag === "Processing") {
        return {
          subscription: current,
          plan,
          checkoutUrl: null,
          reference: result.reference,
          accessCode: null,
          code: "payment_processing" as const,
          message: "The first payment is in progress at the provider; the subscription activates once it is confirmed"
        }
      }
      if (result._tag === "Failed") {
        return yield* new PaymentFailed({ message: result.message })
      }
      return result._tag === "Checkout"
        ? {
            subscription: current,
            plan,
            checkoutUrl: result.checkoutUrl,
            reference: result.reference,
            accessCode: result.accessCode,
            message:
              result.chargeFailure === null
                ? "Payment is needed: send the customer to the checkout"
                : `The saved method could not be charged (${result.chargeFailure}): send the customer to the checkout`
          }
        : {
            subscription: current,
            plan,
            checkoutUrl: null,
            reference: null,
            accessCode: null,
            message: `Attached ${plan.slug}: paid with the saved method`
          }
    })

  /**
   * A first payment the credit balance covers whole: nothing to charge, so it is settled here as a payment would be
   * (activated, and its invoice written with the balance spent), once however many requests get here.
   */
  const coveredByCredit = (
    organizationId: string,
    subscription: SubscriptionRecord,
    plan: Plan,
    quote: InvoiceQuote,
    attaching: boolean
  ): Effect.Effect<Attached, Conflict> =>
    Effect.gen(function* () {
      const activated = yield* sql
        .withTransaction(
          Effect.gen(function* () {
            const done = yield* activate(organizationId, subscription.id)
            if (done === null) return null
            // A page opened while the balance fell short is not to be paid as well.
            yield* payments.supersedeCheckouts(organizationId, subscription.id)
            const currency = (plan.currency ?? "NGN").toUpperCase()
            yield* invoices.recordPaid(
              organizationId,
              firstInvoiceOf(quote, done.subscription, done.plan, "0", currency)
            )
            return done.subscription
          })
        )
        .pipe(Effect.orDie)
      if (activated !== null) {
        return {
          ...alreadyAttached(activated, plan),
          message: `Attached ${plan.slug}: paid with the credit balance`
        }
      }
      const current = Option.getOrElse(yield* repo.get(organizationId, subscription.id), () => subscription)
      if (attaching && isGranting(current, yield* Clock.currentTimeMillis)) return alreadyAttached(current, plan)
      return yield* new Conflict({
        code: "subscription_not_pending",
        message: `The subscription is ${effectiveStatus(current, yield* Clock.currentTimeMillis)}, not pending`
      })
    })

  /**
   * A new paid subscription's first charge, priced as an invoice of its first period would be (its coupon, then the
   * customer's own discount on what is left, §15, then taxes): what the preview shows, what is collected and what
   * its invoice says (h18). The customer discount's use is counted when that invoice is written.
   */
  const firstCharge = (
    organizationId: string,
    customerId: string,
    plan: Plan,
    now: number,
    coupon: CouponRecord | null
  ) => {
    const proposal = newAttachProposal(plan, now)
    return invoices.quote(organizationId, customerId, proposal.currency, proposal.lines, { coupon })
  }

  return { collectFirstPayment, firstCharge }
}
