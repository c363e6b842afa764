import { Effect, Schema, SchemaAST } from "effect"

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

/** The longest customer reference (an email's longest). */
export const CUSTOMER_REF_MAX = 320
/** A reference to a customer: service id, the caller's external id, or email (decisions.md §4). */
export const CustomerRef = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(CUSTOMER_REF_MAX, { message: () => `must be at most ${CUSTOMER_REF_MAX} characters` })
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

/**
 * The request body of a schema that applies defaults on decode (`withDefault`), as clients send it: the same checks,
 * every field with a default optional, its type what the wire carries. The endpoint declares this one, so the typed
 * client (and any generator) never has to send a default; the handler applies them by decoding with `applyDefaults`.
 * test/client.test.ts fails when an endpoint's body applies a default in the contract itself. A filter on a whole
 * struct that has defaults sees the wire form here (fields with defaults may be absent): check such rules in the
 * service, as the sync service does its cross-item rules.
 */
export const wireBody = <A, I>(schema: Schema.Schema<A, I>, identifier: string, description?: string) =>
  Schema.make<I, I, never>(wireAST(schema.ast)).annotations({
    identifier,
    parseOptions: { errors: "all" },
    ...(description === undefined ? {} : { description })
  })

/**
 * The AST of what the wire carries: a struct that applies defaults becomes its encoded side, keeping the annotations
 * (identifier, description, `default`) of the struct and of each field, so the document still names and documents
 * them; everything else (refinements, the numbers' normalising transformations) is kept as it is.
 */
const wireAST = (ast: SchemaAST.AST): SchemaAST.AST => {
  switch (ast._tag) {
    case "Transformation": {
      if (ast.transformation._tag !== "TypeLiteralTransformation" || !SchemaAST.isTypeLiteral(ast.from)) return ast
      const to = SchemaAST.isTypeLiteral(ast.to) ? ast.to : undefined
      const from = wireAST(ast.from) as SchemaAST.TypeLiteral
      const fields = from.propertySignatures.map((p) => {
        const annotations = { ...p.annotations, ...to?.propertySignatures.find((t) => t.name === p.name)?.annotations }
        return new SchemaAST.PropertySignature(p.name, p.type, p.isOptional, p.isReadonly, annotations)
      })
      return new SchemaAST.TypeLiteral(fields, from.indexSignatures, { ...to?.annotations, ...ast.annotations })
    }
    case "TypeLiteral":
      return new SchemaAST.TypeLiteral(
        ast.propertySignatures.map(
          (p) => new SchemaAST.PropertySignature(p.name, wireAST(p.type), p.isOptional, p.isReadonly, p.annotations)
        ),
        ast.indexSignatures.map((i) => new SchemaAST.IndexSignature(i.parameter, wireAST(i.type), i.isReadonly)),
        ast.annotations
      )
    case "Union":
      return SchemaAST.Union.make(ast.types.map(wireAST), ast.annotations)
    case "TupleType":
      return new SchemaAST.TupleType(
        ast.elements.map((e) => new SchemaAST.OptionalType(wireAST(e.type), e.isOptional, e.annotations)),
        ast.rest.map((r) => new SchemaAST.Type(wireAST(r.type), r.annotations)),
        ast.isReadonly,
        ast.annotations
      )
    case "Refinement":
      return new SchemaAST.Refinement(wireAST(ast.from), ast.filter, ast.annotations)
    default:
      return ast
  }
}

/** The request with its defaults applied: decoding cannot fail, the wire body having passed the same checks. */
export const applyDefaults =
  <A, I>(schema: Schema.Schema<A, I>) =>
  (body: I): Effect.Effect<A> =>
    Effect.orDie(Schema.decode(schema)(body))

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

/** An idempotency key: 1 to 255 characters, as a header or a batch item's field. */
export const IDEMPOTENCY_KEY_MAX = 255
export const IdempotencyKey = Schema.String.pipe(Schema.minLength(1), Schema.maxLength(IDEMPOTENCY_KEY_MAX))

/**
 * `Idempotency-Key` (decisions.md §5, §7): a repeat within 24 h returns the first answer (check/track), or answers
 * from the one payment attempt the key claimed (pack purchases, attach, invoice payment).
 */
export const IdempotencyHeaders = Schema.Struct({
  "idempotency-key": Schema.optionalWith(IdempotencyKey, { exact: true })
}).annotations({ parseOptions: { errors: "all" } })
export type IdempotencyHeaders = typeof IdempotencyHeaders.Type
