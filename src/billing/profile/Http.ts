import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../../api/Api.ts"
import { CurrentOrganization } from "../../api/security.ts"
import { BillingProfiles, toWireProfile } from "./BillingProfiles.ts"

export const BillingProfileHttp = HttpApiBuilder.group(BillingApi, "billingProfile", (handlers) =>
  Effect.gen(function* () {
    const profiles = yield* BillingProfiles
    return handlers
      .handle("getBillingProfile", () =>
        Effect.flatMap(CurrentOrganization, (org) => profiles.get(org.id)).pipe(Effect.map(toWireProfile))
      )
      .handle("updateBillingProfile", ({ payload }) =>
        Effect.flatMap(CurrentOrganization, (org) => profiles.update(org.id, payload)).pipe(Effect.map(toWireProfile))
      )
  })
)
