import { Effect, Layer, Option, Redacted } from "effect"
import { Authentication, SessionOrganization } from "../api/security.ts"
import { Authenticator, AuthenticatorLive } from "../organizations/Authenticator.ts"

/**
 * HttpApi's bearer security, over the same authentication. A request the dashboard makes on behalf of a signed-in
 * session carries that session's organization in its context (src/dashboard/), which only the server can put there.
 */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(Authenticator, ({ authenticate }) => ({
    bearerAuth: (token) =>
      Effect.flatMap(
        Effect.serviceOption(SessionOrganization),
        Option.match({ onSome: Effect.succeed, onNone: () => authenticate(Redacted.value(token)) })
      )
  }))
).pipe(Layer.provideMerge(AuthenticatorLive))
