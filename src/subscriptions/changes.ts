/**
 * Plan changes of a live subscription (decisions.md §14): now with proration, at the period end, pending until paid,
 * withdrawn, expired. The subscription's row lock serialises everything that changes one subscription: two changes,
 * a change and a renewal (which claims the row), a change and its payment. Where an invoice is locked too, it is
 * locked first (as a payment's settlement does), so no two of these wait on each other in a circle.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import { type InvoiceRecord, Invoices } from "../billing/Invoices.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { isFree, type Plan } from "../catalog/model.ts"
import { CreditBalance } from "../creditBalance/CreditBalance.ts"
import type { CustomerRecord } from "../customers/CustomersRepo.ts"
import {
  Conflict,
  NotFound,
  PaymentFailed,
  type ProviderFailure,
  type ProviderNotConfigured,
  type Unprocessable
} from "../domain/errors.ts"
import { addInterval } from "../domain/periods.ts"
import { Outbox } from "../events/Outbox.ts"
import { Payments } from "../payments/Payments.ts"
import type { IdempotencyKey } from "../platform/idempotencyKey.ts"
import { countRedemption, invoicesOf, type Redeemable } from "../catalog/redemption.ts"
import { SubscriptionDiscounts } from "../catalog/subscriptionDiscounts.ts"
import {
  type ChangeRequest,
  isRefusal,
  PENDING_CHANGE_MS,
  type Proposal,
  propose,
  withPricing
} from "./changeProposal.ts"
import { rollFreePeriod, type SubscriptionRecord, withStartedAt } from "./model.ts"
import { SubscriptionsRepo } from "./SubscriptionsRepo.ts"
import { toWireSubscription } from "./wire.ts"

export interface ChangeInput extends ChangeRequest {
  readonly callbackUrl?: string | undefined
  readonly idempotency?: IdempotencyKey | undefined
  /** A coupon the attach names, found and checked (not yet counted): the change binds it to the subscription. */
  readonly redeem?: Redeemable | undefined
}

export interface ChangeOutcome {
  readonly subscription: SubscriptionRecord
  /** The plan in force (the old one while a change is pending). */
  readonly plan: Plan
  readonly checkoutUrl: string | null
  readonly reference: string | null
  readonly accessCode: string | null
  readonly message: string
  readonly code?: "payment_processing"
  /** The change's invoice, when it made one. */
  readonly invoice?: InvoiceRecord
}

export interface PreviewOutcome {
  readonly proposal: Proposal
  readonly from: Plan
  readonly to: Plan
}

type ChangeError = NotFound | Conflict | Unprocessable | PaymentFailed | ProviderNotConfigured | ProviderFailure

export interface PlanChangesShape {
  /** Changes the live subscription `current` (of plan `from`) to `to`; `to` = `from` withdraws a waiting change. */
  readonly change: (
    org: string,
    customer: CustomerRecord,
    current: SubscriptionRecord,
    to: Plan,
    input: ChangeInput
  ) => Effect.Effect<ChangeOutcome, ChangeError>
  /** What `change` would produce now, writing nothing. */
  readonly preview: (
    org: string,
    current: SubscriptionRecord,
    to: Plan,
    input: ChangeInput
  ) => Effect.Effect<PreviewOutcome, NotFound | Conflict>
  /** Withdraws a scheduled or pending change (a pending one's invoice is voided). */
  readonly cancelChange: (org: string, subscriptionId: string) => Effect.Effect<SubscriptionRecord, NotFound>
  /**
   * A paid invoice (inside its settling transaction, the invoice already locked): when it is a pending change's, the
   * change takes effect. True when it was one.
   */
  readonly invoicePaid: (org: string, invoice: InvoiceRecord) => Effect.Effect<boolean>
  /** Pending changes past their expiry: voided (the renewals worker, before renewing). How many. */
  readonly expireDue: (now: number) => Effect.Effect<number>
  /**
   * Inside the renewal's transaction, the row claimed: the subscription on its scheduled plan when the period that
   * ends is the one the change waits for (the switch announced), else as it was.
   */
  readonly switchAtRenewal: (s: SubscriptionRecord, now: number) => Effect.Effect<SubscriptionRecord>
}

export class PlanChanges extends Context.Tag("PlanChanges")<PlanChanges, PlanChangesShape>() {}

const subscriptionNotFound = (id: string) =>
  new NotFound({ code: "subscription_not_found", message: `No subscription '${id}'` })

const inProgress = (plan: string) =>
  new Conflict({
    code: "change_in_progress",
    message: `A change to ${plan} is waiting for its payment: pay it, or withdraw it with cancel-change first`
  })

/**
 * A paid plan whose period has ended is being renewed (the renewals worker charges it): a change now would prorate a
 * period that is over and race the renewal's invoice, so it waits for the renewal.
 */
const renewalDue = (s: SubscriptionRecord, from: Plan, now: number) =>
  !isFree(from) && s.currentPeriodEnd !== null && s.currentPeriodEnd <= now && s.status !== "past_due"

const renewing = () =>
  new Conflict({
    code: "change_in_progress",
    message: "The subscription's period has ended and its renewal is being charged: retry the change in a moment"
  })

/** A free plan's period rolls lazily (nothing renews it): the change prorates the period in force now. */
const subscriptionNow = (s: SubscriptionRecord, from: Plan, now: number) =>
  isFree(from) ? rollFreePeriod(s, from.interval, now) : s

const clearedChange = { scheduledPlanId: null, scheduledAt: null } as const
const clearedPending = { pendingPlanId: null, pendingInvoiceId: null, pendingExpiresAt: null } as const

/** How often a change retries when the pending invoice it locked was replaced meanwhile. */
const LOCK_TRIES = 5

export const PlanChangesLive = Layer.effect(
  PlanChanges,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* SubscriptionsRepo
    const catalog = yield* Catalog
    const invoices = yield* Invoices
    const payments = yield* Payments
    const credit = yield* CreditBalance
    const outbox = yield* Outbox
    const subscriptionDiscounts = yield* SubscriptionDiscounts

    const plans = (org: string) => Effect.map(catalog.snapshot(org), (snap) => snap.plansById)

    const announce = (
      type: "subscription.updated" | "subscription.change_scheduled" | "subscription.change_canceled",
      s: SubscriptionRecord,
      extra: Record<string, unknown> = {}
    ) =>
      Effect.gen(function* () {
        const byId = yield* plans(s.organizationId)
        yield* outbox.emit(s.organizationId, {
          type,
          data: { ...toWireSubscription(s, byId.get(s.planId), byId), ...extra },
          customerId: s.customerId,
          subjectId: s.id
        })
      })

    /**
     * Runs `body` in a transaction over the subscription's locked row, with its pending invoice (if any) locked
     * before it. A pending invoice that changed between the unlocked read and the locks is locked afresh.
     */
    const withLocked = <A, E>(
      org: string,
      id: string,
      body: (s: SubscriptionRecord) => Effect.Effect<A, E>
    ): Effect.Effect<A, E | NotFound> =>
      Effect.gen(function* () {
        for (let i = 0; i < LOCK_TRIES; i++) {
          const seen = yield* repo.get(org, id)
          if (Option.isNone(seen)) return yield* subscriptionNotFound(id)
          const invoiceId = seen.value.pendingInvoiceId ?? null
          const result = yield* sql
            .withTransaction(
              Effect.gen(function* () {
                if (invoiceId !== null) yield* invoices.lockPayable(org, invoiceId)
                const locked = yield* repo.getForUpdate(org, id)
                if (Option.isNone(locked)) return Option.some(yield* Effect.fail(subscriptionNotFound(id)))
                const pending = locked.value.pendingInvoiceId ?? null
                if (pending !== null && pending !== invoiceId) return Option.none()
                return Option.some(yield* body(locked.value))
              })
            )
            .pipe(Effect.catchTag("SqlError", Effect.die))
          if (Option.isSome(result)) return result.value
        }
        return yield* Effect.dieMessage("plan change: the subscription's pending change kept changing")
      })

    /** The subscription on plan `to` from now on, with the proposal's period; announced with its previous plan. */
    const switchNow = (s: SubscriptionRecord, from: Plan, to: Plan, period: Proposal["period"], now: number) =>
      Effect.gen(function* () {
        const next: SubscriptionRecord = {
          ...s,
          ...period,
          ...withStartedAt(s, period.startedAt),
          ...clearedChange,
          ...clearedPending,
          planId: to.id,
          updatedAt: now
        }
        yield* repo.update(next)
        yield* announce("subscription.updated", next, { previousPlan: from.slug })
        return next
      })

    /** Voids the pending change's invoice (giving back the credit it spent) and clears it; in `withLocked`. */
    const dropPending = (s: SubscriptionRecord, reason: "canceled" | "expired" | "replaced", now: number) =>
      Effect.gen(function* () {
        if (s.pendingInvoiceId == null) return s
        yield* invoices.voidInvoice(s.organizationId, s.pendingInvoiceId)
        const next: SubscriptionRecord = { ...s, ...clearedPending, updatedAt: now }
        yield* repo.update(next)
        yield* announce("subscription.change_canceled", next, { reason })
        return next
      })

    /** The plans of a subscription and its target, or 404 for a plan the catalog no longer has. */
    const plansOf = (org: string, s: SubscriptionRecord) =>
      Effect.gen(function* () {
        const byId = yield* plans(org)
        const from = byId.get(s.planId)
        if (from === undefined) {
          return yield* new NotFound({ code: "plan_not_found", message: `No plan '${s.planId}'` })
        }
        return { from, byId }
      })

    const refuse = (p: { code: "subscription_past_due" | "change_not_possible"; message: string }) =>
      new Conflict({ code: p.code, message: p.message })

    /**
     * The proposal for changing `s` from `from` to `to` at `now`, over the customer's credit balance in the change's
     * currency, its lines priced as the invoice will price them (the coupon the attach names in place of the
     * subscription's discount, then the customer's; taxes): one function for the change and its preview, so that a
     * preview is exactly what the change would do.
     */
    const proposeNow = (org: string, s: SubscriptionRecord, from: Plan, to: Plan, input: ChangeInput, now: number) =>
      Effect.gen(function* () {
        const currency = (to.currency ?? from.currency ?? "NGN").toUpperCase()
        const balance = yield* credit.balance(org, s.customerId, currency)
        const proposal = propose({
          subscription: subscriptionNow(s, from, now),
          from,
          to,
          request: input,
          now,
          balance
        })
        if (isRefusal(proposal)) return yield* refuse(proposal)
        if (proposal.lines.length === 0) return proposal
        const priced = yield* invoices.quote(org, s.customerId, proposal.currency, proposal.lines, {
          subscriptionId: s.id,
          ...(input.redeem === undefined ? {} : { coupon: input.redeem.coupon })
        })
        return withPricing(proposal, priced, balance)
      })

    /**
     * The attach's coupon, counted and bound to the subscription in the change's transaction (exactly once: a repeat
     * that changes nothing does not get here); refused when its limit was reached meanwhile, rolling the change back.
     */
    const redeemFor = (org: string, s: SubscriptionRecord, input: ChangeInput, now: number) =>
      input.redeem === undefined
        ? Effect.void
        : Effect.gen(function* () {
            yield* countRedemption(sql, org, input.redeem!).pipe(Effect.catchTag("SqlError", Effect.die))
            yield* subscriptionDiscounts.bind(org, s.id, input.redeem!, invoicesOf(input.redeem!.coupon), now)
          })

    type Decided =
      | {
          readonly _tag: "Done"
          readonly subscription: SubscriptionRecord
          readonly message: string
          readonly invoice?: InvoiceRecord
        }
      | { readonly _tag: "Collect"; readonly subscription: SubscriptionRecord; readonly invoiceId: string }

    /** Inside the locks: decide and write. */
    const decide = (
      org: string,
      s: SubscriptionRecord,
      from: Plan,
      to: Plan,
      input: ChangeInput,
      now: number
    ): Effect.Effect<Decided, Conflict | Unprocessable> =>
      Effect.gen(function* () {
        // The current plan again: whatever change was waiting is withdrawn.
        if (to.id === s.planId) {
          let next = yield* dropPending(s, "replaced", now)
          if (next.scheduledPlanId != null) {
            next = { ...next, ...clearedChange, updatedAt: now }
            yield* repo.update(next)
            yield* announce("subscription.change_canceled", next, { reason: "replaced" })
          }
          return { _tag: "Done", subscription: next, message: `${to.slug} was already attached` }
        }
        if (s.pendingPlanId != null) {
          // The same change again answers as the first did; another one waits for it.
          if (s.pendingPlanId === to.id) return { _tag: "Collect", subscription: s, invoiceId: s.pendingInvoiceId! }
          return yield* inProgress((yield* plans(org)).get(s.pendingPlanId)?.slug ?? s.pendingPlanId)
        }
        if (renewalDue(s, from, now)) return yield* renewing()
        const proposal = yield* proposeNow(org, s, from, to, input, now)

        if (proposal.when === "period_end") {
          if (s.scheduledPlanId === to.id) {
            return { _tag: "Done", subscription: s, message: `A change to ${to.slug} is already scheduled` }
          }
          yield* redeemFor(org, s, input, now)
          // A scheduled change and a cancellation at period end replace each other (§14).
          const next: SubscriptionRecord = {
            ...s,
            scheduledPlanId: to.id,
            scheduledAt: proposal.effectiveAt,
            cancelAtPeriodEnd: false,
            updatedAt: now
          }
          yield* repo.update(next)
          yield* announce("subscription.change_scheduled", next)
          return {
            _tag: "Done",
            subscription: next,
            message: `${to.slug} takes over at the period end (${new Date(proposal.effectiveAt).toISOString()})`
          }
        }

        yield* redeemFor(org, s, input, now)
        if (proposal.lines.length === 0) {
          const next = yield* switchNow(s, from, to, proposal.period, now)
          return { _tag: "Done", subscription: next, message: `Changed to ${to.slug}` }
        }
        const invoice = yield* invoices.createInvoice(org, s.customerId, proposal.currency, proposal.lines, {
          subscriptionId: s.id,
          periodStart: now,
          periodEnd: proposal.period.currentPeriodEnd ?? now
        })
        if (proposal.surplus > 0n) {
          yield* credit.add(org, s.customerId, proposal.currency, proposal.surplus, "plan_change", invoice.id)
        }
        if (invoice.status === "paid") {
          const next = yield* switchNow(s, from, to, proposal.period, now)
          const message =
            proposal.surplus > 0n
              ? `Changed to ${to.slug}: ${proposal.surplus} ${proposal.currency} (minor units) went to the credit balance`
              : `Changed to ${to.slug}: the credit balance paid the prorated invoice`
          return { _tag: "Done", subscription: next, message, invoice }
        }
        // The old plan stays in force until the net charge is paid.
        const expiresAt = Math.min(now + PENDING_CHANGE_MS, s.currentPeriodEnd ?? Number.MAX_SAFE_INTEGER)
        const next: SubscriptionRecord = {
          ...s,
          ...clearedChange,
          pendingPlanId: to.id,
          pendingInvoiceId: invoice.id,
          pendingExpiresAt: expiresAt,
          updatedAt: now
        }
        yield* repo.update(next)
        return { _tag: "Collect", subscription: next, invoiceId: invoice.id }
      })

    /** Collects a pending change's invoice as any invoice: the saved method, else a checkout. */
    const collect = (
      org: string,
      customer: CustomerRecord,
      s: SubscriptionRecord,
      from: Plan,
      to: Plan,
      invoiceId: string,
      input: ChangeInput
    ): Effect.Effect<ChangeOutcome, ChangeError> =>
      Effect.gen(function* () {
        const invoice = yield* invoices.get(org, invoiceId)
        const due = BigInt(invoice.total) - BigInt(invoice.creditApplied) - BigInt(invoice.amountPaid)
        const result =
          invoice.status !== "open"
            ? ({ _tag: "NotPayable" } as const)
            : yield* payments.collect(org, customer, {
                purpose: "invoice",
                targetId: invoice.id,
                amount: Number(due),
                currency: invoice.currency,
                description: `Change to ${to.name} (invoice ${invoice.number})`,
                callbackUrl: input.callbackUrl ?? null,
                provider: to.provider,
                payable: invoices.lockPayable(org, invoice.id),
                ...(input.idempotency === undefined ? {} : { idempotency: input.idempotency })
              })
        const after = Option.getOrElse(yield* repo.get(org, s.id), () => s)
        const byId = yield* plans(org)
        const inForce = byId.get(after.planId) ?? from
        const latest = yield* invoices.get(org, invoiceId)
        const base = { subscription: after, plan: inForce, invoice: latest, reference: null, accessCode: null }
        switch (result._tag) {
          case "Paid":
          case "NotPayable":
            return {
              ...base,
              checkoutUrl: null,
              message:
                after.planId === to.id
                  ? `Changed to ${to.slug}: the prorated invoice is paid`
                  : `The change to ${to.slug} is no longer waiting for payment (its invoice is ${latest.status})`
            }
          case "Processing":
            return {
              ...base,
              checkoutUrl: null,
              reference: result.reference,
              code: "payment_processing" as const,
              message: `The change's payment is in progress; ${to.slug} takes over once it is confirmed`
            }
          case "Checkout":
            return {
              ...base,
              checkoutUrl: result.checkoutUrl,
              reference: result.reference,
              accessCode: result.accessCode,
              message: `Pay the prorated invoice to move to ${to.slug}; ${from.slug} stays in force until then`
            }
          case "Failed":
            return yield* new PaymentFailed({ message: result.message })
        }
      })

    const change: PlanChangesShape["change"] = (org, customer, current, to, input) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const decided = yield* withLocked(org, current.id, (s) =>
          Effect.gen(function* () {
            const { from } = yield* plansOf(org, s)
            return { decided: yield* decide(org, s, from, to, input, now), from }
          })
        )
        const { from } = decided
        if (decided.decided._tag === "Done") {
          const byId = yield* plans(org)
          const s = decided.decided.subscription
          return {
            subscription: s,
            plan: byId.get(s.planId) ?? from,
            checkoutUrl: null,
            reference: null,
            accessCode: null,
            message: decided.decided.message,
            ...(decided.decided.invoice === undefined ? {} : { invoice: decided.decided.invoice })
          }
        }
        return yield* collect(org, customer, decided.decided.subscription, from, to, decided.decided.invoiceId, input)
      })

    const preview: PlanChangesShape["preview"] = (org, current, to, input) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const { from } = yield* plansOf(org, current)
        if (current.pendingPlanId != null && current.pendingPlanId !== to.id && to.id !== current.planId) {
          return yield* inProgress((yield* plans(org)).get(current.pendingPlanId)?.slug ?? current.pendingPlanId)
        }
        if (renewalDue(current, from, now)) return yield* renewing()
        const proposal = yield* proposeNow(org, current, from, to, input, now)
        return { proposal, from, to }
      })

    const cancelChange: PlanChangesShape["cancelChange"] = (org, id) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        withLocked(org, id, (s) =>
          Effect.gen(function* () {
            let next = yield* dropPending(s, "canceled", now)
            if (next.scheduledPlanId != null) {
              next = { ...next, ...clearedChange, updatedAt: now }
              yield* repo.update(next)
              yield* announce("subscription.change_canceled", next, { reason: "canceled" })
            }
            return next
          })
        )
      )

    const invoicePaid: PlanChangesShape["invoicePaid"] = (org, invoice) =>
      Effect.gen(function* () {
        if (invoice.subscriptionId === null) return false
        const locked = yield* repo.getForUpdate(org, invoice.subscriptionId)
        if (Option.isNone(locked)) return false
        const s = locked.value
        if (s.pendingInvoiceId !== invoice.id || s.pendingPlanId == null) return false
        const byId = yield* plans(org)
        const from = byId.get(s.planId)
        const to = byId.get(s.pendingPlanId)
        if (from === undefined || to === undefined) return false
        const now = yield* Clock.currentTimeMillis
        if (invoice.createdAt < s.currentPeriodStart || (s.status !== "active" && s.status !== "trialing")) {
          // The period the change prorated is over (renewed meanwhile): the change lapses, and what was paid for it
          // is owed back to the customer, as credit.
          const next: SubscriptionRecord = { ...s, ...clearedPending, updatedAt: now }
          yield* repo.update(next)
          yield* credit.add(org, s.customerId, invoice.currency, BigInt(invoice.total), "plan_change", invoice.id)
          yield* announce("subscription.change_canceled", next, { reason: "period_ended" })
          return true
        }
        // An interval change's new period is the one its invoice charged for (from the change's request).
        const restarts = from.interval !== to.interval || from.billingType !== to.billingType
        const period =
          restarts && invoice.periodStart !== null
            ? {
                startedAt: invoice.periodStart,
                currentPeriodStart: invoice.periodStart,
                currentPeriodEnd:
                  to.billingType === "recurring" && to.interval !== null
                    ? addInterval(invoice.periodStart, to.interval, 1)
                    : null
              }
            : { startedAt: s.startedAt, currentPeriodStart: s.currentPeriodStart, currentPeriodEnd: s.currentPeriodEnd }
        yield* switchNow(s, from, to, period, now)
        return true
      })

    const expireDue: PlanChangesShape["expireDue"] = (now) =>
      Effect.gen(function* () {
        const due = yield* sql<{ organizationId: string; id: string }>`SELECT organization_id, id FROM subscriptions
            WHERE pending_expires_at IS NOT NULL AND pending_expires_at <= ${now}
            ORDER BY pending_expires_at LIMIT 100`.pipe(Effect.orDie)
        let expired = 0
        for (const row of due) {
          const done = yield* withLocked(row.organizationId, row.id, (s) =>
            s.pendingExpiresAt != null && s.pendingExpiresAt <= now
              ? Effect.as(dropPending(s, "expired", now), true)
              : Effect.succeed(false)
          ).pipe(Effect.catchTag("NotFound", () => Effect.succeed(false)))
          if (done) expired++
        }
        return expired
      })

    const switchAtRenewal: PlanChangesShape["switchAtRenewal"] = (s, now) =>
      Effect.gen(function* () {
        if (s.scheduledPlanId == null || s.scheduledAt == null || s.currentPeriodEnd === null) return s
        if (s.scheduledAt > s.currentPeriodEnd || s.cancelAtPeriodEnd) return s
        const byId = yield* plans(s.organizationId)
        const from = byId.get(s.planId)
        const to = byId.get(s.scheduledPlanId)
        if (to === undefined) return { ...s, ...clearedChange }
        // The new plan's periods start at the switch when its interval differs (its anchor restarts there).
        const restarts = from === undefined || from.interval !== to.interval || from.billingType !== to.billingType
        const next: SubscriptionRecord = {
          ...s,
          ...clearedChange,
          planId: to.id,
          ...withStartedAt(s, restarts ? s.currentPeriodEnd : s.startedAt),
          updatedAt: now
        }
        yield* announce("subscription.updated", next, { previousPlan: from?.slug ?? s.planId })
        return next
      })

    return { change, preview, cancelChange, invoicePaid, expireDue, switchAtRenewal }
  })
)
