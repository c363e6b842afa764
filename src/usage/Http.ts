import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

export const UsageHttp = HttpApiBuilder.group(BillingApi, "usage", (handlers) =>
  handlers
    .handle("getUsageHistory", () => notImplemented("Usage history")))
