import { HttpApiMiddleware, HttpApiSecurity, OpenApi } from "@effect/platform"
import { Context, Schema } from "effect"
import { TooManyRequestsError, UnauthorizedError, UnavailableError } from "./errors.ts"

export interface Organization {
  readonly id: string
  readonly slug: string
  readonly name: string
}

/** The organization the bearer key belongs to; everything below the middleware is scoped to it. */
export class CurrentOrganization extends Context.Tag("CurrentOrganization")<CurrentOrganization, Organization>() {}

/**
 * The organization of a signed-in dashboard session, put in a request's context by the server itself (never read
 * from the request): the dashboard's reads and changes go through the `/v1` handlers scoped to it.
 */
export class SessionOrganization extends Context.Tag("SessionOrganization")<SessionOrganization, Organization>() {}

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  failure: Schema.Union(UnauthorizedError, TooManyRequestsError, UnavailableError),
  provides: CurrentOrganization,
  security: {
    bearerAuth: HttpApiSecurity.bearer.pipe(
      HttpApiSecurity.annotate(
        OpenApi.Description,
        "API key of one organization: sk_test_… on sandbox deployments, sk_live_… on live ones."
      )
    )
  }
}) {}
