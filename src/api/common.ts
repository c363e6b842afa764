import { Schema } from "effect"

/** Shared field schemas of the contract. */

export const EpochMillis = Schema.Number.annotations({ description: "Unix epoch milliseconds" })
export const IsoDateTime = Schema.String.annotations({ description: "ISO 8601 UTC date-time", format: "date-time" })

export const Metadata = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  identifier: "Metadata",
  description: "Free-form key/value map"
})

export const NonEmptyString = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))

export const Email = Schema.String.pipe(
  Schema.maxLength(320),
  Schema.pattern(/^[^\s@]+@[^\s@]+\.[^\s@]+$/, { message: () => "must be an email address" })
).annotations({ format: "email", identifier: "Email" })

export const Url = Schema.String.pipe(
  Schema.maxLength(2048),
  Schema.filter((s) => URL.canParse(s) && /^https?:/i.test(s), { message: () => "must be an http(s) URL" })
).annotations({ format: "uri", identifier: "Url" })

/** A reference to a customer: service id, the caller's external id, or email (decisions.md §4). */
export const CustomerRef = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(320, { message: () => "must be at most 320 characters" })
).annotations({ description: "Customer id, external id or email" })

export const Success = Schema.Literal(true)

/**
 * Request schemas report every invalid field, not just the first (decisions.md §10). Optional fields
 * with a default are plain `optional` on the wire, their default documented; the handler applies it,
 * so the typed client need not send it.
 */
export const allErrors = { parseOptions: { errors: "all" as const } }

/** An optional field with its default, applied on decode and shown in the OpenAPI document. */
export const withDefault = <S extends Schema.Schema.Any>(self: S, value: Schema.Schema.Type<S>, description?: string) =>
  Schema.optionalWith(self, { default: () => value, exact: true }).annotations({
    default: value,
    ...(description === undefined ? {} : { description })
  })

/** A literal union whose decode failure reads "must be one of …" instead of one issue per member. */
export const oneOf = <const L extends readonly [string, ...Array<string>]>(identifier: string, ...values: L) =>
  Schema.Literal(...values).annotations({
    identifier,
    message: () => ({ message: `must be one of ${values.join(", ")}`, override: true })
  })

/**
 * An optional field whose default the server applies (documented in the OpenAPI document): optional for the
 * typed client as well, unlike `withDefault`, whose decoded type has the field always present.
 */
export const optionalWithServerDefault = <S extends Schema.Schema.Any>(
  self: S,
  value: Schema.Schema.Type<S>,
  description?: string
) =>
  Schema.optionalWith(self, { exact: true }).annotations({
    default: value,
    ...(description === undefined ? {} : { description })
  })

/** A URL the service returns (a checkout page); unlike `Url`, not validated on the way out. */
export const UriString = Schema.String.annotations({ format: "uri" })

/** `?customer=` on list routes: optional, any customer reference. */
export const OptionalCustomerQuery = Schema.Struct({
  customer: Schema.optionalWith(CustomerRef, { exact: true })
}).annotations({ parseOptions: { errors: "all" } })

/**
 * `Idempotency-Key` (decisions.md §5, §7): a repeat within 24 h returns the first answer (check/track), or answers
 * from the one payment attempt the key claimed (pack purchases, attach, invoice payment).
 */
export const IdempotencyHeaders = Schema.Struct({
  "idempotency-key": Schema.optionalWith(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(255)), {
    exact: true
  })
}).annotations({ parseOptions: { errors: "all" } })
export type IdempotencyHeaders = typeof IdempotencyHeaders.Type
