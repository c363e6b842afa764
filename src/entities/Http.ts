import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { Entities } from "./Entities.ts"

export const EntitiesHttp = HttpApiBuilder.group(BillingApi, "entities", (handlers) =>
  Effect.gen(function* () {
    const entities = yield* Entities
    return handlers
      .handle("addEntity", ({ payload }) =>
        Effect.flatMap(CurrentOrganization, (org) => entities.add(org.id, payload)).pipe(
          Effect.map((added) => ({ success: true, ...added })),
          mapDomainErrors
        )
      )
      .handle("removeEntity", ({ payload }) =>
        Effect.flatMap(CurrentOrganization, (org) => entities.remove(org.id, payload)).pipe(
          Effect.map((removed) => ({ success: true, ...removed })),
          mapDomainErrors
        )
      )
  })
)
