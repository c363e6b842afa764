import { SqlClient } from "@effect/sql"
import { Cause, Clock, Context, Effect, Either, Layer, Option } from "effect"
import type { CustomerRecord } from "../customers/CustomersRepo.ts"
import { Conflict, NotFound, ProviderFailure, ProviderNotConfigured, Unprocessable } from "../domain/errors.ts"
import { Outbox } from "../events/Outbox.ts"
import { AppConfig } from "../platform/config.ts"
import { describeDefect } from "../platform/defects.ts"
import { Encryption } from "../platform/encryption.ts"
import { retryWriteConflicts } from "../platform/db/deadlocks.ts"
import { Ids } from "../platform/ids.ts"
import { Adapters } from "./Adapters.ts"
import type { SqlError } from "@effect/sql/SqlError"
import { type MethodSaver, makeMethodSaver } from "./methods.ts"
import type { PaymentAdapter, PaymentMetadata, ProviderError, ProviderEvent, ProviderName } from "./PaymentProvider.ts"
import { ProviderAccounts, type ResolvedAccount } from "./ProviderAccounts.ts"
import {
  type CheckoutRecord,
  type PaymentMethodRecord,
  type PaymentRecord,
  PaymentsRepo,
  type Purpose
} from "./PaymentsRepo.ts"
import { makeSettlement } from "./settlement.ts"
import { setupCharge } from "./setupCharge.ts"

export {
  type FailureEffect,
  type PaidTarget,
  type PaymentEffect,
  PaymentEffects,
  type RefundEffect,
  type RefundedTarget
} from "./PaymentEffects.ts"
export type { CheckoutRecord, PaymentMethodRecord } from "./PaymentsRepo.ts"

export interface CollectRequest {
  readonly purpose: Exclude<Purpose, "setup">
  readonly targetId: string
  /** Whole minor units. */
  readonly amount: number
  readonly currency: string
  readonly description: string
  readonly callbackUrl: string | null
  readonly provider: string | null
  readonly quantity?: number
  /** Charge a saved method only; no checkout fallback (renewals run with nobody present). */
  readonly offSessionOnly?: boolean
  /**
   * Locks the paid-for object inside the claim's transaction and says whether it can still be paid: the claim and
   * the settlement of another attempt then cannot interleave (an invoice paid a moment ago is not charged again).
   */
  readonly payable?: Effect.Effect<boolean>
  /** One attempt per key (a pack purchase's Idempotency-Key) instead of one per request. */
  readonly idempotency?: { readonly key: string; readonly requestHash: string }
  /** Never charge a saved method: answer an open page or open one (after another request's charge was declined). */
  readonly checkoutOnly?: boolean
  /**
   * The request repeats one that may have just been made (an identical attach that found the subscription pending):
   * a card declined for the target within the last minute is not charged again (see the claim).
   */
  readonly duplicate?: boolean
  /**
   * The priced invoice this payment becomes once settled (a subscription's first payment), opaque to payments: kept
   * with the attempt or its hosted page and handed to the purpose's effect, so the invoice has what was charged.
   */
  readonly invoiceQuote?: Record<string, unknown>
}

export type CollectResult =
  | { readonly _tag: "Paid"; readonly reference: string }
  /**
   * An attempt is in flight: its outcome is not known yet. `elsewhere`: it is another request's (found by the claim),
   * whose outcome `awaitOutcome` waits for.
   */
  | { readonly _tag: "Processing"; readonly reference: string; readonly elsewhere?: true }
  | {
      readonly _tag: "Checkout"
      readonly checkoutUrl: string
      readonly reference: string
      readonly accessCode: string | null
      readonly chargeFailure: string | null
    }
  /** `attempted: false`: nothing was charged (no saved method for an off-session collection). */
  | { readonly _tag: "Failed"; readonly message: string; readonly attempted?: boolean }
  /** `payable` said no: nothing was claimed. */
  | { readonly _tag: "NotPayable" }

/** A refund the vendor asks for (decisions.md §16): the whole refundable amount when `amount` is null. */
export interface RefundRequest {
  readonly amount: number | null
  readonly reason: string | null
  /** Names this refund: the request's Idempotency-Key, or a fresh id. */
  readonly key: string
}

export interface RefundOutcome {
  /** Minor units this refund moved (or, `pending`, asked the provider to move). */
  readonly amount: number
  /** `succeeded`: recorded now (the simulated provider); `pending`: recorded when the provider's refund event comes. */
  readonly status: "succeeded" | "pending"
}

export interface PaymentsShape {
  /** Fails as `collect` would when no provider can take the payment: checked before anything is created. */
  readonly ensureProvider: (org: string, provider: string | null) => Effect.Effect<void, ProviderNotConfigured>
  /** Charge the customer's saved method, else open a hosted checkout (decisions.md §7), moving money once. */
  readonly collect: (
    org: string,
    customer: CustomerRecord,
    request: CollectRequest
  ) => Effect.Effect<CollectResult, ProviderNotConfigured | ProviderFailure | Conflict>
  readonly setup: (
    org: string,
    customer: CustomerRecord,
    options: {
      readonly callbackUrl: string | null
      readonly provider: string | null
      /** The currency the provider's card-saving charge is made in, where it needs one (Paystack). */
      readonly currency?: string | null
    }
  ) => Effect.Effect<{ readonly url: string; readonly reference: string }, ProviderNotConfigured | ProviderFailure>
  /**
   * What another request's attempt (or hosted page) `reference` came to: polled until it leaves processing (a page:
   * until it has its URL), for at most the provider's timeout and a second; still `Processing` past that.
   */
  readonly awaitOutcome: (org: string, reference: string) => Effect.Effect<CollectResult>
  readonly methods: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<PaymentMethodRecord>>
  /** A hosted checkout (or setup) page by its reference, whatever its status. */
  readonly checkout: (org: string, reference: string) => Effect.Effect<Option.Option<CheckoutRecord>>
  readonly removeMethod: (
    org: string,
    customerId: string,
    methodId: string
  ) => Effect.Effect<void, NotFound | ProviderFailure>
  /** The customer's saved method becomes the default, the one charged first; not theirs or not active: 404. */
  readonly makeDefaultMethod: (org: string, customerId: string, methodId: string) => Effect.Effect<void, NotFound>
  /** A verified provider event's effects; runs inside the webhook's transaction. `false` = nothing to do. */
  readonly applyEvent: (org: string, provider: ProviderName, event: ProviderEvent) => Effect.Effect<boolean>
  /**
   * Settles attempts left processing and checkouts left open by asking their provider (a lost answer, a pending
   * charge, a hosted payment whose webhook never came). Safe in every process at once.
   */
  readonly reconcile: Effect.Effect<{ readonly settled: number; readonly stillProcessing: number }>
  /**
   * Gives back money of a target's settled payments through their provider: at most what they paid less what was
   * refunded (else `refund_exceeds_paid`); none settled: `invoice_not_refundable`. The simulated provider's refund is
   * recorded at once (with its credit note, through the refund effects); Paystack's and Stripe's when their refund
   * event arrives, as any refund made at the provider is. The same `key` again answers without refunding again.
   */
  readonly refund: (
    org: string,
    targetId: string,
    request: RefundRequest
  ) => Effect.Effect<RefundOutcome, Unprocessable | ProviderFailure | ProviderNotConfigured>
  /**
   * The target was paid for without a payment (a first payment the credit balance covered): its open hosted pages are
   * closed as `superseded`, as a saved-card charge closes them, so none is paid as well. The caller's transaction.
   */
  readonly supersedeCheckouts: (org: string, targetId: string) => Effect.Effect<void>
  /** What the payments of each target had refunded (refunds and lost disputes), for targets with any: minor units. */
  readonly refundedByTarget: (
    org: string,
    targetIds: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyMap<string, string>>
}

export class Payments extends Context.Tag("Payments")<Payments, PaymentsShape>() {}

const providerFailure = (e: ProviderError) =>
  new ProviderFailure({ message: `The payment provider failed (${e.reason}): ${e.message}` })

/** Attempts are re-verified this long after they were last looked at. */
const RECHECK_MS = 60_000
/** Open checkouts are verified less often: most are simply not paid yet. */
const CHECKOUT_RECHECK_MS = 10 * 60_000
const RECONCILE_BATCH = 50
/** A saved method declined for a target is not charged again by a duplicate request within this long. */
const DECLINE_HOLD_MS = 60_000
/** How often a request waiting for another's attempt looks again: a charge takes a provider round trip or more. */
const AWAIT_POLL_MS = 20

type Claimed =
  | { readonly kind: "answer"; readonly result: CollectResult }
  /** Another request took the same key or target a moment ago: claim again, to answer from its attempt. */
  | { readonly kind: "lost" }
  | { readonly kind: "charge"; readonly attempt: PaymentRecord; readonly method: PaymentMethodRecord }
  | { readonly kind: "open"; readonly checkout: CheckoutRecord }

export const PaymentsLive = Layer.effect(
  Payments,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* PaymentsRepo
    const accounts = yield* ProviderAccounts
    const adapters = yield* Adapters
    const encryption = yield* Encryption
    const ids = yield* Ids
    const outbox = yield* Outbox
    const config = yield* AppConfig
    const methodSaver: MethodSaver = makeMethodSaver(sql, repo, encryption, ids, outbox)
    const settlement = makeSettlement(sql, repo, methodSaver, ids, outbox)

    const adapterOf = (provider: ProviderName): Effect.Effect<PaymentAdapter, ProviderNotConfigured> => {
      const adapter = adapters.get(provider)
      return adapter === undefined
        ? Effect.fail(new ProviderNotConfigured({ message: `The provider '${provider}' is not available` }))
        : Effect.succeed(adapter)
    }

    const metadataFor = (
      org: string,
      customerId: string,
      purpose: Purpose,
      targetId: string,
      reference: string
    ): PaymentMetadata => ({
      organization_id: org,
      customer_id: customerId,
      purpose,
      target_id: targetId,
      reference
    })

    // A fresh reference per attempt, spent when claimed (never derived from a count that a lost answer leaves
    // unchanged); within Paystack's alphabet (letters, digits, '-', '.', '=').
    const newReference = Effect.map(ids.next("pay"), (id) => id.replaceAll("_", "-"))

    const emailOf = (customer: CustomerRecord, method?: PaymentMethodRecord) =>
      customer.email ?? method?.email ?? `${customer.id}@customers.invalid`

    /** What an existing attempt or checkout answers a request that finds it. */
    const elsewhere = (result: CollectResult): CollectResult =>
      result._tag === "Processing" ? { ...result, elsewhere: true } : result
    const answerFromCheckout = (c: CheckoutRecord): CollectResult =>
      c.status === "completed"
        ? { _tag: "Paid", reference: c.reference }
        : c.status === "open" && c.checkoutUrl !== null
          ? {
              _tag: "Checkout",
              checkoutUrl: c.checkoutUrl,
              reference: c.reference,
              accessCode: c.accessCode,
              chargeFailure: null
            }
          : c.status === "open"
            ? { _tag: "Processing", reference: c.reference }
            : { _tag: "Failed", message: "The checkout was not completed" }
    const answerFromPayment = (p: PaymentRecord): CollectResult =>
      p.status === "succeeded"
        ? { _tag: "Paid", reference: p.reference }
        : p.status === "processing"
          ? { _tag: "Processing", reference: p.reference }
          : { _tag: "Failed", message: p.failureMessage ?? "The payment failed" }

    const keyConflict = () =>
      new Conflict({ code: "idempotency_conflict", message: "This Idempotency-Key was used with a different request" })

    /**
     * The claim: one short transaction that decides what this request may do and records it before any provider
     * is called. Whoever finds an attempt already in flight answers from it.
     */
    const claim = (
      org: string,
      customer: CustomerRecord,
      provider: ProviderName,
      request: CollectRequest,
      allowCharge: boolean,
      retried = false
    ): Effect.Effect<Claimed, Conflict> =>
      // Run again when the database gave up on it before writing anything (a SQLite file shared by processes): the
      // claim only writes to the database, so running it again is safe.
      retryWriteConflicts(
        sql.withTransaction(
          Effect.gen(function* () {
            if (request.payable !== undefined && !(yield* request.payable)) {
              return { kind: "answer", result: { _tag: "NotPayable" } } satisfies Claimed
            }
            const targeted = request.purpose !== "addon"
            const key = request.idempotency
            if (key !== undefined) {
              const checkout = yield* repo.findCheckoutByKey(org, key.key)
              // The fallback page after a declined charge carries the key too: a repeat then answers that page. While
              // claiming it, the declined attempt under the same key is what is being replaced, not the answer.
              const payment = allowCharge ? yield* repo.findPaymentByKey(org, key.key) : Option.none<PaymentRecord>()
              const hash = Option.isSome(payment)
                ? payment.value.requestHash
                : Option.map(checkout, (c) => c.data.requestHash).pipe(Option.getOrNull)
              if ((Option.isSome(checkout) || Option.isSome(payment)) && hash !== key.requestHash)
                return yield* keyConflict()
              if (Option.isSome(checkout))
                return { kind: "answer", result: elsewhere(answerFromCheckout(checkout.value)) } satisfies Claimed
              if (Option.isSome(payment))
                return { kind: "answer", result: elsewhere(answerFromPayment(payment.value)) } satisfies Claimed
            }
            if (targeted) {
              const inFlight = yield* repo.inFlightFor(org, request.targetId)
              if (Option.isSome(inFlight))
                return { kind: "answer", result: elsewhere(answerFromPayment(inFlight.value)) } satisfies Claimed
            }
            const now = yield* Clock.currentTimeMillis
            const reference = yield* newReference
            // What the charge and the hosted page of this claim both record.
            const attemptOf = (id: string) => ({
              organizationId: org,
              id,
              reference,
              provider,
              purpose: request.purpose,
              customerId: customer.id,
              targetId: request.targetId,
              quantity: request.quantity ?? 1,
              amount: String(request.amount),
              currency: request.currency
            })
            const saved = allowCharge
              ? (yield* repo.activeMethods(org, customer.id)).find((m) => m.provider === provider)
              : undefined
            // A duplicate of a request whose charge of this card was just declined does not charge it again: that
            // request's answer (the hosted page below) is the outcome.
            const method =
              saved !== undefined &&
              targeted &&
              request.duplicate === true &&
              (yield* repo.declinedSince(org, request.targetId, saved.id, now - DECLINE_HOLD_MS))
                ? undefined
                : saved
            if (method !== undefined) {
              // A page opened earlier for the same thing must not be paid as well: a late payment there is recorded and
              // not applied (see settlement.ts).
              if (targeted) yield* repo.supersedeCheckouts(org, request.targetId, now)
              const attempt: PaymentRecord = {
                ...attemptOf(yield* ids.next("pay")),
                status: "processing",
                providerReference: null,
                failureMessage: null,
                methodId: method.id,
                idempotencyKey: key?.key ?? null,
                requestHash: key?.requestHash ?? null,
                applied: true,
                amountRefunded: "0",
                disputed: false,
                checkedAt: null,
                settledAt: null,
                createdAt: now,
                updatedAt: now,
                invoiceQuote: request.invoiceQuote ?? null,
                invoiceId: null
              }
              if (!(yield* repo.insertPayment(attempt))) return { kind: "lost" } satisfies Claimed
              return { kind: "charge", attempt, method } satisfies Claimed
            }
            if (targeted) {
              const open = yield* repo.openCheckoutFor(org, request.targetId)
              if (Option.isSome(open))
                return { kind: "answer", result: elsewhere(answerFromCheckout(open.value)) } satisfies Claimed
            }
            if (request.offSessionOnly === true) {
              return {
                kind: "answer",
                result: { _tag: "Failed", message: "No saved payment method", attempted: false }
              } satisfies Claimed
            }
            const checkout: CheckoutRecord = {
              ...attemptOf(yield* ids.next("chk")),
              status: "open",
              checkoutUrl: null,
              accessCode: null,
              data: {
                description: request.description,
                callbackUrl: request.callbackUrl,
                ...(key === undefined ? {} : { requestHash: key.requestHash }),
                ...(request.invoiceQuote === undefined ? {} : { invoiceQuote: request.invoiceQuote })
              },
              idempotencyKey: key?.key ?? null,
              createdAt: now,
              updatedAt: now
            }
            if (!(yield* repo.insertCheckout(checkout))) return { kind: "lost" } satisfies Claimed
            return { kind: "open", checkout } satisfies Claimed
          })
        )
      ).pipe(
        // Two claimers of one key (or one target without a `payable` lock) raced to insert: the loser, once the
        // winner has committed, finds its attempt and answers from it.
        Effect.flatMap((claimed): Effect.Effect<Claimed, SqlError | Conflict> =>
          claimed.kind === "lost" && !retried
            ? claim(org, customer, provider, request, allowCharge, true)
            : Effect.succeed(claimed)
        ),
        Effect.catchTag("SqlError", Effect.die)
      )

    /** The hosted page of a claimed checkout, from the provider. */
    const openPage = (
      org: string,
      customer: CustomerRecord,
      resolved: ResolvedAccount,
      checkout: CheckoutRecord,
      mode: "payment" | "setup"
    ) =>
      Effect.gen(function* () {
        const adapter = yield* adapterOf(resolved.account.provider)
        const method = (yield* repo.activeMethods(org, customer.id)).find(
          (m) => m.provider === resolved.account.provider
        )
        const session = yield* adapter
          .createCheckout(resolved.account, {
            reference: checkout.reference,
            mode,
            amount: Number(checkout.amount),
            currency: checkout.currency,
            email: emailOf(customer),
            description: String(checkout.data.description ?? ""),
            callbackUrl: (checkout.data.callbackUrl as string | null | undefined) ?? null,
            providerCustomerId: method?.providerCustomerId ?? null,
            metadata: metadataFor(org, customer.id, checkout.purpose, checkout.targetId, checkout.reference)
          })
          .pipe(
            Effect.tapError(() =>
              Effect.flatMap(Clock.currentTimeMillis, (now) =>
                repo.closeCheckout(org, checkout.reference, "failed", now)
              )
            ),
            Effect.mapError(providerFailure)
          )
        yield* repo.setCheckoutPage(
          org,
          checkout.id,
          session.checkoutUrl,
          session.accessCode,
          yield* Clock.currentTimeMillis
        )
        return session
      })

    /** Calls the provider for a claimed charge and settles what its answer settles. */
    const charge = (
      org: string,
      customer: CustomerRecord,
      resolved: ResolvedAccount,
      attempt: PaymentRecord,
      method: PaymentMethodRecord
    ) =>
      Effect.gen(function* () {
        const adapter = yield* adapterOf(resolved.account.provider)
        const answer = yield* adapter
          .charge(resolved.account, {
            reference: attempt.reference,
            amount: Number(attempt.amount),
            currency: attempt.currency,
            email: emailOf(customer, method),
            method: {
              token: encryption.decrypt(method.token),
              providerCustomerId: method.providerCustomerId,
              email: method.email
            },
            metadata: metadataFor(org, customer.id, attempt.purpose, attempt.targetId, attempt.reference)
          })
          .pipe(Effect.either)
        const now = yield* Clock.currentTimeMillis
        if (Either.isLeft(answer)) {
          const e = answer.left
          // No answer, or one that does not say whether money moved: the attempt stays processing and is settled
          // by the webhook or the reconciler, never charged again blindly.
          if (e.reason === "timeout" || e.reason === "unavailable" || e.reason === "duplicate") {
            yield* Effect.logWarning("charge outcome unknown; left processing", {
              reference: attempt.reference,
              reason: e.reason
            })
            return { _tag: "Processing", reference: attempt.reference } as const
          }
          yield* settlement.failed(org, attempt.reference, `${e.reason}: ${e.message}`, now)
          return yield* Effect.fail(providerFailure(e))
        }
        const result = answer.right
        switch (result._tag) {
          case "Succeeded": {
            yield* settlement.succeeded(org, attempt, { providerReference: result.providerReference, method: null })
            return { _tag: "Paid", reference: attempt.reference } as const
          }
          case "Pending":
            yield* repo.touchProcessing(org, attempt.reference, result.providerReference, now)
            return { _tag: "Processing", reference: attempt.reference } as const
          case "MethodGone":
            yield* methodSaver.markUnusable(org, method.id, now)
            yield* settlement.failed(org, attempt.reference, result.message, now)
            return { _tag: "Declined", message: result.message } as const
          case "Declined":
          case "ActionRequired":
            yield* settlement.failed(org, attempt.reference, result.message, now)
            return { _tag: "Declined", message: result.message } as const
        }
      })

    const collect: PaymentsShape["collect"] = (org, customer, request) =>
      Effect.gen(function* () {
        // Providers take whole minor units as JSON numbers: one past 2^53 would already be rounded (callers bound
        // their amounts with assertMoneyFitsJson; this is the last line before money leaves).
        if (!Number.isSafeInteger(request.amount) || request.amount < 0) {
          return yield* Effect.dieMessage(`collect: ${request.amount} is not a whole amount a provider can be sent`)
        }
        const resolved = yield* accounts.resolve(org, request.provider)
        yield* adapterOf(resolved.account.provider)
        const provider = resolved.account.provider
        const first = yield* claim(org, customer, provider, request, request.checkoutOnly !== true)
        let chargeFailure: string | null = null
        let claimed: Claimed = first
        if (first.kind === "charge") {
          const outcome = yield* charge(org, customer, resolved, first.attempt, first.method)
          if (outcome._tag !== "Declined") return outcome
          chargeFailure = outcome.message
          if (request.offSessionOnly === true) return { _tag: "Failed", message: outcome.message } as const
          // The saved method failed with the customer absent: a hosted page, claimed like any attempt.
          claimed = yield* claim(org, customer, provider, request, false)
        }
        if (claimed.kind === "answer") {
          return claimed.result._tag === "Checkout" ? { ...claimed.result, chargeFailure } : claimed.result
        }
        if (claimed.kind === "lost") return { _tag: "Processing", reference: "" } as const
        if (claimed.kind === "charge") return yield* Effect.die(new Error("a checkout claim never charges"))
        const session = yield* openPage(org, customer, resolved, claimed.checkout, "payment")
        return {
          _tag: "Checkout",
          checkoutUrl: session.checkoutUrl,
          reference: claimed.checkout.reference,
          accessCode: session.accessCode,
          chargeFailure
        } as const
      })

    const awaitOutcome: PaymentsShape["awaitOutcome"] = (org, reference) =>
      Effect.gen(function* () {
        const deadline = (yield* Clock.currentTimeMillis) + config.providerTimeoutMs + 1_000
        while (true) {
          const payment = yield* repo.findPayment(org, reference)
          const outcome = Option.isSome(payment)
            ? answerFromPayment(payment.value)
            : Option.match(yield* repo.findCheckout(org, reference), {
                onNone: (): CollectResult => ({ _tag: "Processing", reference }),
                onSome: answerFromCheckout
              })
          if (outcome._tag !== "Processing" || (yield* Clock.currentTimeMillis) >= deadline) return outcome
          yield* Effect.sleep(AWAIT_POLL_MS)
        }
      })

    const setup: PaymentsShape["setup"] = (org, customer, options) =>
      Effect.gen(function* () {
        const resolved = yield* accounts.resolve(org, options.provider)
        yield* adapterOf(resolved.account.provider)
        const { amount, currency } = setupCharge(resolved.account.provider, options.currency ?? null)
        const now = yield* Clock.currentTimeMillis
        const checkout: CheckoutRecord = {
          organizationId: org,
          id: yield* ids.next("chk"),
          reference: yield* newReference,
          provider: resolved.account.provider,
          purpose: "setup",
          customerId: customer.id,
          targetId: customer.id,
          quantity: 1,
          amount: String(amount),
          currency,
          status: "open",
          checkoutUrl: null,
          accessCode: null,
          data: { description: "Save a payment method", callbackUrl: options.callbackUrl },
          idempotencyKey: null,
          createdAt: now,
          updatedAt: now
        }
        yield* repo.insertCheckout(checkout)
        const session = yield* openPage(org, customer, resolved, checkout, "setup")
        return { url: session.checkoutUrl, reference: checkout.reference }
      })

    const removeMethod: PaymentsShape["removeMethod"] = (org, customerId, methodId) =>
      Effect.gen(function* () {
        const method = yield* repo.findMethod(org, methodId)
        if (Option.isNone(method) || method.value.customerId !== customerId || method.value.status !== "active") {
          return yield* new NotFound({ code: "payment_method_not_found", message: `No payment method '${methodId}'` })
        }
        const m = method.value
        const resolved = yield* accounts.forWebhook(org, m.provider)
        const adapter = adapters.get(m.provider)
        if (Option.isSome(resolved) && adapter !== undefined) {
          yield* adapter
            .removeMethod(resolved.value.account, {
              token: encryption.decrypt(m.token),
              providerCustomerId: m.providerCustomerId,
              email: m.email
            })
            .pipe(Effect.mapError(providerFailure))
        }
        yield* methodSaver.remove(org, methodId, yield* Clock.currentTimeMillis)
      })

    // Ours alone: charges pick the method themselves (the default first), so no provider needs telling.
    const makeDefaultMethod: PaymentsShape["makeDefaultMethod"] = (org, customerId, methodId) =>
      Effect.gen(function* () {
        const done = yield* methodSaver.makeDefault(org, customerId, methodId, yield* Clock.currentTimeMillis)
        if (!done) {
          return yield* new NotFound({ code: "payment_method_not_found", message: `No payment method '${methodId}'` })
        }
      })

    /** Asks the provider about one stale attempt or checkout and settles what it says. */
    const reconcileOne = (
      item:
        | { readonly kind: "payment"; readonly p: PaymentRecord }
        | { readonly kind: "checkout"; readonly c: CheckoutRecord }
    ) =>
      Effect.gen(function* () {
        const record = item.kind === "payment" ? item.p : item.c
        const org = record.organizationId
        const resolved = yield* accounts.forWebhook(org, record.provider)
        const adapter = adapters.get(record.provider)
        if (Option.isNone(resolved) || adapter === undefined) return false
        const asked = item.kind === "payment" ? (item.p.providerReference ?? item.p.reference) : item.c.reference
        const verified = yield* adapter.verify(resolved.value.account, asked).pipe(Effect.either)
        if (Either.isLeft(verified)) return false
        const now = yield* Clock.currentTimeMillis
        return yield* settlement.fromVerify(item, verified.right, now)
      }).pipe(
        // One attempt's bad data (a provider secret under another key) is logged by its kind, never its text or
        // stack, and the pass goes on with the others.
        Effect.catchAllCause((cause) =>
          Effect.logError("reconcile failed for one attempt", {
            organizationId: (item.kind === "payment" ? item.p : item.c).organizationId,
            reference: (item.kind === "payment" ? item.p : item.c).reference,
            ...describeDefect(Cause.squash(cause))
          }).pipe(Effect.as(false))
        )
      )

    const reconcile: PaymentsShape["reconcile"] = Effect.gen(function* () {
      const now = yield* Clock.currentTimeMillis
      const stale = yield* repo.claimStale(
        { payments: now - RECHECK_MS, checkouts: now - CHECKOUT_RECHECK_MS },
        now,
        RECONCILE_BATCH
      )
      let settled = 0
      let paymentsSettled = 0
      for (const p of stale.payments) {
        if (yield* reconcileOne({ kind: "payment", p })) paymentsSettled++
      }
      for (const c of stale.checkouts) if (yield* reconcileOne({ kind: "checkout", c })) settled++
      return { settled: settled + paymentsSettled, stillProcessing: stale.payments.length - paymentsSettled }
    })

    /**
     * A refund through the simulated provider is decided and recorded in one transaction over the invoice's payments,
     * locked (PostgreSQL; SQLite serializes writers): concurrent refunds under different keys see each other, so what
     * was paid is refunded once and the rest are 422, never answered 200 for money the record then caps away.
     * Paystack's and Stripe's are asked of the provider outside any transaction (a network call must not hold locks).
     */
    const refund: PaymentsShape["refund"] = (org, targetId, request) =>
      Effect.flatMap(repo.succeededPaymentsOf(org, targetId), (found) =>
        found.length > 0 && found.every((p) => p.provider === "simulated")
          ? sql
              .withTransaction(
                Effect.flatMap(
                  Effect.forEach(found, (p) => repo.lockPayment(org, p.reference)),
                  (locked) =>
                    refundOf(
                      org,
                      request,
                      locked.flatMap((p) => (Option.isSome(p) ? [p.value] : []))
                    )
                )
              )
              .pipe(Effect.catchTag("SqlError", Effect.die))
          : refundOf(org, request, found)
      )

    const refundOf = (org: string, request: RefundRequest, paid: ReadonlyArray<PaymentRecord>) =>
      Effect.gen(function* () {
        if (paid.length === 0) {
          return yield* new Unprocessable({ code: "invoice_not_refundable", message: "Nothing was paid on it" })
        }
        const reversalKey = `api:${request.key}`
        // A repeat of a refund already recorded answers from it.
        let repeated = 0n
        for (const p of paid) {
          const known = yield* repo.reversalAmount(org, p.reference, reversalKey)
          if (Option.isSome(known)) repeated += BigInt(known.value)
        }
        if (repeated > 0n) return { amount: Number(repeated), status: "succeeded" as const }
        const left = paid.map((p) => ({ p, left: BigInt(p.amount) - BigInt(p.amountRefunded) }))
        const refundable = left.reduce((sum, x) => sum + x.left, 0n)
        const wanted = request.amount === null ? refundable : BigInt(request.amount)
        if (wanted <= 0n || wanted > refundable) {
          return yield* new Unprocessable({
            code: "refund_exceeds_paid",
            message: `At most ${refundable} (minor units) can be refunded: what was paid less what was refunded`
          })
        }
        // Newest payment first; a refund larger than it continues on the older ones.
        let remaining = wanted
        let pending = false
        for (const { p, left: available } of [...left].reverse()) {
          if (remaining === 0n) break
          const portion = available < remaining ? available : remaining
          if (portion <= 0n) continue
          remaining -= portion
          if (p.provider === "simulated") {
            yield* sql
              .withTransaction(
                settlement.applyEvent(org, "simulated", {
                  _tag: "Refunded",
                  eventKey: `${reversalKey}:${p.reference}`,
                  reference: p.reference,
                  providerPaymentId: null,
                  cause: "refund",
                  reversalKey,
                  amount: Number(portion),
                  cumulative: false,
                  currency: p.currency,
                  metadata: {},
                  ...(request.reason === null ? {} : { reason: request.reason })
                })
              )
              .pipe(Effect.orDie)
          } else {
            const resolved = yield* accounts.forWebhook(org, p.provider)
            const adapter = yield* adapterOf(p.provider)
            if (Option.isNone(resolved)) {
              return yield* new ProviderNotConfigured({ message: `No ${p.provider} account to refund through` })
            }
            yield* adapter
              .refund(resolved.value.account, p.providerReference ?? p.reference, Number(portion))
              .pipe(Effect.mapError(providerFailure))
            pending = true
          }
        }
        return { amount: Number(wanted), status: pending ? ("pending" as const) : ("succeeded" as const) }
      })

    return {
      ensureProvider: (org, provider) =>
        Effect.asVoid(Effect.flatMap(accounts.resolve(org, provider), (r) => adapterOf(r.account.provider))),
      collect,
      awaitOutcome,
      setup,
      methods: (org, customerId) => repo.activeMethods(org, customerId),
      checkout: (org, reference) => repo.findCheckout(org, reference),
      removeMethod,
      makeDefaultMethod,
      applyEvent: settlement.applyEvent,
      reconcile,
      refund,
      supersedeCheckouts: (org, targetId) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => repo.supersedeCheckouts(org, targetId, now)),
      refundedByTarget: (org, targetIds) =>
        targetIds.length === 0 ? Effect.succeed(new Map()) : repo.refundedByTarget(org, targetIds)
    }
  })
)
