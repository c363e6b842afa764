import { Schema } from "effect"

/**
 * Domain failures, by kind. Each carries the machine code of decisions.md §10 so the api boundary
 * can render it without knowing the feature; nothing here knows about HTTP.
 */
export const NotFoundCode = Schema.Literal(
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
  "not_found"
)
export const ConflictCode = Schema.Literal(
  "customer_ambiguous",
  "customer_conflict",
  "entity_exists",
  "limit_exceeded",
  "invoice_not_open",
  "subscription_not_pending",
  "nothing_to_invoice",
  "idempotency_conflict"
)

export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", {
  code: NotFoundCode,
  message: Schema.String
}) {}

export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", {
  code: ConflictCode,
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

/** A webhook whose signature does not verify: nothing in it is trusted. */
export class InvalidSignature extends Schema.TaggedError<InvalidSignature>()("InvalidSignature", {
  message: Schema.String
}) {}

export type DomainError =
  NotFound | Conflict | InvalidInput | PaymentFailed | ProviderNotConfigured | ProviderFailure | InvalidSignature

export const customerNotFound = (ref: string) =>
  new NotFound({ code: "customer_not_found", message: `No customer matches '${ref}'` })
