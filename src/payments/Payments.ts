import { SqlClient } from "@effect/sql"
import { Clock, Context, Effect, Layer, Option } from "effect"
import type { CustomerRecord } from "../customers/CustomersRepo.ts"
import { NotFound, ProviderFailure, ProviderNotConfigured } from "../domain/errors.ts"
import { Encryption } from "../platform/encryption.ts"
import { Ids } from "../platform/ids.ts"
import { Adapters } from "./Adapters.ts"
import type { MethodDetails, PaymentAdapter, PaymentMetadata, ProviderError, ProviderEvent, ProviderName } from "./PaymentProvider.ts"
import { ProviderAccounts, type ResolvedAccount } from "./ProviderAccounts.ts"
import { type CheckoutRecord, type PaymentMethodRecord, PaymentsRepo, type Purpose } from "./PaymentsRepo.ts"

/** What a confirmed payment does to our objects: activate a subscription, add credits, pay an invoice. */
export type PaymentEffect = (org: string, paid: {
  readonly customerId: string
  readonly targetId: string
  readonly quantity: number
  readonly amount: string
  readonly currency: string
  readonly reference: string
}) => Effect.Effect<void>

/** Filled by the features that own the targets; read when a payment is confirmed (webhook or direct charge). */
export class PaymentEffects extends Context.Reference<PaymentEffects>()("PaymentEffects", {
  defaultValue: (): Partial<Record<Purpose, PaymentEffect>> => ({})
}) {}

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
}

export type CollectResult =
  | { readonly _tag: "Paid"; readonly reference: string }
  | { readonly _tag: "Checkout"; readonly checkoutUrl: string; readonly reference: string; readonly accessCode: string | null; readonly chargeFailure: string | null }
  | { readonly _tag: "Failed"; readonly message: string }

export interface PaymentsShape {
  /** Fails as `collect` would when no provider can take the payment: checked before anything is created. */
  readonly ensureProvider: (org: string, provider: string | null) => Effect.Effect<void, ProviderNotConfigured>
  /** Charge the customer's saved method, else open a hosted checkout (decisions.md §7). */
  readonly collect: (org: string, customer: CustomerRecord, request: CollectRequest) => Effect.Effect<CollectResult, ProviderNotConfigured | ProviderFailure>
  readonly setup: (
    org: string,
    customer: CustomerRecord,
    options: { readonly callbackUrl: string | null; readonly provider: string | null }
  ) => Effect.Effect<{ readonly url: string; readonly reference: string }, ProviderNotConfigured | ProviderFailure>
  readonly methods: (org: string, customerId: string) => Effect.Effect<ReadonlyArray<PaymentMethodRecord>>
  readonly removeMethod: (org: string, customerId: string, methodId: string) => Effect.Effect<void, NotFound | ProviderFailure>
  /** A verified provider event's effects; runs inside the webhook's transaction. `false` = nothing to do. */
  readonly applyEvent: (org: string, provider: ProviderName, event: ProviderEvent) => Effect.Effect<boolean>
}

export class Payments extends Context.Tag("Payments")<Payments, PaymentsShape>() {}

const providerFailure = (e: ProviderError) =>
  new ProviderFailure({ message: `The payment provider failed (${e.reason}): ${e.message}` })

/** Paystack has no setup mode: a small charge saves the card (decisions: refunded by the vendor's ops). */
const SETUP_AMOUNTS: Record<ProviderName, { amount: number; currency: string }> = {
  paystack: { amount: 5000, currency: "NGN" },
  stripe: { amount: 0, currency: "USD" },
  simulated: { amount: 0, currency: "NGN" }
}

export const PaymentsLive = Layer.effect(
  Payments,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* PaymentsRepo
    const accounts = yield* ProviderAccounts
    const adapters = yield* Adapters
    const encryption = yield* Encryption
    const ids = yield* Ids

    const adapterOf = (resolved: ResolvedAccount): Effect.Effect<PaymentAdapter, ProviderNotConfigured> => {
      const adapter = adapters.get(resolved.account.provider)
      return adapter === undefined
        ? Effect.fail(new ProviderNotConfigured({ message: `The provider '${resolved.account.provider}' is not available` }))
        : Effect.succeed(adapter)
    }

    const metadataFor = (org: string, customerId: string, purpose: Purpose, targetId: string, reference: string): PaymentMetadata => ({
      organization_id: org,
      customer_id: customerId,
      purpose,
      target_id: targetId,
      reference
    })

    // Deterministic per attempt, and within Paystack's alphabet (letters, digits, '-', '.', '=').
    const nextReference = (org: string, targetId: string) =>
      Effect.map(repo.attemptsFor(org, targetId), (n) => `${targetId.replaceAll("_", "-")}-${n + 1}`)

    const saveMethod = (org: string, customerId: string, provider: ProviderName, method: MethodDetails) =>
      Effect.gen(function*() {
        if (!method.reusable) return
        const existing = yield* repo.activeMethods(org, customerId)
        if (method.fingerprint !== null && existing.some((m) => m.provider === provider && m.fingerprint === method.fingerprint)) return
        const now = yield* Clock.currentTimeMillis
        yield* repo.insertMethod({
          organizationId: org,
          id: yield* ids.next("pm"),
          customerId,
          provider,
          token: encryption.encrypt(method.token),
          providerCustomerId: method.providerCustomerId,
          email: method.email,
          type: method.type,
          brand: method.brand,
          last4: method.last4,
          expMonth: method.expMonth,
          expYear: method.expYear,
          fingerprint: method.fingerprint,
          isDefault: existing.length === 0,
          status: "active",
          createdAt: now,
          updatedAt: now
        })
      })

    /** Records a confirmed payment and applies its effect, together. */
    const confirm = (org: string, provider: ProviderName, paid: {
      readonly purpose: Purpose
      readonly customerId: string
      readonly targetId: string
      readonly quantity: number
      readonly amount: string
      readonly currency: string
      readonly reference: string
      readonly providerReference: string | null
    }) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        yield* repo.insertPayment({
          organizationId: org,
          id: yield* ids.next("pay"),
          reference: paid.reference,
          provider,
          purpose: paid.purpose,
          customerId: paid.customerId,
          targetId: paid.targetId,
          amount: paid.amount,
          currency: paid.currency,
          status: "succeeded",
          providerReference: paid.providerReference,
          failureMessage: null,
          createdAt: now,
          updatedAt: now
        })
        const effects = yield* PaymentEffects
        const effect = effects[paid.purpose]
        if (effect !== undefined) yield* effect(org, paid)
      })

    const recordFailure = (org: string, provider: ProviderName, purpose: Purpose, customerId: string, targetId: string, reference: string, amount: string, currency: string, message: string) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        yield* repo.insertPayment({
          organizationId: org,
          id: yield* ids.next("pay"),
          reference,
          provider,
          purpose,
          customerId,
          targetId,
          amount,
          currency,
          status: "failed",
          providerReference: null,
          failureMessage: message,
          createdAt: now,
          updatedAt: now
        })
      })

    const openCheckout = (
      org: string,
      customer: CustomerRecord,
      resolved: ResolvedAccount,
      adapter: PaymentAdapter,
      args: { purpose: Purpose; targetId: string; amount: number; currency: string; description: string; callbackUrl: string | null; quantity: number; mode: "payment" | "setup" }
    ) =>
      Effect.gen(function*() {
        const reference = yield* nextReference(org, args.targetId)
        const provider = resolved.account.provider
        const method = (yield* repo.activeMethods(org, customer.id)).find((m) => m.provider === provider)
        const session = yield* adapter.createCheckout(resolved.account, {
          reference,
          mode: args.mode,
          amount: args.amount,
          currency: args.currency,
          email: customer.email ?? `${customer.id}@customers.invalid`,
          description: args.description,
          callbackUrl: args.callbackUrl,
          providerCustomerId: method?.providerCustomerId ?? null,
          metadata: metadataFor(org, customer.id, args.purpose, args.targetId, reference)
        }).pipe(Effect.mapError(providerFailure))
        const now = yield* Clock.currentTimeMillis
        const record: CheckoutRecord = {
          organizationId: org,
          id: yield* ids.next("chk"),
          reference,
          provider,
          purpose: args.purpose,
          customerId: customer.id,
          targetId: args.targetId,
          quantity: args.quantity,
          amount: String(args.amount),
          currency: args.currency,
          status: "open",
          checkoutUrl: session.checkoutUrl,
          accessCode: session.accessCode,
          data: { description: args.description, callbackUrl: args.callbackUrl },
          createdAt: now,
          updatedAt: now
        }
        yield* repo.insertCheckout(record)
        return session
      })

    const collect = (org: string, customer: CustomerRecord, request: CollectRequest) =>
      Effect.gen(function*() {
        const resolved = yield* accounts.resolve(org, request.provider)
        const adapter = yield* adapterOf(resolved)
        const provider = resolved.account.provider
        const quantity = request.quantity ?? 1
        const saved = (yield* repo.activeMethods(org, customer.id)).find((m) => m.provider === provider)
        let chargeFailure: string | null = null
        if (saved !== undefined) {
          const reference = yield* nextReference(org, request.targetId)
          const result = yield* adapter.charge(resolved.account, {
            reference,
            amount: request.amount,
            currency: request.currency,
            email: customer.email ?? saved.email ?? `${customer.id}@customers.invalid`,
            method: { token: encryption.decrypt(saved.token), providerCustomerId: saved.providerCustomerId, email: saved.email },
            metadata: metadataFor(org, customer.id, request.purpose, request.targetId, reference)
          }).pipe(Effect.mapError(providerFailure))
          if (result._tag === "Succeeded") {
            yield* sql.withTransaction(confirm(org, provider, {
              purpose: request.purpose,
              customerId: customer.id,
              targetId: request.targetId,
              quantity,
              amount: String(request.amount),
              currency: request.currency,
              reference,
              providerReference: result.providerReference
            })).pipe(Effect.orDie)
            return { _tag: "Paid", reference } as const
          }
          chargeFailure = result._tag === "Pending" ? "The charge is pending at the provider" : result.message
          yield* recordFailure(org, provider, request.purpose, customer.id, request.targetId, reference, String(request.amount), request.currency, chargeFailure)
        }
        if (request.offSessionOnly === true) return { _tag: "Failed", message: chargeFailure ?? "No saved payment method" } as const
        const session = yield* openCheckout(org, customer, resolved, adapter, {
          purpose: request.purpose,
          targetId: request.targetId,
          amount: request.amount,
          currency: request.currency,
          description: request.description,
          callbackUrl: request.callbackUrl,
          quantity,
          mode: "payment"
        })
        return { _tag: "Checkout", checkoutUrl: session.checkoutUrl, reference: session.reference, accessCode: session.accessCode, chargeFailure } as const
      })

    const applyEvent = (org: string, provider: ProviderName, event: ProviderEvent) =>
      Effect.gen(function*() {
        if (event._tag === "Ignored") return false
        const checkout = yield* repo.findCheckout(org, event.reference)
        if (Option.isNone(checkout)) return false
        const c = checkout.value
        if (event._tag === "PaymentFailed") {
          yield* recordFailure(org, provider, c.purpose, c.customerId, c.targetId, `${c.reference}_failed_${event.eventKey}`, c.amount, c.currency, event.message)
          return true
        }
        if (event.method !== null) yield* saveMethod(org, c.customerId, provider, event.method)
        // The checkout completes once: a second, different event for it (a provider retry with a new id) does nothing.
        const first = yield* repo.completeCheckout(org, c.reference, yield* Clock.currentTimeMillis)
        if (!first || c.purpose === "setup") return first
        yield* confirm(org, provider, {
          purpose: c.purpose,
          customerId: c.customerId,
          targetId: c.targetId,
          quantity: c.quantity,
          amount: c.amount,
          currency: c.currency,
          reference: c.reference,
          providerReference: null
        })
        return true
      })

    return {
      ensureProvider: (org, provider) => Effect.asVoid(Effect.flatMap(accounts.resolve(org, provider), adapterOf)),
      collect,
      setup: (org, customer, options) =>
        Effect.gen(function*() {
          const resolved = yield* accounts.resolve(org, options.provider)
          const adapter = yield* adapterOf(resolved)
          const { amount, currency } = SETUP_AMOUNTS[resolved.account.provider]
          const session = yield* openCheckout(org, customer, resolved, adapter, {
            purpose: "setup",
            targetId: customer.id,
            amount,
            currency,
            description: "Save a payment method",
            callbackUrl: options.callbackUrl,
            quantity: 1,
            mode: "setup"
          })
          return { url: session.checkoutUrl, reference: session.reference }
        }),
      methods: (org, customerId) => repo.activeMethods(org, customerId),
      removeMethod: (org, customerId, methodId) =>
        Effect.gen(function*() {
          const method = yield* repo.findMethod(org, methodId)
          if (Option.isNone(method) || method.value.customerId !== customerId || method.value.status !== "active") {
            return yield* new NotFound({ code: "payment_method_not_found", message: `No payment method '${methodId}'` })
          }
          const m = method.value
          const resolved = yield* accounts.forWebhook(org, m.provider)
          const adapter = adapters.get(m.provider)
          if (Option.isSome(resolved) && adapter !== undefined) {
            yield* adapter.removeMethod(resolved.value.account, {
              token: encryption.decrypt(m.token),
              providerCustomerId: m.providerCustomerId,
              email: m.email
            }).pipe(Effect.mapError(providerFailure))
          }
          yield* repo.removeMethod(org, methodId, yield* Clock.currentTimeMillis)
        }),
      applyEvent
    }
  })
)
