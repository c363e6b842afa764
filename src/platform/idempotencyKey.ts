import { HttpServerRequest } from "@effect/platform"
import { Effect } from "effect"
import { InvalidInput } from "../domain/errors.ts"
import { sha256Hex } from "./crypto.ts"

export interface IdempotencyKey {
  readonly key: string
  /** What the key was first used for: the same key with another request is a conflict. */
  readonly requestHash: string
}

/**
 * The request's `Idempotency-Key` header, if any, with a hash of what it asks (route and decoded body). Payment
 * routes read it here rather than declaring it, so the typed client's calls stay as they are.
 */
export const idempotencyKeyOf = (route: string, request: unknown) =>
  Effect.flatMap(
    HttpServerRequest.HttpServerRequest,
    (http): Effect.Effect<IdempotencyKey | undefined, InvalidInput> => {
      const key = http.headers["idempotency-key"]
      if (key === undefined) return Effect.succeed(undefined)
      if (key.length === 0 || key.length > 255) {
        return Effect.fail(
          new InvalidInput({
            message: "The Idempotency-Key header must be 1 to 255 characters",
            issues: [{ path: "headers.idempotency-key", message: "must be 1 to 255 characters" }]
          })
        )
      }
      return Effect.succeed({ key, requestHash: sha256Hex(JSON.stringify({ route, request })) })
    }
  )
