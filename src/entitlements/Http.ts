import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

export const EntitlementsHttp = HttpApiBuilder.group(BillingApi, "entitlements", (handlers) =>
  handlers
    .handle("check", () => notImplemented("Entitlement checks"))
    .handle("track", () => notImplemented("Usage tracking")))
