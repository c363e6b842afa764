import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import type { CheckRequest, IdempotencyHeaders, TrackRequest } from "../api/entitlements.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../http/toApiError.ts"
import { Entitlements, type EntitlementsShape } from "./Engine.ts"

/** The two handlers, shared by the HttpApi group below and the fast path of src/http/fastPath.ts. */
export const entitlementHandlers = (engine: EntitlementsShape) => ({
  check: ({ headers, payload }: { readonly headers: IdempotencyHeaders; readonly payload: CheckRequest }) =>
    Effect.flatMap(CurrentOrganization, (org) =>
      engine.evaluate(
        org.id,
        payload.sendEvent === true ? "check_send" : "check",
        { ...payload, value: payload.value ?? 1 },
        headers["idempotency-key"]
      )).pipe(mapDomainErrors),
  track: ({ headers, payload }: { readonly headers: IdempotencyHeaders; readonly payload: TrackRequest }) =>
    Effect.flatMap(CurrentOrganization, (org) =>
      engine.evaluate(org.id, "track", { ...payload, value: payload.value ?? 1 }, headers["idempotency-key"])).pipe(
        mapDomainErrors
      )
})

export const EntitlementsHttp = HttpApiBuilder.group(BillingApi, "entitlements", (handlers) =>
  Effect.gen(function*() {
    const handle = entitlementHandlers(yield* Entitlements)
    return handlers.handle("check", handle.check).handle("track", handle.track)
  }))
