import { Effect, Layer, Redacted } from "effect"
import { Authentication } from "../api/security.ts"
import { Authenticator, AuthenticatorLive } from "../organizations/Authenticator.ts"

/** HttpApi's bearer security, over the same authentication. */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(Authenticator, ({ authenticate }) => ({
    bearerAuth: (token) => authenticate(Redacted.value(token))
  }))
).pipe(Layer.provideMerge(AuthenticatorLive))
