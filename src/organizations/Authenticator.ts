import { Context, Effect, Layer, Option } from "effect"
import { Unauthorized } from "../api/errors.ts"
import type { Organization } from "../api/security.ts"
import { AppConfig } from "../platform/config.ts"
import { sha256Hex } from "../platform/crypto.ts"
import { keyPrefix } from "./Organizations.ts"
import { OrganizationsRepo } from "./OrganizationsRepo.ts"

const unauthorized = (message: string) => new Unauthorized({ code: "unauthorized", message })

/**
 * Who a bearer key belongs to: the one authentication of the service, used by HttpApi's security middleware and
 * by the check/track endpoint alike. Keys are looked up by their SHA-256 (comparison never touches the secret
 * itself) and rejected when revoked or minted for the other environment (decisions.md §2).
 */
export class Authenticator extends Context.Tag("Authenticator")<
  Authenticator,
  {
    readonly authenticate: (key: string) => Effect.Effect<Organization, Unauthorized>
  }
>() {}

export const AuthenticatorLive = Layer.effect(
  Authenticator,
  Effect.gen(function* () {
    const repo = yield* OrganizationsRepo
    const config = yield* AppConfig
    const expectedPrefix = keyPrefix(config.appEnv)
    return {
      // Every request's first step: combinators, not a generator (JavaScriptCore recompiled this one's generator
      // body a few hundred times a minute at peak; docs/decisions.md, "Performance").
      authenticate: (raw) => {
        const key = raw.trim()
        if (key === "") return Effect.fail(unauthorized("Missing API key: send 'Authorization: Bearer <key>'"))
        if (!key.startsWith(expectedPrefix)) {
          return Effect.fail(unauthorized(`This is a ${config.appEnv} deployment: use a ${expectedPrefix}… key`))
        }
        return Effect.flatMap(repo.findByKeyHash(sha256Hex(key)), (found) =>
          Option.match(found, {
            onNone: () => Effect.fail(unauthorized("Invalid or revoked API key")),
            onSome: ({ environment, organization }) =>
              environment === config.appEnv
                ? Effect.succeed(organization)
                : Effect.fail(unauthorized("Invalid or revoked API key"))
          })
        )
      }
    }
  })
)
