import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

export const EntitiesHttp = HttpApiBuilder.group(BillingApi, "entities", (handlers) =>
  handlers
    .handle("addEntity", () => notImplemented("Entities"))
    .handle("removeEntity", () => notImplemented("Entities")))
