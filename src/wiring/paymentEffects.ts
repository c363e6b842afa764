import { Clock, Effect, Layer } from "effect"
import { Invoices } from "../billing/Invoices.ts"
import { PlanChanges } from "../subscriptions/changes.ts"
import { CreditNotes } from "../billing/creditNotes/CreditNotes.ts"
import { Subscriptions } from "../subscriptions/Subscriptions.ts"
import { Addons } from "../payments/Addons.ts"
import { PaymentEffects, type RefundedTarget } from "../payments/Payments.ts"
import { decodeInvoiceQuote } from "../billing/invoiceQuote.ts"
import { firstInvoiceOf } from "../subscriptions/firstInvoice.ts"

/** The credit note of money given back on an invoice (decisions.md §16). */
const creditNoteOf = (r: RefundedTarget, invoiceId: string) => ({
  invoiceId,
  customerId: r.customerId,
  currency: r.currency,
  amount: r.refunded,
  cause: r.cause,
  reason: r.reason,
  paymentReference: r.reference,
  reversalKey: r.reversalKey
})

/** What each kind of confirmed payment does, wired to the features that own the paid-for objects. */
export const PaymentEffectsLive = Layer.effect(
  PaymentEffects,
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions
    const addons = yield* Addons
    const invoices = yield* Invoices
    const planChanges = yield* PlanChanges
    const creditNotes = yield* CreditNotes
    return {
      paid: {
        // The first payment activates the subscription and is recorded as its first invoice, paid (h18); one from
        // before payments carried their quote only activates it.
        subscription: (org, paid) =>
          Effect.gen(function* () {
            const activated = yield* subscriptions.activate(org, paid.targetId)
            if (activated === null) return false
            const quote = decodeInvoiceQuote(paid.invoiceQuote)
            if (quote === null) return true
            const invoice = yield* invoices.recordPaid(
              org,
              firstInvoiceOf(quote, activated.subscription, activated.plan, paid.amount, paid.currency)
            )
            return { invoiceId: invoice.id }
          }),
        addon: (org, paid) => Effect.as(addons.grant(org, paid.customerId, paid.targetId, paid.quantity), true),
        invoice: (org, paid) =>
          Effect.gen(function* () {
            // Locked as a claim would: a second payment arriving for a paid or voided invoice is not applied.
            if (!(yield* invoices.lockPayable(org, paid.targetId))) return false
            const invoice = yield* invoices.markPaid(org, paid.targetId, paid.amount, yield* Clock.currentTimeMillis)
            // A pending plan change's invoice puts the change into effect; a renewal's reactivates a past-due one.
            if (yield* planChanges.invoicePaid(org, invoice)) return true
            if (invoice.subscriptionId !== null) yield* subscriptions.renewalPaid(org, invoice.subscriptionId)
            return true
          }).pipe(Effect.orDie)
      },
      // An invoice's failed attempt is announced; a renewal's subscription is announced past due by the renewals worker.
      failed: {
        invoice: (org, failed) => invoices.paymentFailed(org, failed.targetId, failed.message)
      },
      // decisions.md §7: a refunded pack gives back its credits in proportion; a subscription keeps its access and an
      // invoice stays paid (it shows `amountRefunded`).
      refunded: {
        // A first payment recorded as its invoice is refunded as that invoice's payment: a credit note on it.
        subscription: (org, r) =>
          r.invoiceId === null ? Effect.void : Effect.asVoid(creditNotes.issue(org, creditNoteOf(r, r.invoiceId))),
        // decisions.md §16: every refund or lost dispute of an invoice's payment issues a credit note.
        invoice: (org, r) => Effect.asVoid(creditNotes.issue(org, creditNoteOf(r, r.targetId))),
        addon: (org, r) =>
          Effect.asVoid(
            addons.takeBack(org, r.customerId, r.targetId, r.quantity, {
              refunded: BigInt(r.refunded),
              paid: BigInt(r.amount)
            })
          )
      }
    }
  })
)
