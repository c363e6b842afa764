import { BigDecimal, Context, Effect, Layer } from "effect"
import { Catalog } from "../catalog/Catalog.ts"
import { Customers } from "../customers/Customers.ts"
import {
  type Conflict,
  InvalidInput,
  NotFound,
  PaymentFailed,
  type ProviderFailure,
  type ProviderNotConfigured
} from "../domain/errors.ts"
import { roundHalfUp, toDecimal, toNumber } from "../domain/money.ts"
import { microToNumber, toMicro } from "../domain/quantity.ts"
import { AMOUNT_MAX_MICRO, INT64_MAX } from "../domain/bounds.ts"
import { Credits, overfilled } from "../credits/Credits.ts"
import { Outbox } from "../events/Outbox.ts"
import { Payments } from "./Payments.ts"

export interface AddonRequest {
  readonly customer: string
  readonly pack: string
  readonly quantity: number
  readonly currency?: string | undefined
  readonly callbackUrl?: string | undefined
  /** The request's Idempotency-Key and a hash of its body: one purchase per key. */
  readonly idempotency?: { readonly key: string; readonly requestHash: string } | undefined
}

export interface AddonResult {
  readonly requiresCheckout: boolean
  readonly checkoutUrl: string | null
  readonly quantity: number
  readonly credits: number
  readonly balance: number | null
  /** `credits_added`, `checkout_required`, or `payment_processing` (the charge's outcome is not known yet). */
  readonly code: "credits_added" | "checkout_required" | "payment_processing"
  readonly message: string
}

/** Credit-pack purchases (spec 4.7, decisions.md §7): credits are added once, when the payment is confirmed. */
export interface AddonsShape {
  readonly purchase: (
    org: string,
    request: AddonRequest
  ) => Effect.Effect<
    AddonResult,
    NotFound | Conflict | InvalidInput | PaymentFailed | ProviderNotConfigured | ProviderFailure
  >
  /** The payment effect: add the pack's credits × quantity to the customer's purchased credits. */
  readonly grant: (org: string, customerId: string, packId: string, quantity: number) => Effect.Effect<bigint>
  /**
   * The refund effect: takes back the share `refunded / paid` of what the purchase granted, as far as the purchased
   * balance still holds it (decisions.md §7). Answers the micro-credits taken.
   */
  readonly takeBack: (
    org: string,
    customerId: string,
    packId: string,
    quantity: number,
    share: { readonly refunded: bigint; readonly paid: bigint }
  ) => Effect.Effect<bigint>
}

export class Addons extends Context.Tag("Addons")<Addons, AddonsShape>() {}

export const AddonsLive = Layer.effect(
  Addons,
  Effect.gen(function* () {
    const catalog = yield* Catalog
    const customers = yield* Customers
    const payments = yield* Payments
    const credits = yield* Credits
    const outbox = yield* Outbox

    const grant = (org: string, customerId: string, packId: string, quantity: number) =>
      Effect.gen(function* () {
        const snapshot = yield* catalog.snapshot(org)
        const pack = [...snapshot.creditPacks.values()].find((p) => p.id === packId)
        if (pack === undefined) return yield* Effect.die(new Error(`credit pack ${packId} vanished`))
        // Exact (pack credits × quantity as decimals). The purchase checked the bound before payment; a confirmed
        // payment adds its credits even if purchases made together pass it (docs/decisions.md "Numbers"), up to what
        // the column holds.
        const bought = toMicro(BigDecimal.multiply(toDecimal(pack.credits), toDecimal(quantity)))
        const after = yield* credits
          .grantById(org, customerId, pack.creditSystemId, bought, "addon", INT64_MAX)
          .pipe(Effect.orDie)
        // In the settling transaction, with the credits.
        yield* outbox.emit(org, {
          type: "credits.purchased",
          data: {
            customer: customerId,
            creditSystem: snapshot.creditSystemsById.get(pack.creditSystemId)?.slug ?? pack.creditSystemId,
            amount: microToNumber(bought),
            kind: "purchased",
            balance: microToNumber(after.addon),
            pack: pack.slug,
            quantity
          },
          customerId
        })
        return after.addon
      })

    const takeBack: AddonsShape["takeBack"] = (org, customerId, packId, quantity, share) =>
      Effect.gen(function* () {
        const snapshot = yield* catalog.snapshot(org)
        const pack = [...snapshot.creditPacks.values()].find((p) => p.id === packId)
        if (pack === undefined || share.paid <= 0n) {
          yield* Effect.logError("refunded pack purchase of a pack no longer in the catalog: credits not taken back", {
            organization: org,
            pack: packId
          })
          return 0n
        }
        // Exact: the credits granted in micro-units, times the refunded share, rounded down (never more than granted).
        const granted = toMicro(BigDecimal.multiply(toDecimal(pack.credits), toDecimal(quantity)))
        const owed = (granted * share.refunded) / share.paid
        const after = yield* credits.takeBackById(org, customerId, pack.creditSystemId, owed, "addon")
        return after.taken
      })

    return {
      grant,
      takeBack,
      purchase: (org, request) =>
        Effect.gen(function* () {
          const customer = yield* customers.resolve(org, request.customer)
          const snapshot = yield* catalog.snapshot(org)
          const pack =
            snapshot.creditPacks.get(request.pack) ??
            [...snapshot.creditPacks.values()].find((p) => p.id === request.pack)
          if (pack === undefined || !pack.isActive) {
            return yield* new NotFound({ code: "pack_not_found", message: `No active credit pack '${request.pack}'` })
          }
          if (request.currency !== undefined && request.currency.toUpperCase() !== pack.currency.toUpperCase()) {
            return yield* new InvalidInput({
              message: `The pack is sold in ${pack.currency}, not ${request.currency}`,
              issues: [{ path: "currency", message: `must be ${pack.currency}` }]
            })
          }
          const bought = toNumber(BigDecimal.multiply(toDecimal(pack.credits), toDecimal(request.quantity)))
          // Before any payment: the credits bought must fit the customer's purchased-credits balance (decisions.md §1).
          const boughtMicro = toMicro(BigDecimal.multiply(toDecimal(pack.credits), toDecimal(request.quantity)))
          const held = (yield* credits.balances(org, customer.id, pack.creditSystemId)).addon
          if (held + boughtMicro > AMOUNT_MAX_MICRO) {
            const system = snapshot.creditSystemsById.get(pack.creditSystemId)?.slug ?? pack.creditSystemId
            return yield* overfilled("quantity", "addon", system, held, boughtMicro)
          }
          const amount = toNumber(roundHalfUp(BigDecimal.multiply(toDecimal(pack.price), toDecimal(request.quantity))))
          const result = yield* payments.collect(org, customer, {
            purpose: "addon",
            targetId: pack.id,
            amount,
            currency: pack.currency,
            description: `${request.quantity} × ${pack.name}`,
            callbackUrl: request.callbackUrl ?? null,
            provider: pack.provider,
            quantity: request.quantity,
            ...(request.idempotency === undefined ? {} : { idempotency: request.idempotency })
          })
          if (result._tag === "Paid") {
            const balance = yield* credits.balances(org, customer.id, pack.creditSystemId)
            return {
              requiresCheckout: false,
              checkoutUrl: null,
              quantity: request.quantity,
              credits: bought,
              balance: microToNumber(balance.addon),
              code: "credits_added" as const,
              message: `Added ${bought} credits`
            }
          }
          if (result._tag === "Processing") {
            return {
              requiresCheckout: false,
              checkoutUrl: null,
              quantity: request.quantity,
              credits: bought,
              balance: null,
              code: "payment_processing" as const,
              message: "The charge is in progress at the provider; the credits are added once it is confirmed"
            }
          }
          if (result._tag === "Failed") return yield* new PaymentFailed({ message: result.message })
          if (result._tag === "NotPayable") return yield* Effect.die(new Error("a pack purchase is always payable"))
          return {
            requiresCheckout: true,
            checkoutUrl: result.checkoutUrl,
            quantity: request.quantity,
            credits: bought,
            balance: null,
            code: "checkout_required" as const,
            message:
              result.chargeFailure === null
                ? "Send the customer to the checkout; the credits are added when the payment is confirmed"
                : `The saved method could not be charged (${result.chargeFailure}); send the customer to the checkout`
          }
        })
    }
  })
)
