import type { SqlClient } from "@effect/sql"
import { Cause, Clock, Context, Effect, Either, type Exit, Option } from "effect"
import type { BillingProfiles } from "../billing/profile/BillingProfiles.ts"
import type { Catalog } from "../catalog/Catalog.ts"
import type { Credits } from "../credits/Credits.ts"
import type { Asset } from "../web/assets.ts"
import {
  apiError,
  callV1,
  cookieOf,
  csrfOk,
  eitherRunner,
  escapeHtml,
  forbidden,
  html,
  json,
  readJson,
  sameOrigin,
  seeOther,
  segment,
  serveAsset,
  sessionCookie,
  withPageHeaders
} from "../web/pages.ts"
import { creditBalances, portalPlans, priceOf, snapshotOf, vendorName } from "./Reads.ts"
import { PortalSessions, type PortalSession } from "./Sessions.ts"

export const PORTAL_COOKIE = "billing_portal"

type Services = PortalSessions | BillingProfiles | Catalog | Credits | SqlClient.SqlClient

export interface PortalDeps {
  /** Runs on the application's runtime (whose failures include the layers' own, hence `unknown`). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, Services>) => Promise<Exit.Exit<A, unknown>>
  /** HttpApi's handler: the portal's reads and changes are `/v1` requests carrying the session's organization. */
  readonly v1: (request: Request, context: Context.Context<never>) => Promise<Response>
  /** The page's script and styles (`portal.js`, `portal.css`). */
  readonly assets: () => Promise<ReadonlyMap<string, Asset>>
}

const PAGES: Record<string, string> = {
  "/portal": "overview",
  "/portal/invoices": "invoices",
  "/portal/payment-methods": "payment-methods",
  "/portal/plans": "plans"
}

/** Subscriptions the portal shows: live ones and one waiting for its first payment (ended ones are history). */
const SHOWN = new Set(["pending", "trialing", "active", "past_due"])

const unauthorized = () => apiError("Unauthorized", "unauthorized", "This portal session has ended: open a new link")

/**
 * The page: a shell the script fills from the JSON routes. The only server-written values are the vendor's name, the
 * return URL and the CSRF token, all escaped; customer data only ever reaches the page as JSON, rendered as text.
 */
const shell = (view: string, session: PortalSession | undefined, vendor: string) =>
  html(
    `<!doctype html><html lang="en"><head><meta charset="utf-8">` +
      `<meta name="viewport" content="width=device-width, initial-scale=1">` +
      `<title>${escapeHtml(vendor === "" ? "Billing" : `${vendor} · Billing`)}</title><link rel="icon" href="data:,">` +
      `<link rel="stylesheet" href="/portal/assets/portal.css">` +
      `<meta name="csrf-token" content="${escapeHtml(session?.csrfToken ?? "")}">` +
      `<script type="module" src="/portal/assets/portal.js"></script></head>` +
      `<body data-view="${escapeHtml(view)}" data-vendor="${escapeHtml(vendor)}" ` +
      `data-return-url="${escapeHtml(session?.returnUrl ?? "")}">` +
      `<noscript>This page needs JavaScript.</noscript><div id="app"></div></body></html>`
  )

export const makePortal = (deps: PortalDeps) => {
  const run = eitherRunner(deps.run)
  const must = async <A, E>(effect: Effect.Effect<A, E, Services>): Promise<A> => Either.getOrThrow(await run(effect))

  /** One `/v1` request for the session's organization, through HttpApi's handlers (the same services and events). */
  const v1 = callV1(deps.v1)

  const api = async (request: Request, context: Context.Context<never>, session: PortalSession, path: string) => {
    const org = session.organization
    const customer = session.customerId
    const q = encodeURIComponent(customer)
    const get = async (pathAndQuery: string): Promise<{ readonly status: number; readonly body: any }> => {
      const answer = await v1(request, context, org, "GET", pathAndQuery)
      return { status: answer.status, body: await answer.json() }
    }
    const post = (pathAndQuery: string, body: unknown) => v1(request, context, org, "POST", pathAndQuery, body)
    const subscriptions = async (): Promise<ReadonlyArray<any>> =>
      (await get(`/v1/subscriptions?customer=${q}`)).body.subscriptions ?? []
    const paymentMethods = async (): Promise<ReadonlyArray<any>> =>
      (await get(`/v1/wallet?customer=${q}`)).body.paymentMethods ?? []
    const origin = new URL(request.url).origin

    if (request.method === "GET") {
      if (path === "/overview") {
        const [found, subs, snapshot, vendor] = await Promise.all([
          get(`/v1/customers/${q}`),
          subscriptions(),
          must(snapshotOf(session)),
          must(vendorName(session))
        ])
        if (found.status !== 200) return unauthorized()
        const shown = subs.filter((s) => SHOWN.has(s.status))
        // Each feature of the customer's plans, in the catalog's order, as `/v1/check` answers it (value 0: a
        // check without sendEvent changes nothing).
        const slugs = new Set(
          shown.flatMap((s) => snapshot.plans.get(s.plan)?.features.map((f) => f.slug) ?? ([] as Array<string>))
        )
        const features = [...snapshot.features.values()].filter((f) => slugs.has(f.slug))
        const states = await Promise.all(
          features.map(async (f) => {
            const answer = await post("/v1/check", { customer, feature: f.slug, value: 0 })
            return { feature: { slug: f.slug, name: f.name, type: f.type, unit: f.unit }, state: await answer.json() }
          })
        )
        const c = found.body.customer ?? found.body
        return json({
          vendor: { name: vendor, returnUrl: session.returnUrl },
          customer: { id: c.externalId ?? c.id, name: c.name ?? null, email: c.email ?? null },
          expiresAt: new Date(session.expiresAt).toISOString(),
          subscriptions: shown.map((s) => {
            const plan = snapshot.plans.get(s.plan)
            return { ...s, planName: plan?.name ?? s.plan, price: plan === undefined ? null : priceOf(plan) }
          }),
          features: states,
          credits: await must(creditBalances(session, snapshot)),
          creditBalance: c.billing?.creditBalance ?? {}
        })
      }
      if (path === "/invoices") {
        const answer = await get(`/v1/billing/invoices?customer=${q}`)
        if (answer.status !== 200) return withPageHeaders(new Response(JSON.stringify(answer.body), answer))
        const invoices = [...(answer.body.invoices ?? [])]
          .filter((i: any) => i.status !== "draft")
          .sort((a: any, b: any) => Number(b.createdAt) - Number(a.createdAt))
          .map((i: any) => ({ ...i, pdfUrl: `${i.hostedUrl}/pdf` }))
        return json({ invoices })
      }
      if (path === "/payment-methods") return json({ paymentMethods: await paymentMethods() })
      if (path === "/plans") {
        const current = new Set((await subscriptions()).filter((s) => SHOWN.has(s.status)).map((s) => s.plan))
        return json({ plans: portalPlans(await must(snapshotOf(session)), current) })
      }
      return apiError("NotFound", "not_found", "No such route")
    }
    if (request.method !== "POST") return apiError("NotFound", "not_found", "No such route")

    const audited = async (action: string, objectId: string, response: Response) => {
      await must(
        Effect.flatMap(PortalSessions, (s) =>
          s.audit(session, action, objectId, response.ok ? "ok" : `refused ${response.status}`)
        )
      )
      return response
    }
    // Every change: same origin and the session's CSRF token (a header a cross-site form cannot send).
    if (!csrfOk(request, session.csrfToken)) {
      return audited(
        "csrf.refused",
        path,
        forbidden("csrf_token_invalid", "This change lacks the portal's CSRF token: reload the page")
      )
    }
    const body = await readJson(request)

    if (path === "/payment-methods/setup") {
      const answer = await post("/v1/wallet/setup", { customer, callbackUrl: `${origin}/portal/payment-methods` })
      return audited("payment_method.setup", customer, await withPageHeaders(answer))
    }
    const method = /^\/payment-methods\/([^/]+)\/(default|remove)$/.exec(path)
    if (method !== null) {
      const id = segment(method[1]!) ?? ""
      const action = method[2] === "default" ? "payment_method.default" : "payment_method.remove"
      // Another customer's method answers exactly as an unknown one.
      if (!(await paymentMethods()).some((m) => m.id === id)) {
        return audited(action, id, apiError("NotFound", "payment_method_not_found", "No such payment method"))
      }
      const answer =
        method[2] === "default"
          ? await post("/v1/wallet/default", { customer, id })
          : await post("/v1/wallet/remove", { customer, id })
      if (!answer.ok) return audited(action, id, await withPageHeaders(answer))
      return audited(action, id, json({ success: true, paymentMethods: await paymentMethods() }))
    }
    if (path === "/plans/preview" || path === "/plans/change") {
      const action = path === "/plans/preview" ? "plan.preview" : "plan.change"
      if (typeof body.plan !== "string" || body.plan === "") {
        const invalid = apiError("BadRequest", "invalid_request", "plan: the slug of a plan offered here is required")
        return audited(action, "", invalid)
      }
      const slug = body.plan
      const plan = (await must(snapshotOf(session))).plans.get(slug)
      // Only the organization's portal plans are offered; any other plan is as unknown as one that does not exist.
      if (plan === undefined || !plan.portal) {
        return audited(action, slug, apiError("NotFound", "plan_not_found", `No plan '${slug}' is offered here`))
      }
      if (path === "/plans/preview") {
        // Changes nothing, but is a POST of the portal's like the others: audited, so a trail shows what was weighed.
        const answer = await post("/v1/attach/preview", { customer, product: plan.slug })
        return audited(action, plan.slug, await withPageHeaders(answer))
      }
      const answer = await post("/v1/attach", { customer, product: plan.slug, callbackUrl: `${origin}/portal` })
      return audited(action, plan.slug, await withPageHeaders(answer))
    }
    const change = /^\/subscriptions\/([^/]+)\/(cancel|resume|cancel-change|checkout)$/.exec(path)
    if (change !== null) {
      const id = segment(change[1]!) ?? ""
      const action = `subscription.${change[2]!.replace("-", "_")}`
      // Another customer's subscription answers exactly as an unknown one.
      if (!(await subscriptions()).some((s) => s.id === id)) {
        return audited(action, id, apiError("NotFound", "subscription_not_found", "No such subscription"))
      }
      // Paying a pending subscription's first payment: the provider's page brings the customer back to the overview.
      const sent = change[2] === "checkout" ? { callbackUrl: `${origin}/portal` } : {}
      const answer = await post(`/v1/subscriptions/${encodeURIComponent(id)}/${change[2]!}`, sent)
      return audited(action, id, await withPageHeaders(answer))
    }
    return apiError("NotFound", "not_found", "No such route")
  }

  /** Answers every `/portal` request. */
  return async (request: Request, context: Context.Context<never> = Context.empty()): Promise<Response> => {
    const url = new URL(request.url)
    const path = url.pathname
    const cookie = sessionCookie(request, PORTAL_COOKIE, "/portal")
    try {
      if (path.startsWith("/portal/assets/")) {
        return serveAsset(request, (await deps.assets()).get(path.slice("/portal/assets/".length)))
      }
      if (request.method === "GET" && (path.startsWith("/portal/link/") || path === "/portal/expired")) {
        return shell(path === "/portal/expired" ? "expired" : "link", undefined, "")
      }
      if (request.method === "POST" && path === "/portal/link") {
        if (!sameOrigin(request)) return forbidden("cross_origin", "Open the portal from its own page")
        const body = await readJson(request)
        const token = typeof body.token === "string" ? body.token : ""
        const redeemed = await must(Effect.flatMap(PortalSessions, (s) => s.redeemLink(token)))
        if (Option.isNone(redeemed)) {
          return apiError("Unauthorized", "portal_link_invalid", "This portal link is unknown, used or expired")
        }
        const { session, cookie: value } = redeemed.value
        await must(Effect.flatMap(PortalSessions, (s) => s.audit(session, "session.open", session.customerId, "ok")))
        // The cookie lasts as long as the session (the link's hour), on the service's clock.
        const seconds = Math.max(0, Math.floor((session.expiresAt - (await must(Clock.currentTimeMillis))) / 1000))
        return json({ success: true }, 200, { "set-cookie": cookie(value, Math.min(seconds, 3600)) })
      }
      const value = cookieOf(request, PORTAL_COOKIE)
      const session =
        value === undefined
          ? undefined
          : Option.getOrUndefined(await must(Effect.flatMap(PortalSessions, (s) => s.find(value))))
      if (path.startsWith("/portal/api/")) {
        if (session === undefined) return unauthorized()
        return await api(request, context, session, path.slice("/portal/api".length))
      }
      if (path === "/portal/sign-out" && request.method === "POST") {
        if (session !== undefined) {
          if (!csrfOk(request, session.csrfToken)) {
            const refused = forbidden(
              "csrf_token_invalid",
              "This change lacks the portal's CSRF token: reload the page"
            )
            await must(Effect.flatMap(PortalSessions, (s) => s.audit(session, "csrf.refused", path, "refused 403")))
            return refused
          }
          await must(Effect.flatMap(PortalSessions, (s) => s.end(session)))
          await must(Effect.flatMap(PortalSessions, (s) => s.audit(session, "session.sign_out", session.id, "ok")))
        }
        return json({ success: true }, 200, { "set-cookie": cookie("", 0) })
      }
      const view = PAGES[path.length > "/portal".length ? path.replace(/\/$/, "") : path]
      if (request.method === "GET" && view !== undefined) {
        if (session === undefined) return seeOther("/portal/expired", cookie("", 0))
        return shell(view, session, await must(vendorName(session)))
      }
      return apiError("NotFound", "not_found", "No such route")
    } catch (error) {
      // Logged here, answered without detail (no stack trace or SQL leaves the service).
      await deps.run(Effect.logError("portal request failed", Cause.die(error))).catch(() => undefined)
      return apiError("InternalError", "internal_error", "Internal server error")
    }
  }
}
