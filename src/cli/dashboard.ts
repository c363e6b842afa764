import { Effect } from "effect"
import { DashboardSessions, LINK_MS } from "../dashboard/Sessions.ts"
import { AppConfig } from "../platform/config.ts"
import { need, type Output, type Parsed } from "./args.ts"

/** `dashboard <org>`: a one-time sign-in link to the dashboard (decisions.md §13: 10 minutes, once). */
export const dashboardCommand = (args: Parsed) =>
  Effect.gen(function* () {
    const ref = yield* need(args.positional[1], "<org>")
    const config = yield* AppConfig
    const { token, organization } = yield* Effect.flatMap(DashboardSessions, (s) => s.createLink(ref))
    const url = `${config.publicUrl}/dashboard/link/${token}`
    return {
      json: { organization: organization.slug, url, expiresInSeconds: LINK_MS / 1000 },
      text: `${url}\nOpens the dashboard of ${organization.slug}; works once, within 10 minutes.`
    } satisfies Output
  })
