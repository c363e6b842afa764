import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { UsageHistory } from "./UsageHistory.ts"

export const UsageHttp = HttpApiBuilder.group(BillingApi, "usage", (handlers) =>
  Effect.gen(function* () {
    const usage = yield* UsageHistory
    return handlers.handle("getUsageHistory", ({ path, urlParams }) =>
      Effect.flatMap(CurrentOrganization, (org) => usage.history(org.id, path.id, urlParams)).pipe(mapDomainErrors)
    )
  })
)
