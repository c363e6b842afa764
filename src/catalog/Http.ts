import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { SyncRequest } from "../api/catalog.ts"
import { applyDefaults } from "../api/common.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { Catalog, syncCatalog } from "./Catalog.ts"

export const CatalogHttp = HttpApiBuilder.group(BillingApi, "catalog", (handlers) =>
  Effect.gen(function* () {
    const catalog = yield* Catalog
    return (
      handlers
        // syncCatalog also calls PlansAutoEnabledHook for the plans this sync newly auto-enabled.
        .handle("sync", ({ payload }) =>
          Effect.flatMap(CurrentOrganization, (org) =>
            Effect.flatMap(applyDefaults(SyncRequest)(payload), (request) => syncCatalog(org.id, request))
          ).pipe(
            Effect.map((outcome) => outcome.result),
            Effect.provideService(Catalog, catalog),
            mapDomainErrors
          )
        )
        .handle("listCreditSystems", () =>
          Effect.flatMap(CurrentOrganization, (org) => catalog.listCreditSystems(org.id)).pipe(
            Effect.map((creditSystems) => ({ success: true, creditSystems }))
          )
        )
        .handle("listCreditPacks", () =>
          Effect.flatMap(CurrentOrganization, (org) => catalog.listCreditPacks(org.id)).pipe(
            Effect.map((data) => ({ success: true, data }))
          )
        )
    )
  })
)
