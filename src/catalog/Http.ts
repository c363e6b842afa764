import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

export const CatalogHttp = HttpApiBuilder.group(BillingApi, "catalog", (handlers) =>
  handlers
    .handle("sync", () => notImplemented("Catalog sync"))
    .handle("listCreditSystems", () => notImplemented("Credit systems"))
    .handle("listCreditPacks", () => notImplemented("Credit packs")))
