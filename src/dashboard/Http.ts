import { Cause, Context, Effect, Either, type Exit, Option } from "effect"
import { errorBody } from "../api/errors.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { Coupons } from "../catalog/coupons.ts"
import { CustomerDiscounts } from "../catalog/customerDiscounts.ts"
import { TaxRates, toWireTaxRate } from "../catalog/taxRates.ts"
import { Credits } from "../credits/Credits.ts"
import { Customers } from "../customers/Customers.ts"
import { Organizations } from "../organizations/Organizations.ts"
import {
  apiError,
  callV1,
  cookieOf,
  csrfOk,
  domainError,
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
import { assets } from "./assets.ts"
import { catalogCoupons, customerDiscount } from "./discounts.ts"
import { entities, overview } from "./Reads.ts"
import { DashboardSessions, SESSION_MS, type Session, type SignedIn } from "./Sessions.ts"
import type { SqlClient } from "@effect/sql"

export const COOKIE = "billing_dashboard"
export { CSP } from "../web/pages.ts"

type Services =
  | DashboardSessions
  | Customers
  | Catalog
  | TaxRates
  | Coupons
  | CustomerDiscounts
  | Credits
  | Organizations
  | SqlClient.SqlClient

export interface DashboardDeps {
  /** Runs on the application's runtime (whose failures include the layers' own, hence `unknown`). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, Services>) => Promise<Exit.Exit<A, unknown>>
  /** HttpApi's handler: `/v1` requests made for a session carry its organization in their context. */
  readonly v1: (request: Request, context: Context.Context<never>) => Promise<Response>
}

// `/v1` routes a page reads (GET) and the changes it may make (POST), by path. Anything else is refused.
const V1_READS = [
  /^\/v1\/customers$/,
  /^\/v1\/customers\/[^/]+$/,
  /^\/v1\/customers\/[^/]+\/usage\/history$/,
  /^\/v1\/subscriptions$/,
  /^\/v1\/billing\/invoices$/,
  /^\/v1\/billing\/profile$/,
  /^\/v1\/wallet$/,
  /^\/v1\/events$/,
  /^\/v1\/webhook-endpoints$/,
  /^\/v1\/webhook-endpoints\/[^/]+\/deliveries$/,
  /^\/v1\/credit-systems$/,
  /^\/v1\/credit-packs$/
]
// A change is forwarded with its body as sent, so `/v1` validates and answers it exactly as for an API key (the
// error body with its `details` included); the audit names the object by the path's id (the profile: the org).
type ChangeMethod = "POST" | "DELETE"
const V1_CHANGES: ReadonlyArray<readonly [ChangeMethod, RegExp, string]> = [
  ["POST", /^\/v1\/subscriptions\/([^/]+)\/cancel$/, "subscription.cancel"],
  ["POST", /^\/v1\/subscriptions\/([^/]+)\/cancel-change$/, "subscription.cancel_change"],
  ["POST", /^\/v1\/events\/([^/]+)\/resend$/, "event.resend"],
  ["POST", /^\/v1\/billing\/profile$/, "billing_profile.update"],
  ["POST", /^\/v1\/customers\/([^/]+)\/discount$/, "customer_discount.apply"],
  ["DELETE", /^\/v1\/customers\/([^/]+)\/discount$/, "customer_discount.remove"]
]

const PAGES = /^\/dashboard(?:\/(?:customers(?:\/[^/]+)?|catalog|invoices|webhooks|keys|billing-profile))?\/?$/

/**
 * The page: a shell the script fills from the JSON routes. The only server-written values are the organization's
 * name and the CSRF token, both escaped; customer data only ever reaches the page as JSON, rendered as text.
 */
const shell = (view: string, session: Session | undefined) =>
  html(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">` +
      `<title>Billing dashboard</title><link rel="icon" href="data:,">` +
      `<link rel="stylesheet" href="/dashboard/assets/app.css">` +
      `<meta name="csrf-token" content="${escapeHtml(session?.csrfToken ?? "")}">` +
      `<script type="module" src="/dashboard/assets/app.js"></script></head>` +
      `<body data-view="${escapeHtml(view)}" data-org="${escapeHtml(session?.organization.name ?? "")}">` +
      `<noscript>The dashboard needs JavaScript.</noscript><div id="app"></div></body></html>`
  )

export const makeDashboard = (deps: DashboardDeps) => {
  const cookieFor = (request: Request) => sessionCookie(request, COOKIE, "/dashboard")
  const run = eitherRunner(deps.run)

  const signedIn = async (request: Request, signed: SignedIn) => {
    const { session } = signed
    await run(
      Effect.flatMap(DashboardSessions, (s) =>
        s.audit(session, "session.sign_in", session.keyId ?? "one-time link", "ok")
      )
    )
    return json({ success: true, organization: signed.session.organization.slug }, 200, {
      "set-cookie": cookieFor(request)(signed.cookie, SESSION_MS / 1000)
    })
  }

  /** One `/v1` request for the session's organization, through HttpApi's handlers (the same services and events). */
  const v1 = callV1(deps.v1)

  const audited = async (session: Session, action: string, objectId: string, response: Response) => {
    await run(
      Effect.flatMap(DashboardSessions, (s) =>
        s.audit(session, action, objectId, response.ok ? "ok" : `refused ${response.status}`)
      )
    )
    return response
  }

  const api = async (
    request: Request,
    context: Context.Context<never>,
    session: Session,
    path: string,
    url: URL
  ): Promise<Response> => {
    const org = session.organization
    if (request.method === "GET") {
      if (path.startsWith("/v1/")) {
        if (!V1_READS.some((r) => r.test(path))) return apiError("NotFound", "not_found", "No such route")
        return withPageHeaders(await v1(request, context, org, "GET", path + url.search))
      }
      if (path === "/overview") return json((await run(overview(org.id))).pipe(Either.getOrThrow))
      if (path === "/catalog") {
        const snapshot = (await run(Effect.flatMap(Catalog, (c) => c.snapshot(org.id)))).pipe(Either.getOrThrow)
        const taxRates = (await run(Effect.flatMap(TaxRates, (t) => t.list(org.id)))).pipe(Either.getOrThrow)
        const coupons = (await run(catalogCoupons(org.id))).pipe(Either.getOrThrow)
        return json({
          taxRates: taxRates.map(toWireTaxRate),
          coupons,
          features: [...snapshot.features.values()],
          plans: [...snapshot.plans.values()],
          creditSystems: [...snapshot.creditSystems.values()],
          creditPacks: [...snapshot.creditPacks.values()].map((p) => ({
            ...p,
            creditSystem: snapshot.creditSystemsById.get(p.creditSystemId)?.slug ?? null
          }))
        })
      }
      const customerPart = /^\/customers\/([^/]+)\/(balances|entities|discount)$/.exec(path)
      if (customerPart !== null) {
        const ref = segment(customerPart[1]!)
        if (ref === undefined) return apiError("NotFound", "customer_not_found", "No such customer")
        const found = await run(Effect.flatMap(Customers, (c) => c.resolve(org.id, ref)))
        if (Either.isLeft(found)) return domainError(found.left)
        const customer = found.right
        if (customerPart[2] === "entities")
          return json({ entities: (await run(entities(org.id, customer.id))).pipe(Either.getOrThrow) })
        if (customerPart[2] === "discount")
          return json({ discount: (await run(customerDiscount(org.id, customer.id))).pipe(Either.getOrThrow) })
        // Every feature's state as check answers it (a check without sendEvent changes nothing).
        const snapshot = (await run(Effect.flatMap(Catalog, (c) => c.snapshot(org.id)))).pipe(Either.getOrThrow)
        const features = [...snapshot.features.values()]
        const states = await Promise.all(
          features.map(async (f) => {
            const answer = await v1(request, context, org, "POST", "/v1/check", {
              customer: customer.id,
              feature: f.slug,
              value: 0
            })
            return { feature: { slug: f.slug, name: f.name, type: f.type, unit: f.unit }, state: await answer.json() }
          })
        )
        return json({ balances: states })
      }
      if (path === "/keys") {
        const keys = (await run(Effect.flatMap(Organizations, (o) => o.listKeys(org.id)))).pipe(Either.getOrThrow)
        return json({ keys, current: session.keyId })
      }
      return apiError("NotFound", "not_found", "No such route")
    }
    if (request.method !== "POST" && request.method !== "DELETE") {
      return apiError("NotFound", "not_found", "No such route")
    }
    // Every change: same origin and the session's CSRF token (a header a cross-site form cannot send).
    if (!csrfOk(request, session.csrfToken)) {
      return forbidden("csrf_token_invalid", "This change lacks the dashboard's CSRF token: reload the page")
    }
    for (const [method, pattern, action] of V1_CHANGES) {
      const match = pattern.exec(path)
      if (match !== null && request.method === method) {
        const raw = method === "POST" ? await request.text() : undefined
        const answer = await withPageHeaders(
          await v1(request, context, org, method, path, undefined, raw === undefined || raw === "" ? "{}" : raw)
        )
        const objectId = match[1] === undefined ? org.id : (segment(match[1]) ?? match[1])
        return audited(session, action, objectId, answer)
      }
    }
    if (request.method !== "POST") return apiError("NotFound", "not_found", "No such route")
    const body = await readJson(request)
    if (path === "/credits/grant") {
      const customer = typeof body.customer === "string" ? body.customer : ""
      const system = typeof body.creditSystem === "string" ? body.creditSystem : ""
      const amount = typeof body.amount === "number" ? body.amount : Number(body.amount)
      if (customer === "" || system === "" || !Number.isFinite(amount) || amount <= 0) {
        return audited(
          session,
          "credits.grant",
          customer,
          json(
            errorBody("BadRequest", "invalid_request", "customer, creditSystem and a positive amount are required"),
            400
          )
        )
      }
      const granted = await run(Effect.flatMap(Credits, (c) => c.grant(org.id, customer, system, amount, "bonus")))
      return audited(
        session,
        "credits.grant",
        `${customer}/${system}`,
        Either.isLeft(granted) ? domainError(granted.left) : json({ success: true, ...granted.right })
      )
    }
    if (path === "/keys") {
      const created = (await run(Effect.flatMap(Organizations, (o) => o.createKey(org.id)))).pipe(Either.getOrThrow)
      return audited(session, "api_key.create", created.key.id, json({ success: true, ...created }))
    }
    const revoke = /^\/keys\/([^/]+)\/revoke$/.exec(path)
    if (revoke !== null) {
      const keyId = segment(revoke[1]!) ?? revoke[1]!
      const revoked = await run(
        Effect.gen(function* () {
          const orgs = yield* Organizations
          const keys = yield* orgs.listKeys(org.id)
          // Another organization's key is as unknown as a key that does not exist.
          if (!keys.some((k) => k.id === keyId)) return Option.none()
          return Option.some(yield* orgs.revokeKey(keyId))
        })
      )
      const answer =
        Either.isRight(revoked) && Option.isSome(revoked.right)
          ? json({ success: true, key: revoked.right.value })
          : apiError("NotFound", "not_found", `No API key '${keyId}'`)
      return audited(session, "api_key.revoke", keyId, answer)
    }
    return apiError("NotFound", "not_found", "No such route")
  }

  /** Answers every `/dashboard` request. */
  return async (request: Request, context: Context.Context<never> = Context.empty()): Promise<Response> => {
    const url = new URL(request.url)
    const path = url.pathname
    const cookie = cookieFor(request)
    try {
      if (path.startsWith("/dashboard/assets/")) {
        return serveAsset(request, (await assets()).get(path.slice("/dashboard/assets/".length)))
      }
      const sessions = (effect: (s: typeof DashboardSessions.Service) => Effect.Effect<unknown, unknown>) =>
        run(Effect.flatMap(DashboardSessions, effect))
      if (path === "/dashboard/sign-in" || path.startsWith("/dashboard/link/")) {
        if (request.method === "GET") return shell(path === "/dashboard/sign-in" ? "sign-in" : "link", undefined)
      }
      if (request.method === "POST" && (path === "/dashboard/sign-in" || path === "/dashboard/link")) {
        if (!sameOrigin(request)) return forbidden("cross_origin", "Sign in from the dashboard's own page")
        const body = await readJson(request)
        if (path === "/dashboard/sign-in") {
          const key = typeof body.key === "string" ? body.key : ""
          const signed = await run(Effect.flatMap(DashboardSessions, (s) => s.signInWithKey(key)))
          return Either.isLeft(signed)
            ? apiError("Unauthorized", "unauthorized", "Invalid or revoked API key")
            : signedIn(request, signed.right)
        }
        const token = typeof body.token === "string" ? body.token : ""
        const redeemed = await run(Effect.flatMap(DashboardSessions, (s) => s.redeemLink(token)))
        return Either.isRight(redeemed) && Option.isSome(redeemed.right)
          ? signedIn(request, redeemed.right.value)
          : apiError("Unauthorized", "unauthorized", "This sign-in link is unknown, used or expired")
      }
      const value = cookieOf(request, COOKIE)
      const found =
        value === undefined
          ? Option.none()
          : (await run(Effect.flatMap(DashboardSessions, (s) => s.find(value)))).pipe(Either.getOrThrow)
      const session = Option.getOrUndefined(found)
      if (path.startsWith("/dashboard/api/")) {
        if (session === undefined) return apiError("Unauthorized", "unauthorized", "Sign in to the dashboard again")
        return await api(request, context, session, path.slice("/dashboard/api".length), url)
      }
      if (path === "/dashboard/sign-out" && request.method === "POST") {
        if (session !== undefined) {
          if (!csrfOk(request, session.csrfToken)) {
            return forbidden("csrf_token_invalid", "This change lacks the dashboard's CSRF token: reload the page")
          }
          await sessions((s) => s.end(session))
          await sessions((s) => s.audit(session, "session.sign_out", session.id, "ok"))
        }
        return json({ success: true }, 200, { "set-cookie": cookie("", 0) })
      }
      if (request.method === "GET" && PAGES.test(path)) {
        if (session === undefined) return seeOther("/dashboard/sign-in", cookie("", 0))
        const segments = path.split("/").filter((s) => s !== "")
        const view = segments.length === 3 ? "customer" : (segments[1] ?? "overview")
        return shell(view, session)
      }
      return apiError("NotFound", "not_found", "No such route")
    } catch (error) {
      // Logged here, answered without detail (no stack trace or SQL leaves the service).
      await deps.run(Effect.logError("dashboard request failed", Cause.die(error))).catch(() => undefined)
      return apiError("InternalError", "internal_error", "Internal server error")
    }
  }
}
