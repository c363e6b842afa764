import { HttpApiBuilder } from "@effect/platform"
import { Clock, Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { CreditBalance } from "../creditBalance/CreditBalance.ts"
import { Customers, toCustomer, toListItem } from "./Customers.ts"
import type { CustomerRecord } from "./CustomersRepo.ts"
import { FeatureConfigs } from "./FeatureConfigs.ts"

export const CustomersHttp = HttpApiBuilder.group(BillingApi, "customers", (handlers) =>
  Effect.gen(function* () {
    const customers = yield* Customers
    const featureConfigs = yield* FeatureConfigs
    const credit = yield* CreditBalance
    /** The full customer object: every response of it carries the per-feature configs and the credit balance. */
    const full = (c: CustomerRecord) =>
      Effect.zipWith(
        featureConfigs.list(c.organizationId, c.id),
        Effect.zip(credit.balances(c.organizationId, c.id), customers.billingDetails(c.organizationId, c.id)),
        (configs, [b, details]) =>
          toCustomer(c, configs, Object.fromEntries(Object.entries(b).map(([k, v]) => [k, Number(v)])), details)
      )
    return handlers
      .handle("createCustomer", ({ payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const now = yield* Clock.currentTimeMillis
          return yield* customers.findOrCreate(
            org.id,
            {
              externalId: payload.id,
              email: payload.email,
              name: payload.name,
              metadata: payload.metadata,
              billing: { address: payload.address, taxIds: payload.taxIds, taxExempt: payload.taxExempt }
            },
            now
          )
        }).pipe(Effect.flatMap(full), mapDomainErrors)
      )
      .handle("listCustomers", ({ urlParams }) => {
        const filter = { ...urlParams, limit: urlParams.limit ?? 50, offset: urlParams.offset ?? 0 }
        return Effect.flatMap(CurrentOrganization, (org) => customers.list(org.id, filter)).pipe(
          Effect.map(({ rows, total }) => ({
            success: true,
            data: rows.map(toListItem),
            total,
            limit: filter.limit,
            offset: filter.offset
          }))
        )
      })
      .handle("getCustomer", ({ path }) =>
        Effect.flatMap(CurrentOrganization, (org) => customers.resolve(org.id, path.id)).pipe(
          Effect.flatMap(full),
          mapDomainErrors
        )
      )
      .handle("setOverageLimit", ({ payload }) =>
        Effect.flatMap(CurrentOrganization, (org) => customers.setOverageLimit(org.id, payload)).pipe(
          Effect.flatMap(full),
          mapDomainErrors
        )
      )
      .handle("setFeatureConfig", ({ payload }) =>
        Effect.flatMap(CurrentOrganization, (org) => featureConfigs.set(org.id, payload)).pipe(
          Effect.flatMap(full),
          mapDomainErrors
        )
      )
  })
)
