import { Cause, Context, Either, Exit, Option, type Effect } from "effect"
import { type ApiError, errorBody, errorStatus } from "../api/errors.ts"
import { type Organization, SessionOrganization } from "../api/security.ts"
import { toApiError } from "../boundary/toApiError.ts"
import type { DomainError } from "../domain/errors.ts"
import { safeEqual } from "../platform/crypto.ts"
import type { Asset } from "./assets.ts"

// What the service's own pages share (the vendor's dashboard, decisions.md §13, and the customer portal, §17): their
// headers, JSON and error answers, cookies, the same-origin and CSRF checks, and serving their built assets.

/** No outside source, no inline script, no framing. */
export const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

export const baseHeaders = {
  "content-security-policy": CSP,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cache-control": "no-store"
}

export const json = (body: unknown, status = 200, extra: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), {
    status,
    headers: { ...baseHeaders, "content-type": "application/json", ...extra }
  })

export const apiError = (tag: ApiError["_tag"], code: string, message: string) =>
  json(errorBody(tag, code, message), errorStatus[tag][0])

export const forbidden = (code: string, message: string) =>
  json({ success: false, error: "Forbidden", code, message }, 403)

export const domainError = (error: DomainError) => {
  const wire = toApiError(error)
  const details = "details" in wire ? wire.details : undefined
  return json(errorBody(wire._tag, wire.code, wire.message, details), errorStatus[wire._tag][0])
}

export const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!)

/** An HTML page (a shell its script fills), with the pages' headers. */
export const html = (body: string) =>
  new Response(body, { headers: { ...baseHeaders, "content-type": "text/html; charset=utf-8" } })

/** A `303` to another page, clearing the cookie of a session that is no more. */
export const seeOther = (location: string, clearCookie: string) =>
  new Response(null, { status: 303, headers: { ...baseHeaders, location, "set-cookie": clearCookie } })

export const cookieOf = (request: Request, name: string): string | undefined => {
  const header = request.headers.get("cookie")
  if (header === null) return undefined
  for (const part of header.split(";")) {
    const [key, ...value] = part.trim().split("=")
    if (key === name) return value.join("=")
  }
  return undefined
}

/**
 * A session cookie: HttpOnly, SameSite=Strict, on its page's path only, and Secure when the page is reached over
 * https (directly or behind a proxy).
 */
export const sessionCookie =
  (request: Request, name: string, path: string) =>
  (value: string, maxAgeSeconds: number): string =>
    `${name}=${value}; Path=${path}; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}` +
    (new URL(request.url).protocol === "https:" || request.headers.get("x-forwarded-proto") === "https"
      ? "; Secure"
      : "")

/** A change must come from the page's own origin (browsers send `Origin` on every POST). */
export const sameOrigin = (request: Request) => {
  const origin = request.headers.get("origin")
  if (origin === null) return request.headers.get("sec-fetch-site") !== "cross-site"
  const host = request.headers.get("host")
  try {
    return host !== null && new URL(origin).host === host
  } catch {
    return false
  }
}

/** Same origin and the session's CSRF token in `x-csrf-token` (a header a cross-site form cannot send). */
export const csrfOk = (request: Request, csrfToken: string) =>
  sameOrigin(request) && safeEqual(request.headers.get("x-csrf-token") ?? "", csrfToken)

/** A path segment as text; a malformed escape (`%E0%A4%A`) is no such object, never a 500. */
export const segment = (raw: string): string | undefined => {
  try {
    return decodeURIComponent(raw)
  } catch {
    return undefined
  }
}

export const readJson = async (request: Request): Promise<Record<string, unknown>> => {
  try {
    const body = (await request.json()) as unknown
    return typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

/** `<organization id>.<secret>`: the organization scopes the lookup, the secret (stored as its SHA-256) is checked. */
export const splitToken = (
  value: string
): Option.Option<{ readonly organizationId: string; readonly secret: string }> => {
  const dot = value.indexOf(".")
  if (dot <= 0 || dot === value.length - 1 || value.length > 200) return Option.none()
  return Option.some({ organizationId: value.slice(0, dot), secret: value.slice(dot + 1) })
}

/**
 * An effect run on the application's runtime, its expected failure as `Left`; a defect (or a layer's failure) is
 * thrown, for the page's handler to log and answer as a 500 without detail.
 */
export const eitherRunner =
  <R>(run: <A, E>(effect: Effect.Effect<A, E, R>) => Promise<Exit.Exit<A, unknown>>) =>
  async <A, E>(effect: Effect.Effect<A, E, R>): Promise<Either.Either<A, E>> => {
    const exit = await run(effect)
    if (Exit.isSuccess(exit)) return Either.right(exit.value)
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure)) return Either.left(failure.value as E)
    throw Cause.squash(exit.cause)
  }

/** One of a page's assets (GET only), gzipped when the browser takes it, revalidated by its etag. */
export const serveAsset = (request: Request, asset: Asset | undefined) => {
  if (asset === undefined || request.method !== "GET") return apiError("NotFound", "not_found", "No such file")
  const gzip = (request.headers.get("accept-encoding") ?? "").includes("gzip")
  return new Response(gzip ? asset.gzip : asset.body, {
    headers: {
      ...baseHeaders,
      "content-type": asset.type,
      "cache-control": "no-cache",
      etag: asset.etag,
      vary: "accept-encoding",
      ...(gzip ? { "content-encoding": "gzip" } : {})
    }
  })
}

/** A response of HttpApi's (a `/v1` answer) with the pages' headers. */
export const withPageHeaders = async (response: Response) => {
  const headers = new Headers(response.headers)
  for (const [k, v] of Object.entries(baseHeaders)) headers.set(k, v)
  return new Response(await response.arrayBuffer(), { status: response.status, headers })
}

/**
 * One `/v1` request made for a page's session, through HttpApi's own handlers (`v1`), with the session's organization
 * in the request's context (`SessionOrganization`, which only the server can put there): the same handlers, services
 * and events as a vendor's request with a key.
 */
export const callV1 =
  (v1: (request: Request, context: Context.Context<never>) => Promise<Response>) =>
  (
    request: Request,
    context: Context.Context<never>,
    organization: Organization,
    method: "GET" | "POST" | "DELETE",
    pathAndQuery: string,
    body?: unknown,
    /** A POST's body as the page sent it (HttpApi then judges it exactly as a vendor's), instead of `body`. */
    rawBody?: string
  ) =>
    v1(
      new Request(new URL(pathAndQuery, request.url).href, {
        method,
        headers: { accept: "application/json", "content-type": "application/json" },
        ...(method === "POST" ? { body: rawBody ?? JSON.stringify(body ?? {}) } : {})
      }),
      Context.add(context, SessionOrganization, organization) as Context.Context<never>
    )
