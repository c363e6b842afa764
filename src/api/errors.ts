import { HttpApiSchema } from "@effect/platform"
import { Schema } from "effect"

/**
 * The wire errors: one class per HTTP status, each carrying the machine `code` of decisions.md §10.
 * On the wire every one of them is the spec's error body `{success: false, error, code, message}`
 * (plus `details` on 400s); the `_tag` never leaves the process. The typed client decodes the body
 * back into the class.
 */
export const Issue = Schema.Struct({
  path: Schema.String,
  message: Schema.String
}).annotations({ identifier: "ValidationIssue" })
export type Issue = typeof Issue.Type

const fields = {
  code: Schema.String,
  message: Schema.String,
  details: Schema.optional(Schema.Array(Issue))
}

type WireFields = {
  readonly code: string
  readonly message: string
  readonly details?: ReadonlyArray<Issue> | undefined
}

/** The spec's error body as it is sent: also one item's answer in a batch (`POST /v1/track/batch`). */
export const ErrorBody = Schema.Struct({
  success: Schema.Literal(false),
  error: Schema.String,
  ...fields
}).annotations({ identifier: "ErrorBody" })

const onWire = <Self extends WireFields, Tag extends string>(
  cls: Schema.Schema<Self, WireFields & { readonly _tag: Tag }>,
  tag: Tag,
  status: number,
  title: string
) =>
  Schema.transform(ErrorBody, cls, {
    strict: true,
    decode: (body) => ({
      _tag: tag,
      code: body.code,
      message: body.message,
      ...(body.details === undefined ? {} : { details: body.details })
    }),
    encode: (error) => ({
      success: false as const,
      error: title,
      code: error.code,
      message: error.message,
      ...(error.details === undefined ? {} : { details: error.details })
    })
  }).annotations({
    identifier: `${tag}Error`,
    description: `${status} ${title}`,
    ...HttpApiSchema.annotations({ status })
  })

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {}
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {}
export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", fields) {}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {}
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", fields) {}
export class TooManyRequests extends Schema.TaggedError<TooManyRequests>()("TooManyRequests", fields) {}
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields) {}
export class NotImplemented extends Schema.TaggedError<NotImplemented>()("NotImplemented", fields) {}
export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", fields) {}
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", fields) {}

export const BadRequestError = onWire(BadRequest, "BadRequest", 400, "Bad Request")
export const UnauthorizedError = onWire(Unauthorized, "Unauthorized", 401, "Unauthorized")
export const PaymentRequiredError = onWire(PaymentRequired, "PaymentRequired", 402, "Payment Required")
export const NotFoundError = onWire(NotFound, "NotFound", 404, "Not Found")
export const ConflictError = onWire(Conflict, "Conflict", 409, "Conflict")
export const PayloadTooLargeError = onWire(PayloadTooLarge, "PayloadTooLarge", 413, "Payload Too Large")
export const UnprocessableError = onWire(Unprocessable, "Unprocessable", 422, "Unprocessable Entity")
export const TooManyRequestsError = onWire(TooManyRequests, "TooManyRequests", 429, "Too Many Requests")
export const InternalErrorError = onWire(InternalError, "InternalError", 500, "Internal Server Error")
export const NotImplementedError = onWire(NotImplemented, "NotImplemented", 501, "Not Implemented")
export const BadGatewayError = onWire(BadGateway, "BadGateway", 502, "Bad Gateway")
export const UnavailableError = onWire(Unavailable, "Unavailable", 503, "Service Unavailable")

export type ApiError =
  | BadRequest
  | Unauthorized
  | PaymentRequired
  | NotFound
  | Conflict
  | PayloadTooLarge
  | Unprocessable
  | TooManyRequests
  | InternalError
  | NotImplemented
  | BadGateway
  | Unavailable

/** Status and title of each wire error, for the places that write the body without a schema. */
export const errorStatus = {
  BadRequest: [400, "Bad Request"],
  Unauthorized: [401, "Unauthorized"],
  PaymentRequired: [402, "Payment Required"],
  NotFound: [404, "Not Found"],
  Conflict: [409, "Conflict"],
  PayloadTooLarge: [413, "Payload Too Large"],
  Unprocessable: [422, "Unprocessable Entity"],
  TooManyRequests: [429, "Too Many Requests"],
  InternalError: [500, "Internal Server Error"],
  NotImplemented: [501, "Not Implemented"],
  BadGateway: [502, "Bad Gateway"],
  Unavailable: [503, "Service Unavailable"]
} as const satisfies Record<ApiError["_tag"], readonly [number, string]>

/** The error body as plain JSON, for responses written outside HttpApi (size limit, unknown route). */
export const errorBody = (tag: ApiError["_tag"], code: string, message: string, details?: ReadonlyArray<Issue>) => ({
  success: false as const,
  error: errorStatus[tag][1],
  code,
  message,
  ...(details === undefined ? {} : { details })
})

/** The machine codes each wire error carries (decisions.md §10): the `code` enum of each status in the document. */
export const errorCodes = {
  BadRequest: ["invalid_request"],
  Unauthorized: ["unauthorized", "invalid_signature"],
  PaymentRequired: ["payment_failed"],
  NotFound: [
    "not_found",
    "customer_not_found",
    "feature_not_found",
    "plan_not_found",
    "pack_not_found",
    "invoice_not_found",
    "subscription_not_found",
    "payment_method_not_found",
    "entity_not_found",
    "organization_not_found",
    "provider_not_supported",
    "credit_note_not_found"
  ],
  Conflict: [
    "customer_ambiguous",
    "customer_conflict",
    "entity_exists",
    "limit_exceeded",
    "invoice_not_open",
    "subscription_not_pending",
    "nothing_to_invoice",
    "idempotency_conflict",
    "change_in_progress",
    "subscription_past_due",
    "change_not_possible",
    "subscription_not_canceling",
    "subscription_ended"
  ],
  PayloadTooLarge: ["payload_too_large"],
  Unprocessable: [
    "provider_not_configured",
    "amount_too_large",
    "refund_exceeds_paid",
    "invoice_not_refundable",
    "coupon_invalid"
  ],
  TooManyRequests: ["rate_limited"],
  InternalError: ["internal_error"],
  NotImplemented: ["not_implemented"],
  BadGateway: ["provider_error"],
  Unavailable: ["unavailable"]
} as const satisfies Record<ApiError["_tag"], ReadonlyArray<string>>
