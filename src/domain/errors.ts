import { Schema } from "effect"
import { errorCodes } from "../api/errors.ts"

/**
 * Domain failures, by kind. Each carries the machine code of decisions.md §10 so the api boundary
 * can render it without knowing the feature; nothing here knows about HTTP.
 */
// The codes are the contract's (src/api/errors.ts, each status's enum in the document): one list for both.
export const NotFoundCode = Schema.Literal(...errorCodes.NotFound)
export const ConflictCode = Schema.Literal(...errorCodes.Conflict)
export const UnprocessableCode = Schema.Literal(...errorCodes.Unprocessable)

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  code: NotFoundCode,
  message: Schema.String
}) {}

export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  code: ConflictCode,
  message: Schema.String
}) {}

/** A well-formed request the service cannot carry out as asked (a refund past what was paid). */
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", {
  code: UnprocessableCode,
  message: Schema.String
}) {}

export class InvalidInput extends Schema.TaggedError<InvalidInput>()("InvalidInput", {
  message: Schema.String,
  issues: Schema.Array(Schema.Struct({ path: Schema.String, message: Schema.String }))
}) {}

export class PaymentFailed extends Schema.TaggedError<PaymentFailed>()("PaymentFailed", {
  message: Schema.String
}) {}

export class ProviderNotConfigured extends Schema.TaggedError<ProviderNotConfigured>()("ProviderNotConfigured", {
  message: Schema.String
}) {}

export class ProviderFailure extends Schema.TaggedError<ProviderFailure>()("ProviderFailure", {
  message: Schema.String
}) {}

/**
 * An amount of money past what a JSON number carries exactly (`assertMoneyFitsJson` in money.ts): refused where it
 * would be billed or shown, never sent rounded.
 */
export class AmountTooLarge extends Schema.TaggedError<AmountTooLarge>()("AmountTooLarge", {
  message: Schema.String
}) {}

/** A webhook whose signature does not verify: nothing in it is trusted. */
export class InvalidSignature extends Schema.TaggedError<InvalidSignature>()("InvalidSignature", {
  message: Schema.String
}) {}

export type DomainError =
  | NotFound
  | Conflict
  | Unprocessable
  | InvalidInput
  | PaymentFailed
  | ProviderNotConfigured
  | ProviderFailure
  | InvalidSignature
  | AmountTooLarge

export const customerNotFound = (ref: string) =>
  new NotFound({ code: "customer_not_found", message: `No customer matches '${ref}'` })
