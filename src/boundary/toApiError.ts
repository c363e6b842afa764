import { Effect } from "effect"
import * as Api from "../api/errors.ts"
import type { DomainError } from "../domain/errors.ts"

/** The api boundary: a domain failure becomes the wire error of its kind, code and message intact. */
export const toApiError = (error: DomainError) => {
  switch (error._tag) {
    case "NotFound":
      return new Api.NotFound({ code: error.code, message: error.message })
    case "Conflict":
      return new Api.Conflict({ code: error.code, message: error.message })
    case "Unprocessable":
      return new Api.Unprocessable({ code: error.code, message: error.message })
    case "InvalidInput":
      return new Api.BadRequest({ code: "invalid_request", message: error.message, details: error.issues })
    case "PaymentFailed":
      return new Api.PaymentRequired({ code: "payment_failed", message: error.message })
    case "ProviderNotConfigured":
      return new Api.Unprocessable({ code: "provider_not_configured", message: error.message })
    case "ProviderFailure":
      return new Api.BadGateway({ code: "provider_error", message: error.message })
    case "InvalidSignature":
      return new Api.Unauthorized({ code: "invalid_signature", message: error.message })
    case "AmountTooLarge":
      return new Api.Unprocessable({ code: "amount_too_large", message: error.message })
  }
}

type WireOf<E> = E extends { readonly _tag: "NotFound" }
  ? Api.NotFound
  : E extends { readonly _tag: "Conflict" }
    ? Api.Conflict
    : E extends { readonly _tag: "Unprocessable" }
      ? Api.Unprocessable
      : E extends { readonly _tag: "InvalidInput" }
        ? Api.BadRequest
        : E extends { readonly _tag: "PaymentFailed" }
          ? Api.PaymentRequired
          : E extends { readonly _tag: "ProviderNotConfigured" }
            ? Api.Unprocessable
            : E extends { readonly _tag: "ProviderFailure" }
              ? Api.BadGateway
              : E extends { readonly _tag: "InvalidSignature" }
                ? Api.Unauthorized
                : E extends { readonly _tag: "AmountTooLarge" }
                  ? Api.Unprocessable
                  : never

/** Maps an effect's domain failures onto their wire errors, keeping the precise union in the type. */
export const mapDomainErrors = <A, E extends DomainError, R>(
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, WireOf<E>, R> => Effect.mapError(effect, (e) => toApiError(e) as WireOf<E>)
