import type { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { OutboxShape } from "../events/Outbox.ts"
import type { IdsShape } from "../platform/ids.ts"
import type { MethodSaver } from "./methods.ts"
import type { MethodDetails, ProviderEvent, ProviderName, VerifyResult } from "./PaymentProvider.ts"
import { type PaidTarget, PaymentEffects } from "./PaymentEffects.ts"
import type { CheckoutRecord, PaymentRecord, PaymentsRepoShape, Purpose } from "./PaymentsRepo.ts"

/** A provider that never heard of a reference this long after we claimed it never received the request. */
export const NEVER_RECEIVED_MS = 15 * 60_000
/** An open hosted page nobody paid within this long is closed (a later payment there is still recorded). */
export const CHECKOUT_EXPIRY_MS = 7 * 86_400_000

export interface Settlement {
  /** A processing attempt (or one wrongly thought failed) succeeded: record it and apply its effect, once. */
  readonly succeeded: (
    org: string,
    attempt: PaymentRecord,
    found: { readonly providerReference: string | null; readonly method: MethodDetails | null }
  ) => Effect.Effect<boolean>
  readonly failed: (org: string, reference: string, message: string, now: number) => Effect.Effect<boolean>
  /** A verified provider event, inside the webhook's transaction: `false` when it changed nothing. */
  readonly applyEvent: (org: string, provider: ProviderName, event: ProviderEvent) => Effect.Effect<boolean>
  /** What the reconciler learned by asking the provider. */
  readonly fromVerify: (
    item:
      | { readonly kind: "payment"; readonly p: PaymentRecord }
      | { readonly kind: "checkout"; readonly c: CheckoutRecord },
    verified: VerifyResult,
    now: number
  ) => Effect.Effect<boolean>
}

const sameMoney = (
  expected: { readonly amount: string; readonly currency: string },
  amount: number,
  currency: string
) => String(amount) === expected.amount && currency.toUpperCase() === expected.currency.toUpperCase()

export const makeSettlement = (
  sql: SqlClient.SqlClient,
  repo: PaymentsRepoShape,
  methods: MethodSaver,
  ids: IdsShape,
  outbox: OutboxShape
): Settlement => {
  /** An attempt that failed, told to what it paid for (an invoice announces it), in the caller's transaction. */
  const onFailure = (org: string, purpose: Purpose, target: PaidTarget, message: string) =>
    Effect.gen(function* () {
      const effect = (yield* PaymentEffects).failed?.[purpose]
      if (effect !== undefined) yield* effect(org, { ...target, message })
    })

  /** A payment as its events carry it (decisions.md §11, README "Events"). */
  const paymentData = (p: PaymentRecord, changes: { readonly amountRefunded: string; readonly disputed: boolean }) => ({
    reference: p.reference,
    customerId: p.customerId,
    provider: p.provider,
    purpose: p.purpose,
    targetId: p.targetId,
    amount: Number(p.amount),
    currency: p.currency,
    amountRefunded: Number(changes.amountRefunded),
    disputed: changes.disputed,
    createdAt: p.createdAt
  })
  /** The paid-for object's effect; `false` when it could no longer take the payment. */
  const apply = (org: string, purpose: Purpose, paid: PaidTarget) =>
    Effect.gen(function* () {
      const effect = (yield* PaymentEffects).paid[purpose]
      const outcome = effect === undefined ? true : yield* effect(org, paid)
      if (typeof outcome === "object") {
        // Settled once (the guarded settle above), so this is the payment's only invoice; a second would be a defect
        // that rolls the whole settlement back rather than record money twice.
        if (!(yield* repo.linkInvoice(org, paid.reference, outcome.invoiceId))) {
          return yield* Effect.dieMessage("a first payment was recorded as a second invoice")
        }
        return true
      }
      const applied = outcome
      if (!applied) {
        yield* repo.markUnapplied(org, paid.reference)
        yield* Effect.logError("payment received for something no longer payable: recorded, not applied", {
          organization: org,
          reference: paid.reference,
          purpose
        })
      }
      return applied
    })

  const paidOf = (r: PaymentRecord | CheckoutRecord): PaidTarget => ({
    customerId: r.customerId,
    targetId: r.targetId,
    quantity: r.quantity,
    amount: r.amount,
    currency: r.currency,
    reference: r.reference,
    invoiceQuote: "data" in r ? quoteOfCheckout(r) : r.invoiceQuote,
    invoiceId: "data" in r ? null : r.invoiceId
  })

  /** The quote a hosted page was opened with (a first payment's), which its payment carries. */
  const quoteOfCheckout = (c: CheckoutRecord): Record<string, unknown> | null => {
    const quote = c.data.invoiceQuote
    return typeof quote === "object" && quote !== null && !Array.isArray(quote)
      ? (quote as Record<string, unknown>)
      : null
  }

  /** The payment record of a hosted page's outcome (a succeeded payment unless the caller says otherwise). */
  const paymentOf = (org: string, c: CheckoutRecord, now: number): PaymentRecord => ({
    organizationId: org,
    id: "",
    reference: c.reference,
    provider: c.provider,
    purpose: c.purpose,
    customerId: c.customerId,
    targetId: c.targetId,
    quantity: c.quantity,
    amount: c.amount,
    currency: c.currency,
    status: "succeeded",
    providerReference: null,
    failureMessage: null,
    methodId: null,
    idempotencyKey: null,
    requestHash: null,
    applied: true,
    amountRefunded: "0",
    disputed: false,
    checkedAt: null,
    settledAt: now,
    createdAt: now,
    updatedAt: now,
    invoiceQuote: quoteOfCheckout(c),
    invoiceId: null
  })

  const succeeded: Settlement["succeeded"] = (org, attempt, found) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const won = yield* repo.settle(org, attempt.reference, {
            status: "succeeded",
            providerReference: found.providerReference,
            failureMessage: null,
            now,
            fromFailed: true
          })
          if (!won) return false
          if (found.method !== null) yield* methods.save(org, attempt.customerId, attempt.provider, found.method)
          yield* apply(org, attempt.purpose, paidOf(attempt))
          return true
        })
      )
      .pipe(Effect.orDie)

  const failed: Settlement["failed"] = (org, reference, message, now) =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          const won = yield* repo.settle(org, reference, {
            status: "failed",
            providerReference: null,
            failureMessage: message,
            now,
            fromFailed: false
          })
          if (!won) return false
          const payment = yield* repo.findPayment(org, reference)
          if (Option.isSome(payment)) yield* onFailure(org, payment.value.purpose, paidOf(payment.value), message)
          return true
        })
      )
      .pipe(Effect.orDie)

  /** A hosted page was paid (or a card saved on it): complete it once, then record and apply the payment. */
  const completeCheckout = (org: string, checkout: CheckoutRecord, method: MethodDetails | null) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      if (!(yield* repo.completeCheckout(org, checkout.reference, now))) return false
      if (method !== null) yield* methods.save(org, checkout.customerId, checkout.provider, method)
      if (checkout.purpose === "setup") return true
      yield* repo.insertPayment({ ...paymentOf(org, checkout, now), id: yield* ids.next("pay") })
      yield* apply(org, checkout.purpose, paidOf(checkout))
      return true
    })

  const recordHostedFailure = (org: string, c: CheckoutRecord, message: string) =>
    Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const id = yield* ids.next("pay")
      yield* repo.insertPayment({
        ...paymentOf(org, c, now),
        id,
        reference: `${c.reference}.${id.replaceAll("_", "-")}`,
        status: "failed",
        failureMessage: message
      })
      yield* onFailure(org, c.purpose, paidOf(c), message)
    })

  const mismatch = (
    org: string,
    reference: string,
    expected: { amount: string; currency: string },
    amount: number,
    currency: string
  ) =>
    Effect.gen(function* () {
      const note = `The provider reported ${amount} ${currency.toUpperCase()}, expected ${expected.amount} ${expected.currency}`
      yield* repo.noteMismatch(org, reference, note, yield* Clock.currentTimeMillis)
      yield* Effect.logError("provider amount or currency does not match the attempt: recorded, not applied", {
        organization: org,
        reference,
        note
      })
      return false
    })

  /**
   * An event settles only what was paid through the provider it came from (issue 37 item 8): a reference is ours, not
   * the provider's, so another provider's event naming it (an organization's own account verifying an event about a
   * payment made through the simulated provider) is someone else's word about money it never held. Logged, not applied.
   */
  const fromItsProvider = (org: string, provider: ProviderName, record: PaymentRecord | CheckoutRecord) =>
    record.provider === provider
      ? Effect.succeed(true)
      : Effect.as(
          Effect.logWarning("provider event about a payment made through another provider: not applied", {
            organization: org,
            reference: record.reference,
            eventProvider: provider,
            paymentProvider: record.provider
          }),
          false
        )

  /**
   * Money of a settled payment went back (decisions.md §7). Each reversal is recorded under the provider's name for
   * it; the payment's `amount_refunded` becomes their sum, never more than it paid, and only the increase is undone:
   * a pack's credits in proportion. Subscriptions and invoices keep what the payment gave.
   */
  const refunded = (org: string, provider: ProviderName, event: Extract<ProviderEvent, { _tag: "Refunded" }>) =>
    Effect.gen(function* () {
      if (event.reference === null) return false
      const found = yield* repo.lockPayment(org, event.reference)
      if (Option.isSome(found) && !(yield* fromItsProvider(org, provider, found.value))) return false
      if (Option.isNone(found) || found.value.status !== "succeeded") {
        // Our own refund of a Paystack card-setup charge comes back this way: no payment, nothing to undo.
        const setup = Option.isNone(found) ? yield* repo.findCheckout(org, event.reference) : Option.none()
        if (Option.isSome(setup) && setup.value.purpose === "setup") return false
        yield* Effect.logWarning("refund or lost dispute of no settled payment: ignored", {
          organization: org,
          reference: event.reference
        })
        return false
      }
      const p = found.value
      if (
        event.currency.toUpperCase() !== p.currency.toUpperCase() ||
        !Number.isSafeInteger(event.amount) ||
        event.amount < 0
      ) {
        yield* Effect.logError("refund in another currency than the payment's: recorded nowhere", {
          organization: org,
          reference: p.reference,
          reported: `${event.amount} ${event.currency}`
        })
        return false
      }
      const now = yield* Clock.currentTimeMillis
      yield* repo.recordReversal(org, p.reference, {
        key: event.reversalKey,
        cause: event.cause,
        amount: String(event.amount),
        cumulative: event.cumulative,
        now
      })
      const newlyDisputed = event.cause === "dispute" && !p.disputed
      if (newlyDisputed) {
        yield* repo.markDisputed(org, p.reference, now)
        yield* outbox.emit(org, {
          type: "payment.disputed",
          data: paymentData(p, { amountRefunded: p.amountRefunded, disputed: true }),
          customerId: p.customerId,
          subjectId: p.reference
        })
      }
      const paid = BigInt(p.amount)
      const recorded = (yield* repo.reversals(org, p.reference)).reduce((sum, a) => sum + BigInt(a), 0n)
      const total = recorded < paid ? recorded : paid
      const increase = total - BigInt(p.amountRefunded)
      if (increase <= 0n) return newlyDisputed
      yield* repo.addRefund(org, p.reference, total.toString(), now)
      yield* outbox.emit(org, {
        type: "payment.refunded",
        data: {
          ...paymentData(p, { amountRefunded: total.toString(), disputed: p.disputed || event.cause === "dispute" }),
          refunded: Number(increase),
          cause: event.cause
        },
        customerId: p.customerId,
        subjectId: p.reference
      })
      const undo = (yield* PaymentEffects).refunded[p.purpose]
      if (p.applied && undo !== undefined) {
        yield* undo(org, {
          ...paidOf(p),
          refunded: increase.toString(),
          cause: event.cause,
          reversalKey: event.reversalKey,
          reason: event.reason ?? null
        })
      }
      return true
    })

  const disputed = (org: string, provider: ProviderName, event: Extract<ProviderEvent, { _tag: "Disputed" }>) =>
    Effect.gen(function* () {
      if (event.reference === null) return false
      const found = yield* repo.lockPayment(org, event.reference)
      if (Option.isNone(found) || found.value.disputed) return false
      if (!(yield* fromItsProvider(org, provider, found.value))) return false
      yield* repo.markDisputed(org, event.reference, yield* Clock.currentTimeMillis)
      yield* outbox.emit(org, {
        type: "payment.disputed",
        data: paymentData(found.value, { amountRefunded: found.value.amountRefunded, disputed: true }),
        customerId: found.value.customerId,
        subjectId: found.value.reference
      })
      return true
    })

  const applyEvent: Settlement["applyEvent"] = (org, provider, event) =>
    Effect.gen(function* () {
      if (event._tag === "Ignored") return false
      if (event._tag === "Refunded") return yield* refunded(org, provider, event)
      if (event._tag === "Disputed") return yield* disputed(org, provider, event)
      const payment = yield* repo.findPayment(org, event.reference)
      if (Option.isSome(payment)) {
        const p = payment.value
        if (!(yield* fromItsProvider(org, provider, p))) return false
        if (event._tag === "PaymentFailed") {
          return (
            p.status === "processing" &&
            (yield* failed(org, p.reference, event.message, yield* Clock.currentTimeMillis))
          )
        }
        if (event._tag === "PaymentSucceeded" && !sameMoney(p, event.amount, event.currency)) {
          return yield* mismatch(org, p.reference, p, event.amount, event.currency)
        }
        if (p.status === "succeeded") return false
        return yield* succeeded(org, p, { providerReference: null, method: event.method })
      }
      const checkout = yield* repo.findCheckout(org, event.reference)
      if (Option.isNone(checkout)) return false
      const c = checkout.value
      if (!(yield* fromItsProvider(org, provider, c))) return false
      if (event._tag === "PaymentFailed") {
        // A declined card on a hosted page: the page stays payable (the customer may try another card), and the
        // failure is kept in the payment history.
        yield* recordHostedFailure(org, c, event.message)
        return true
      }
      if (event._tag === "PaymentSucceeded" && !sameMoney(c, event.amount, event.currency)) {
        return yield* mismatch(org, c.reference, c, event.amount, event.currency)
      }
      return yield* completeCheckout(org, c, event.method)
    })

  const fromVerify: Settlement["fromVerify"] = (item, verified, now) =>
    Effect.gen(function* () {
      const reported =
        verified.amount !== undefined && verified.currency !== undefined
          ? { amount: verified.amount, currency: verified.currency }
          : null
      if (item.kind === "payment") {
        const p = item.p
        const org = p.organizationId
        switch (verified.status) {
          case "succeeded":
            if (reported !== null && !sameMoney(p, reported.amount, reported.currency)) {
              return yield* mismatch(org, p.reference, p, reported.amount, reported.currency)
            }
            return yield* succeeded(org, p, { providerReference: null, method: null })
          case "failed":
            return yield* failed(org, p.reference, "The provider reports the payment failed", now)
          case "not_found":
            return (
              now - p.createdAt >= NEVER_RECEIVED_MS &&
              (yield* failed(org, p.reference, "The provider never received the charge", now))
            )
          case "pending":
            return false
        }
      }
      const c = item.c
      const org = c.organizationId
      switch (verified.status) {
        case "succeeded":
          if (reported !== null && c.purpose !== "setup" && !sameMoney(c, reported.amount, reported.currency)) {
            return yield* mismatch(org, c.reference, c, reported.amount, reported.currency)
          }
          return yield* sql.withTransaction(completeCheckout(org, c, verified.method)).pipe(Effect.orDie)
        case "failed":
          return yield* repo.closeCheckout(org, c.reference, "failed", now)
        case "pending":
        case "not_found":
          return now - c.createdAt >= CHECKOUT_EXPIRY_MS && (yield* repo.closeCheckout(org, c.reference, "failed", now))
      }
    })

  return { succeeded, failed, applyEvent, fromVerify }
}
