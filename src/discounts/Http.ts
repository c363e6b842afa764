import { HttpApiBuilder } from "@effect/platform"
import { Clock, Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { Customers } from "../customers/Customers.ts"
import { CustomerDiscounts } from "../catalog/customerDiscounts.ts"

export const DiscountsHttp = HttpApiBuilder.group(BillingApi, "discounts", (handlers) =>
  Effect.gen(function* () {
    const customers = yield* Customers
    const discounts = yield* CustomerDiscounts
    return handlers
      .handle("applyDiscount", ({ path, payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const customer = yield* customers.resolve(org.id, path.id)
          const applied = yield* discounts.apply(org.id, customer.id, payload, yield* Clock.currentTimeMillis)
          return {
            success: true,
            customer: customer.id,
            coupon: applied.coupon.slug,
            ...(applied.promotionCode === null ? {} : { promotionCode: applied.promotionCode }),
            invoicesLeft: applied.invoicesLeft
          }
        }).pipe(mapDomainErrors)
      )
      .handle("removeDiscount", ({ path }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const customer = yield* customers.resolve(org.id, path.id)
          const removed = yield* discounts.remove(org.id, customer.id)
          return { success: true, customer: customer.id, removed }
        }).pipe(mapDomainErrors)
      )
  })
)
