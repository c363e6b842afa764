import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { amountDue } from "../billing/InvoicePayments.ts"
import { Invoices } from "../billing/Invoices.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { isFree } from "../catalog/model.ts"
import { Customers } from "../customers/Customers.ts"
import { roundHalfUp, toDecimal } from "../domain/money.ts"
import { addInterval } from "../domain/periods.ts"
import { Outbox } from "../events/Outbox.ts"
import { Payments } from "../payments/Payments.ts"
import { describeDefect } from "../platform/defects.ts"
import { PlanChanges } from "./changes.ts"
import type { SubscriptionRecord } from "./model.ts"
import { type SubscriptionEventType, toWireSubscription } from "./Subscriptions.ts"
import { SubscriptionsRepo } from "./SubscriptionsRepo.ts"

/** A failed renewal keeps access this long while payment is retried (decisions.md §7). */
export const GRACE_MS = 7 * 86_400_000
/** How often a past-due renewal is retried during its grace. */
export const RETRY_MS = 86_400_000

export interface RenewalReport {
  readonly renewed: number
  readonly pastDue: number
  readonly canceled: number
}

/**
 * Period ends, done in the background: renew (invoice and charge), move to past_due with grace, cancel.
 * Work is claimed with `FOR UPDATE SKIP LOCKED` in a short transaction that also moves the period, so any
 * number of processes can run it and none charges a subscription twice; charges happen outside any lock.
 */
export interface RenewalsShape {
  readonly runDue: Effect.Effect<RenewalReport>
}

export class Renewals extends Context.Tag("Renewals")<Renewals, RenewalsShape>() {}

const BATCH = 25
const MAX_BATCHES = 400

export const RenewalsLive = Layer.effect(
  Renewals,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* SubscriptionsRepo
    const catalog = yield* Catalog
    const invoices = yield* Invoices
    const payments = yield* Payments
    const customers = yield* Customers
    const outbox = yield* Outbox
    const changes = yield* PlanChanges
    const skipLocked = sql.onDialectOrElse({
      pg: () => sql.literal("FOR UPDATE SKIP LOCKED"),
      orElse: () => sql.literal("")
    })

    const claim = (now: number) =>
      sql<{ organizationId: string; id: string }>`SELECT organization_id, id FROM subscriptions
          WHERE ((status IN ('active', 'trialing') AND current_period_end IS NOT NULL AND current_period_end <= ${now})
            OR (status = 'past_due' AND (grace_ends_at <= ${now} OR updated_at <= ${now - RETRY_MS})))
          ORDER BY current_period_end LIMIT ${BATCH} ${skipLocked}`

    /** Inside the claim's transaction: decide, move the period, and say what to charge afterwards. */
    const advance = (claimed: SubscriptionRecord, now: number) =>
      Effect.gen(function* () {
        // A scheduled plan change takes over in the transaction that renews (decisions.md §14).
        const s = claimed.status === "past_due" ? claimed : yield* changes.switchAtRenewal(claimed, now)
        const plans = (yield* catalog.snapshot(s.organizationId)).plansById
        const plan = plans.get(s.planId)
        /** The change and its event, in the claim's transaction. */
        const change = (type: SubscriptionEventType, next: SubscriptionRecord) =>
          Effect.zipRight(
            repo.update(next),
            outbox.emit(next.organizationId, {
              type,
              data: toWireSubscription(next, plan, plans),
              customerId: next.customerId,
              subjectId: next.id
            })
          )
        if (s.status === "past_due") {
          if (s.graceEndsAt !== null && now >= s.graceEndsAt) {
            yield* change("subscription.canceled", { ...s, status: "canceled", canceledAt: now, updatedAt: now })
            return { kind: "canceled" as const }
          }
          yield* repo.update({ ...s, updatedAt: now })
          return { kind: "retry" as const }
        }
        if (s.cancelAtPeriodEnd || plan === undefined || s.currentPeriodEnd === null) {
          yield* change("subscription.canceled", {
            ...s,
            status: "canceled",
            canceledAt: s.currentPeriodEnd ?? now,
            updatedAt: now
          })
          return { kind: "canceled" as const }
        }
        const interval = plan.interval
        const start = s.currentPeriodEnd
        const end =
          interval === null || plan.billingType === "one_time"
            ? null
            : addInterval(s.startedAt, interval, periodIndex(s, interval, start) + 1)
        if (end === null) {
          yield* change("subscription.expired", { ...s, status: "expired", updatedAt: now })
          return { kind: "canceled" as const }
        }
        const next: SubscriptionRecord = {
          ...s,
          status: "active",
          currentPeriodStart: start,
          currentPeriodEnd: end,
          trialEndsAt: null,
          updatedAt: now
        }
        if (isFree(plan)) {
          yield* change("subscription.renewed", next)
          return { kind: "renewed" as const }
        }
        const invoice = yield* invoices.createInvoice(
          s.organizationId,
          s.customerId,
          plan.currency ?? "NGN",
          [
            {
              feature: plan.slug,
              plan: plan.slug,
              description: `${plan.name} (${new Date(start).toISOString().slice(0, 10)} to ${new Date(end).toISOString().slice(0, 10)})`,
              quantity: 1,
              unitPrice: plan.price,
              amount: roundHalfUp(toDecimal(plan.price)),
              periodStart: start,
              periodEnd: end
            }
          ],
          { subscriptionId: s.id, periodStart: start, periodEnd: end }
        )
        // Until the charge succeeds the subscription is past due (access continues through the grace). Announced
        // after the charge: `subscription.renewed` when it is paid (with the invoice), `subscription.past_due` when not.
        yield* repo.update({ ...next, status: "past_due", graceEndsAt: now + GRACE_MS })
        return { kind: "charge" as const, invoiceId: invoice.id }
      })

    /** Off-session: nobody is there to complete a checkout. The invoice's payment effect reactivates. */
    const charge = (org: string, subscriptionId: string, invoiceId: string) =>
      Effect.gen(function* () {
        const invoice = yield* invoices.get(org, invoiceId)
        if (invoice.status !== "open") return "paid" as const
        const sub = yield* repo.get(org, subscriptionId)
        if (Option.isNone(sub)) return "failed" as const
        const customer = yield* customers.resolve(org, sub.value.customerId)
        const plan = (yield* catalog.snapshot(org)).plansById.get(sub.value.planId)
        const result = yield* payments.collect(org, customer, {
          purpose: "invoice",
          targetId: invoice.id,
          amount: amountDue(invoice),
          currency: invoice.currency,
          description: `Invoice ${invoice.number}`,
          callbackUrl: null,
          provider: plan?.provider ?? null,
          offSessionOnly: true,
          payable: invoices.lockPayable(org, invoice.id)
        })
        return result._tag === "Paid"
          ? ("paid" as const)
          : result._tag === "Processing"
            ? ("processing" as const)
            : result._tag === "Failed" && result.attempted === false
              ? ("no_method" as const)
              : ("failed" as const)
      }).pipe(
        Effect.catchAll((e) =>
          Effect.logWarning("renewal charge failed", { reason: e._tag }).pipe(Effect.as("failed" as const))
        )
      )

    /**
     * The renewal was not paid: the subscription, past due since the claim, is announced once per renewal invoice
     * (a retry's failure finds the notice written). With no saved method nothing was attempted, so the invoice's
     * failure is announced here too (a declined charge announces itself, from the payment's transaction).
     */
    const notPaid = (org: string, subscriptionId: string, invoiceId: string, noMethod: boolean) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const sub = yield* repo.getForUpdate(org, subscriptionId)
            if (Option.isNone(sub) || sub.value.status !== "past_due") return
            const plans = (yield* catalog.snapshot(org)).plansById
            yield* outbox.emit(org, {
              type: "subscription.past_due",
              data: toWireSubscription(sub.value, plans.get(sub.value.planId), plans),
              customerId: sub.value.customerId,
              subjectId: sub.value.id,
              dedupeKey: `subscription.past_due:${invoiceId}`
            })
            if (noMethod) yield* invoices.paymentFailed(org, invoiceId, "No saved payment method to charge")
          })
        )
        .pipe(Effect.orDie)

    const openRenewalInvoice = (org: string, subscriptionId: string) =>
      Effect.map(invoices.list(org, undefined).pipe(Effect.orDie), (list) =>
        list.find((i) => i.subscriptionId === subscriptionId && i.status === "open")
      )

    /**
     * Collects one claimed renewal (past due since the claim). A defect in it (one organization's bad data: a saved
     * method encrypted with another key, a row of the wrong shape) is logged without its message or stack and leaves
     * the subscription past due, retried by a later run as any unpaid renewal; the run goes on with the others.
     */
    const collect = (org: string, subscriptionId: string, claimedInvoiceId: string | undefined) =>
      Effect.gen(function* () {
        const invoiceId = claimedInvoiceId ?? (yield* openRenewalInvoice(org, subscriptionId))?.id
        const outcome = invoiceId === undefined ? "failed" : yield* charge(org, subscriptionId, invoiceId)
        if (invoiceId !== undefined && outcome !== "paid" && outcome !== "processing") {
          yield* notPaid(org, subscriptionId, invoiceId, outcome === "no_method")
        }
        return outcome
      }).pipe(
        Effect.catchAllDefect((defect) =>
          Effect.logError("renewal collection failed; left past due for a later run", {
            organizationId: org,
            subscriptionId,
            ...describeDefect(defect)
          }).pipe(Effect.as("defect" as const))
        )
      )

    /** One claimed batch, settled; `null` when nothing was due. */
    const runBatch = (now: number) =>
      Effect.gen(function* () {
        const work = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const claimed = yield* claim(now)
              const out: Array<{ org: string; id: string; kind: string; invoiceId?: string }> = []
              for (const row of claimed) {
                const s = yield* repo.get(row.organizationId, row.id)
                if (Option.isNone(s)) continue
                const decided = yield* advance(s.value, now)
                out.push({ org: row.organizationId, id: row.id, ...decided })
              }
              return out
            })
          )
          .pipe(Effect.orDie)

        let renewed = 0
        let pastDue = 0
        let canceled = 0
        for (const item of work) {
          if (item.kind === "canceled") canceled++
          else if (item.kind === "renewed") renewed++
          else if ((yield* collect(item.org, item.id, item.invoiceId)) === "paid") renewed++
          else pastDue++
        }
        return work.length === 0 ? null : { renewed, pastDue, canceled }
      })

    // Drains what is due now, batch by batch: every settled item leaves the due set (its period moved on, it
    // was canceled, or its retry was pushed a day out), so this ends.
    const runDue = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      // Unpaid plan changes lapse first, so none outlives the period its invoice prorated.
      yield* changes.expireDue(now)
      const total = { renewed: 0, pastDue: 0, canceled: 0 }
      for (let batch = 0; batch < MAX_BATCHES; batch++) {
        const report = yield* runBatch(now)
        if (report === null) break
        total.renewed += report.renewed
        total.pastDue += report.pastDue
        total.canceled += report.canceled
      }
      return total
    })

    return { runDue }
  })
)

/** Which period of the subscription `start` begins (periods are anchored at the subscription's start). */
const periodIndex = (s: SubscriptionRecord, interval: Parameters<typeof addInterval>[1], start: number) => {
  let k = 0
  while (addInterval(s.startedAt, interval, k) < start) k++
  return k
}
