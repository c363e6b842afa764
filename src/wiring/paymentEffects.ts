import { Clock, Effect, Layer } from "effect"
import { Invoices } from "../billing/Invoices.ts"
import { PlanChanges } from "../subscriptions/changes.ts"
import { CreditNotes } from "../billing/creditNotes/CreditNotes.ts"
import { Subscriptions } from "../subscriptions/Subscriptions.ts"
import { Addons } from "../payments/Addons.ts"
import { PaymentEffects } from "../payments/Payments.ts"

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
        subscription: (org, paid) => subscriptions.activate(org, paid.targetId),
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
        // decisions.md §16: every refund or lost dispute of an invoice's payment issues a credit note.
        invoice: (org, r) =>
          Effect.asVoid(
            creditNotes.issue(org, {
              invoiceId: r.targetId,
              customerId: r.customerId,
              currency: r.currency,
              amount: r.refunded,
              cause: r.cause,
              reason: r.reason,
              paymentReference: r.reference,
              reversalKey: r.reversalKey
            })
          ),
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
