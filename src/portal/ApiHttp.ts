import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { Customers } from "../customers/Customers.ts"
import { AppConfig } from "../platform/config.ts"
import { PortalSessions, portalLinkUrl } from "./Sessions.ts"

/** `POST /v1/portal/sessions` (decisions.md §17): the vendor, with its key, opens the portal for one customer. */
export const PortalHttp = HttpApiBuilder.group(BillingApi, "portal", (handlers) =>
  Effect.gen(function* () {
    const customers = yield* Customers
    const sessions = yield* PortalSessions
    const config = yield* AppConfig
    return handlers.handle("createPortalSession", ({ payload }) =>
      Effect.gen(function* () {
        const org = yield* CurrentOrganization
        // The customer as every /v1 route names it (id, external id or email), of this organization only.
        const customer = yield* customers.resolve(org.id, payload.customer)
        const link = yield* sessions.createLink(org.id, customer.id, payload.returnUrl ?? null)
        return {
          success: true,
          url: portalLinkUrl(config.publicUrl, link.token),
          expiresAt: new Date(link.expiresAt).toISOString()
        }
      }).pipe(mapDomainErrors)
    )
  })
)
