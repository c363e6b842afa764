import { Effect, Layer, Option, Redacted } from "effect"
import { Unauthorized } from "../api/errors.ts"
import { Authentication } from "../api/security.ts"
import { keyPrefix } from "../organizations/Organizations.ts"
import { OrganizationsRepo } from "../organizations/OrganizationsRepo.ts"
import { AppConfig } from "../platform/config.ts"
import { sha256Hex } from "../platform/crypto.ts"

const unauthorized = (message: string) => new Unauthorized({ code: "unauthorized", message })

/**
 * Bearer keys: looked up by their SHA-256 (so comparison never touches the secret itself), rejected
 * when revoked or minted for the other environment (decisions.md §2).
 */
export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.gen(function*() {
    const repo = yield* OrganizationsRepo
    const config = yield* AppConfig
    const expectedPrefix = keyPrefix(config.appEnv)

    return {
      bearerAuth: (token) =>
        Effect.gen(function*() {
          const key = Redacted.value(token).trim()
          if (key === "") return yield* unauthorized("Missing API key: send 'Authorization: Bearer <key>'")
          if (!key.startsWith(expectedPrefix)) {
            return yield* unauthorized(`This is a ${config.appEnv} deployment: use a ${expectedPrefix}… key`)
          }
          const found = yield* repo.findByKeyHash(sha256Hex(key))
          return yield* Option.match(found, {
            onNone: () => Effect.fail(unauthorized("Invalid or revoked API key")),
            onSome: ({ environment, organization }) =>
              environment === config.appEnv
                ? Effect.succeed(organization)
                : Effect.fail(unauthorized("Invalid or revoked API key"))
          })
        })
    }
  })
)
