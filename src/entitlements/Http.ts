import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { answerBatch } from "./batchAnswer.ts"
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
          answerBatch(payload, (items) => engine.evaluateBatch(org.id, items))
        )
      )
  })
)
