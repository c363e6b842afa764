import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { applyDefaults } from "../api/common.ts"
import { PurchaseAddon } from "../api/payments.ts"
import { Customers } from "../customers/Customers.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { idempotencyKeyOf } from "../platform/idempotencyKey.ts"
import { Addons } from "./Addons.ts"
import { toWireMethod } from "./methods.ts"
import { Payments } from "./Payments.ts"

export const PaymentsHttp = HttpApiBuilder.group(BillingApi, "payments", (handlers) =>
  Effect.gen(function* () {
    const addons = yield* Addons
    const payments = yield* Payments
    const customers = yield* Customers
    /** The customer's wallet as `GET /v1/wallet` answers it (the default first). */
    const wallet = (org: string, customerId: string) =>
      Effect.map(payments.methods(org, customerId), (methods) => ({
        success: true,
        paymentMethods: methods.map(toWireMethod)
      }))
    return handlers
      .handle("purchaseAddon", ({ payload: body }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const payload = yield* applyDefaults(PurchaseAddon)(body)
          const idempotency = yield* idempotencyKeyOf("addon", payload)
          return yield* addons.purchase(org.id, { ...payload, idempotency })
        }).pipe(
          Effect.map((r) => ({ success: true, ...r })),
          mapDomainErrors
        )
      )
      .handle("createWalletSetup", ({ payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const customer = yield* customers.resolve(org.id, payload.customer)
          return yield* payments.setup(org.id, customer, {
            callbackUrl: payload.callbackUrl ?? null,
            provider: payload.provider ?? null,
            currency: payload.currency ?? null
          })
        }).pipe(mapDomainErrors)
      )
      .handle("removePaymentMethod", ({ payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const customer = yield* customers.resolve(org.id, payload.customer)
          yield* payments.removeMethod(org.id, customer.id, payload.id)
          return { success: true }
        }).pipe(mapDomainErrors)
      )
      .handle("setDefaultPaymentMethod", ({ payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const customer = yield* customers.resolve(org.id, payload.customer)
          yield* payments.makeDefaultMethod(org.id, customer.id, payload.id)
          return yield* wallet(org.id, customer.id)
        }).pipe(mapDomainErrors)
      )
      .handle("listPaymentMethods", ({ urlParams }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const customer = yield* customers.resolve(org.id, urlParams.customer)
          return yield* wallet(org.id, customer.id)
        }).pipe(mapDomainErrors)
      )
  })
)
