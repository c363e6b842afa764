import { Effect } from "effect"
import { Customers } from "../customers/Customers.ts"
import { Organizations } from "../organizations/Organizations.ts"
import { AppConfig } from "../platform/config.ts"
import { PORTAL_LINK_MS, PortalSessions, portalLinkUrl } from "../portal/Sessions.ts"
import { flag, invalid, need, type Output, type Parsed } from "./args.ts"

/**
 * `portal <org> <customer> [--return-url <url>]`: the link `POST /v1/portal/sessions` answers, for trying the
 * customer portal locally (decisions.md §17: 1 hour, once).
 */
export const portalCommand = (args: Parsed) =>
  Effect.gen(function* () {
    const ref = yield* need(args.positional[1], "<org>")
    const customerRef = yield* need(args.positional[2], "<customer>")
    const returnUrl = flag(args, "return-url") ?? null
    if (returnUrl !== null && !(URL.canParse(returnUrl) && /^https?:/i.test(returnUrl))) {
      return yield* invalid("--return-url must be an http(s) URL", [
        { path: "returnUrl", message: "must be an http(s) URL" }
      ])
    }
    const config = yield* AppConfig
    const org = yield* Effect.flatMap(Organizations, (o) => o.get(ref))
    const customer = yield* Effect.flatMap(Customers, (c) => c.resolve(org.id, customerRef))
    const link = yield* Effect.flatMap(PortalSessions, (s) => s.createLink(org.id, customer.id, returnUrl))
    const url = portalLinkUrl(config.publicUrl, link.token)
    const expiresAt = new Date(link.expiresAt).toISOString()
    return {
      json: { organization: org.slug, customer: customer.id, url, expiresAt },
      text: `${url}\nOpens the customer portal of ${customerRef} (${org.slug}); works once, within ${PORTAL_LINK_MS / 60_000} minutes.`
    } satisfies Output
  })
