import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { Unauthorized } from "../api/errors.ts"
import { type Organization, Authentication, SessionOrganization } from "../api/security.ts"
import { Authenticator, AuthenticatorLive } from "../organizations/Authenticator.ts"
import { bearerCredential, MALFORMED_AUTHORIZATION } from "./bearer.ts"

/**
 * The organization of a request's `Authorization` header: its bearer key (./bearer.ts) authenticated, a header in
 * another form refused as such, and no header at all as a missing key.
 */
export const authenticateHeader = (
  authenticate: (key: string) => Effect.Effect<Organization, Unauthorized>,
  header: string | undefined
): Effect.Effect<Organization, Unauthorized> => {
  const credential = bearerCredential(header)
  if (credential !== undefined) return authenticate(credential)
  if (header === undefined || header.trim() === "") return authenticate("")
  return Effect.fail(new Unauthorized({ code: "unauthorized", message: MALFORMED_AUTHORIZATION }))
}

/**
 * HttpApi's bearer security, over the same authentication. The token HttpApi hands over is set aside: it is the header
 * past its first 7 characters, whatever they were; the header is read again through `bearerCredential`. A request the
 * dashboard makes on behalf of a signed-in session carries that session's organization in its context
 * (src/dashboard/), which only the server can put there.
 */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(Authenticator, ({ authenticate }) => ({
    bearerAuth: () =>
      Effect.flatMap(
        Effect.serviceOption(SessionOrganization),
        Option.match({
          onSome: Effect.succeed,
          onNone: () =>
            Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
              authenticateHeader(authenticate, request.headers.authorization)
            )
        })
      )
  }))
).pipe(Layer.provideMerge(AuthenticatorLive))
