import { HttpApiBuilder } from "@effect/platform"
import { Effect, Either } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { errorBody } from "../api/errors.ts"
import { mapDomainErrors, toApiError } from "../boundary/toApiError.ts"
import { Entitlements } from "./Engine.ts"

export const EntitlementsHttp = HttpApiBuilder.group(BillingApi, "entitlements", (handlers) =>
  Effect.gen(function* () {
    const engine = yield* Entitlements
    return handlers
      .handle("check", ({ headers, payload }) =>
        Effect.flatMap(CurrentOrganization, (org) =>
          engine.evaluate(
            org.id,
            payload.sendEvent === true ? "check_send" : "check",
            { ...payload, value: payload.value ?? 1 },
            headers["idempotency-key"]
          )
        ).pipe(mapDomainErrors)
      )
      .handle("track", ({ headers, payload }) =>
        Effect.flatMap(CurrentOrganization, (org) =>
          engine.evaluate(org.id, "track", { ...payload, value: payload.value ?? 1 }, headers["idempotency-key"])
        ).pipe(mapDomainErrors)
      )
      .handle("trackBatch", ({ payload }) =>
        Effect.flatMap(CurrentOrganization, (org) =>
          engine.evaluateBatch(
            org.id,
            payload.events.map((item) => ({ ...item, value: item.value ?? 1 }))
          )
        ).pipe(
          Effect.map((results) => ({
            // An item's refusal is its whole error body, as the same track would have been answered.
            results: results.map(
              Either.match({
                onRight: (state) => state,
                onLeft: (error) => {
                  const wire = toApiError(error)
                  return errorBody(wire._tag, wire.code, wire.message, wire.details)
                }
              })
            )
          }))
        )
      )
  })
)
