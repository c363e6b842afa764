/**
 * Rows as the repositories read them, decoded by schemas at the repository boundary: a row that is not what its
 * table holds (a missing column, a value of another type, JSON that does not parse or has another shape) is a defect
 * naming the table and the columns, instead of an `undefined` travelling into the domain.
 *
 * Rows arrive camel-cased (the SqlClient transforms names) and differ by database only where these schemas say:
 * - BIGINT: a number on both, or a bigint on PostgreSQL past 2^53 (`parseInt8` in ./Database.ts); INTEGER and
 *   SMALLINT: numbers on both;
 * - booleans: SMALLINT 0/1;
 * - JSON and money: TEXT (money a decimal string of minor units).
 *
 * The defect never carries a value of the row (logs must never contain data): only the table, the columns (and the
 * keys and indices inside a JSON column's schema) and what kind of problem each has.
 *
 * Not for the per-request path of check/track (src/entitlements/), which maps its one JSON row by hand.
 */
import { Data, Effect, Either, Option, ParseResult, Schema } from "effect"

// ---- column schemas ----

/** An integer column (BIGINT, INTEGER, SMALLINT) as a number: a bigint (PostgreSQL past 2^53) is converted. */
export const DbInt = Schema.transform(Schema.Union(Schema.Number, Schema.BigIntFromSelf), Schema.Number, {
  strict: true,
  decode: (value) => Number(value),
  encode: (n) => n
}).annotations({ identifier: "DbInt" })

export const NullableDbInt = Schema.NullOr(DbInt)

/** An instant: epoch milliseconds in a BIGINT. */
export const Millis = DbInt.annotations({ identifier: "Millis" })

export const NullableMillis = Schema.NullOr(Millis)

/** A boolean stored as SMALLINT 0/1: any other value is not a boolean. */
export const Flag = Schema.transform(Schema.Literal(0, 1), Schema.Boolean, {
  strict: true,
  decode: (value) => value === 1,
  encode: (b) => (b ? 1 : 0)
}).annotations({ identifier: "Flag" })

/** Any integer-valued number: SQLite gives one past 2^53 as a number too (already rounded when it is read). */
const IntegerNumber = Schema.Number.pipe(Schema.filter((n) => Number.isInteger(n)))

/**
 * A BIGINT of micro-units as a bigint: an integer number (both databases), or a bigint (PostgreSQL past 2^53, exact).
 */
export const MicroUnits = Schema.transform(Schema.Union(IntegerNumber, Schema.BigIntFromSelf), Schema.BigIntFromSelf, {
  strict: true,
  decode: (value) => (typeof value === "bigint" ? value : BigInt(value)),
  encode: (big) => big
}).annotations({ identifier: "MicroUnits" })

/** A JSON text column holding what `schema` describes. */
export const JsonText = <A, I>(schema: Schema.Schema<A, I, never>) => Schema.parseJson(schema)

/**
 * A JSON object, kept as parsed (not rebuilt key by key, so a key such as `__proto__` stays an own key as
 * `JSON.parse` made it); an array, a string or `null` is not one.
 */
export const JsonObject = Schema.declare(
  (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u),
  { identifier: "JsonObject" }
)

/** A JSON text column holding an object (metadata, data): `Record<string, unknown>`. */
export const JsonObjectText = Schema.parseJson(JsonObject)

/**
 * `schema` as the schema of a record type declared elsewhere: the compiler checks that it decodes to exactly `A`
 * (`recordSchema<Feature>()(Schema.Struct({ … }))`), so the record types stay where they are.
 */
export const recordSchema =
  <A>() =>
  <I>(schema: Schema.Schema<A, I, never>): Schema.Schema<A, I, never> =>
    schema

// ---- decoding rows ----

/** A row that does not have the shape its table's schema describes. */
export class RowShapeError extends Data.TaggedError("RowShapeError")<{
  readonly table: string
  /** The columns (`lines[0].amount` inside JSON) and what is wrong with each; never their values. */
  readonly problems: ReadonlyArray<string>
  readonly message: string
}> {}

const PROBLEMS: Record<ParseResult.ParseIssue["_tag"], string> = {
  Missing: "missing",
  Type: "unexpected value",
  Refinement: "unexpected value",
  Transformation: "unreadable",
  Unexpected: "unexpected",
  Forbidden: "not decodable",
  Pointer: "unexpected",
  Composite: "unexpected"
}

/** `features[0].limit`: property names and indices only, which come from the schema and the row's position. */
const pathText = (path: ReadonlyArray<PropertyKey>) =>
  path.reduce<string>(
    (text, key) => (typeof key === "number" ? `${text}[${key}]` : text === "" ? String(key) : `${text}.${String(key)}`),
    ""
  )

/**
 * What a parse error says, without the values it quotes: the path of each issue and its kind. (No row schema uses
 * `Schema.Record`, whose keys, being data, would appear in paths; JSON objects are `JsonObject`, opaque.)
 */
const problemsOf = (error: ParseResult.ParseError, dropIndex: boolean): ReadonlyArray<string> => {
  const seen = new Set<string>()
  for (const issue of ParseResult.ArrayFormatter.formatErrorSync(error)) {
    const path = dropIndex ? issue.path.slice(1) : issue.path
    seen.add(`${path.length === 0 ? "(row)" : pathText(path)}: ${PROBLEMS[issue._tag] ?? "unexpected"}`)
  }
  return [...seen]
}

const rowShapeError = (table: string, problems: ReadonlyArray<string>) =>
  new RowShapeError({
    table,
    problems,
    message: `A row of table ${table} does not have the expected shape: ${problems.join(", ")}`
  })

/**
 * Decodes a statement's rows with `schema` (compiled once), as a defect naming `table` when one does not fit.
 * `R` is `never`: row schemas need no services.
 */
export const decodeRows = <A, I>(table: string, schema: Schema.Schema<A, I, never>) => {
  const decode = Schema.decodeUnknownEither(Schema.Array(schema), { errors: "all" })
  return (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<A>> =>
    Either.match(decode(rows), {
      onLeft: (error) => Effect.die(rowShapeError(table, problemsOf(error, true))),
      onRight: Effect.succeed
    })
}

/** The first row, decoded (`None` when there is none); as `decodeRows`. */
export const decodeFirstRow = <A, I>(table: string, schema: Schema.Schema<A, I, never>) => {
  const decode = Schema.decodeUnknownEither(schema, { errors: "all" })
  return (rows: ReadonlyArray<unknown>): Effect.Effect<Option.Option<A>> =>
    rows.length === 0
      ? Effect.succeedNone
      : Either.match(decode(rows[0]), {
          onLeft: (error) => Effect.die(rowShapeError(table, problemsOf(error, false))),
          onRight: Effect.succeedSome
        })
}
