import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Either, ParseResult, Schema, SchemaAST } from "effect"
import {
  CustomerRef,
  Email,
  IdempotencyHeaders,
  IdempotencyKey,
  IsoDateTime,
  Metadata,
  NonEmptyString,
  oneOf,
  optionalWithServerDefault
} from "./common.ts"
import { UsageValue } from "./numbers.ts"
import { BadRequestError, ConflictError, ErrorBody } from "./errors.ts"
import { Authentication } from "./security.ts"

/** The reasons an entitlement answer carries (decisions.md §5): check codes / track codes / denials. */
export const EntitlementCode = Schema.Literal(
  "access_granted",
  "tracked",
  "overage_allowed",
  "tracked_overage",
  "addon_credits_used",
  "limit_exceeded",
  "insufficient_credits",
  "customer_not_found",
  "customer_ambiguous",
  "feature_not_found",
  "entity_not_found",
  "no_active_subscription",
  "feature_not_in_plan"
).annotations({ identifier: "EntitlementCode" })
export type EntitlementCode = typeof EntitlementCode.Type

/** Used to auto-create the customer on check/track/attach when it does not exist (decisions.md §4). */
export const CustomerData = Schema.Struct({
  email: Schema.optionalWith(Email, { exact: true }),
  name: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(256)), { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true })
}).annotations({
  identifier: "CustomerData",
  description: "Creates the customer (externalId = `customer`) when it does not exist yet"
})
export type CustomerData = typeof CustomerData.Type

/** One tier's share of a rated quantity; amounts in minor currency units. */
export const TierBreakdownItem = Schema.Struct({
  tier: Schema.Number.annotations({ description: "Zero-based tier index" }),
  units: Schema.Number,
  unitPrice: Schema.Number.annotations({ description: "Minor currency units per unit; may be fractional" }),
  flatFee: Schema.Number.annotations({ description: "Minor currency units" }),
  amount: Schema.Number.annotations({ description: "Minor currency units, rounded half-up to a whole unit" })
}).annotations({ identifier: "TierBreakdownItem" })
export type TierBreakdownItem = typeof TierBreakdownItem.Type

export const UsageModel = oneOf("UsageModel", "included", "usage_based", "prepaid")
export const RatingModel = oneOf("RatingModel", "package", "graduated", "volume")

export const CurrentTier = Schema.Struct({
  index: Schema.Number,
  startsAt: Schema.Number,
  endsAt: Schema.NullOr(Schema.Number).annotations({ description: "null for the last, open-ended tier" }),
  unitPrice: Schema.Number,
  flatFee: Schema.Number
}).annotations({ identifier: "CurrentTier" })

export const EntitlementPricing = Schema.Struct({
  usageModel: UsageModel,
  ratingModel: RatingModel,
  pricePerUnit: Schema.Number.annotations({ description: "Minor currency units; may be fractional" }),
  billingUnits: Schema.Number,
  currentTier: Schema.optionalWith(CurrentTier, { exact: true }).annotations({
    description: "Absent when the pricing has no tiers (decisions.md §1: absent, never null)"
  })
}).annotations({ identifier: "EntitlementPricing" })

export const EntitlementDetails = Schema.Struct({
  message: Schema.String,
  pricing: Schema.optionalWith(EntitlementPricing, { exact: true }).annotations({
    description: "Absent where no pricing applies: denials, boolean features, credits without a plan grant"
  }),
  tierBreakdown: Schema.Array(TierBreakdownItem)
}).annotations({ identifier: "EntitlementDetails" })

export const PlanCredits = Schema.Struct({
  used: Schema.Number,
  limit: Schema.NullOr(Schema.Number),
  balance: Schema.NullOr(Schema.Number),
  resetsAt: Schema.NullOr(IsoDateTime)
}).annotations({ identifier: "PlanCredits" })

export const CreditsBalance = Schema.Struct({
  source: Schema.String.annotations({ description: "Where the credits come from, e.g. `credit_system`" }),
  systemSlug: Schema.String,
  costPerUnit: Schema.Number,
  bonusBalance: Schema.Number,
  addonBalance: Schema.Number,
  totalBalance: Schema.Number,
  plan: PlanCredits
}).annotations({ identifier: "CreditsBalance" })

/** Spec 2.2: the answer of check and track, allowed or not (denials are 200s, decisions.md §5). */
export const EntitlementState = Schema.Struct({
  allowed: Schema.Boolean,
  code: EntitlementCode,
  usage: Schema.Number,
  limit: Schema.NullOr(Schema.Number).annotations({ description: "null when unlimited or not applicable" }),
  balance: Schema.NullOr(Schema.Number).annotations({ description: "null when unlimited or not applicable" }),
  resetsAt: Schema.NullOr(IsoDateTime).annotations({
    description: "End of the current reset window; null when it never resets"
  }),
  resetInterval: Schema.NullOr(Schema.String),
  credits: Schema.NullOr(CreditsBalance).annotations({ description: "Present for credit-backed features" }),
  details: EntitlementDetails
}).annotations({ identifier: "EntitlementState" })
export type EntitlementState = typeof EntitlementState.Type

/** `EventTime`'s bounds of form (its bounds in time are the engine's): the largest instant a Date holds, and ISO 8601. */
export const EVENT_TIME_MS_MAX = 8_640_000_000_000_000
export const ISO_EVENT_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/

/**
 * When the usage happened (decisions.md §12): ISO 8601 with a time zone, or Unix milliseconds. At most 5 minutes
 * ahead of arrival and 35 days back (the engine checks the bounds against its clock: a 400 naming them).
 */
export const EventTime = Schema.Union(
  Schema.Number.pipe(Schema.int(), Schema.between(0, EVENT_TIME_MS_MAX)).annotations({
    title: "UnixMilliseconds",
    description: "Unix milliseconds"
  }),
  Schema.String.pipe(Schema.pattern(ISO_EVENT_TIME)).annotations({
    title: "IsoDateTime",
    description: "ISO 8601 date-time with a time zone",
    format: "date-time"
  })
).annotations({
  identifier: "EventTime",
  description:
    "When the usage happened: ISO 8601 or Unix milliseconds, at most 5 minutes ahead and 35 days back; absent: now. " +
    "Placed at this instant in usage history and invoice line periods; drawn from the balance as it is at arrival"
})

export const CheckRequest = Schema.Struct({
  customer: CustomerRef,
  feature: NonEmptyString,
  value: optionalWithServerDefault(UsageValue, 1),
  customerData: Schema.optionalWith(CustomerData, { exact: true }),
  sendEvent: optionalWithServerDefault(
    Schema.Boolean,
    false,
    "When true and the check allows use, the usage is tracked atomically with the check"
  ),
  entity: Schema.optionalWith(NonEmptyString, { exact: true }),
  timestamp: Schema.optionalWith(EventTime, { exact: true }).annotations({
    description: "With `sendEvent` only: when the usage happened (a plain check records nothing: 400)"
  })
}).annotations({ identifier: "CheckRequest", parseOptions: { errors: "all" } })
export type CheckRequest = typeof CheckRequest.Type

export const TrackRequest = Schema.Struct({
  customer: CustomerRef,
  feature: NonEmptyString,
  value: optionalWithServerDefault(UsageValue, 1),
  customerData: Schema.optionalWith(CustomerData, { exact: true }),
  entity: Schema.optionalWith(NonEmptyString, { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true }),
  timestamp: Schema.optionalWith(EventTime, { exact: true })
}).annotations({ identifier: "TrackRequest", parseOptions: { errors: "all" } })
export type TrackRequest = typeof TrackRequest.Type

/** One item of a batch: a track body and, optionally, its idempotency key (the `Idempotency-Key` header's key space). */
export const TrackBatchItem = Schema.Struct({
  ...TrackRequest.fields,
  idempotencyKey: Schema.optionalWith(IdempotencyKey, { exact: true }).annotations({
    description: "A key used by a batch item and by a track is one key; repeated inside a batch, later items repeat"
  })
}).annotations({ identifier: "TrackBatchItem", parseOptions: { errors: "all" } })
export type TrackBatchItem = typeof TrackBatchItem.Type

/**
 * A batch item that failed the item schema (decisions.md §12): it is answered in its place with the 400 body a track
 * of it would get, and the other items are decided as if it were absent. `issues` are the schema's, from the item.
 */
export class InvalidBatchItem {
  constructor(readonly issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>) {}
}

const isJsonObject = (u: unknown): u is object => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * A batch's element: any JSON object decodes, to its track or to an `InvalidBatchItem`; anything else fails, and with
 * it the whole body (not a batch). Published as `TrackBatchItem` (its surrogate): the document describes the items a
 * caller should send. A client never sends an `InvalidBatchItem`.
 */
export const TrackBatchSlot = Schema.declare(
  [TrackBatchItem],
  {
    decode: (item) => (input, options, ast) => {
      if (!isJsonObject(input)) return ParseResult.fail(new ParseResult.Type(ast, input, "Expected an object"))
      const decoded = ParseResult.decodeUnknownEither(item)(input, options)
      return ParseResult.succeed(
        Either.isRight(decoded)
          ? decoded.right
          : new InvalidBatchItem(ParseResult.ArrayFormatter.formatIssueSync(decoded.left))
      )
    },
    encode: (item) => (input, options, ast) =>
      input instanceof InvalidBatchItem
        ? ParseResult.fail(new ParseResult.Forbidden(ast, input, "An invalid item is not sent"))
        : ParseResult.encodeUnknown(item)(input, options)
  },
  { [SchemaAST.SurrogateAnnotationId]: TrackBatchItem.ast }
)
export type TrackBatchSlot = typeof TrackBatchSlot.Type

/** The most items a batch holds. */
export const TRACK_BATCH_MAX = 1000
/** `POST /v1/track/batch` (decisions.md §12): 1 to 1,000 tracks, decided in order, the accepted ones committed together. */
export const TrackBatchRequest = Schema.Struct({
  events: Schema.Array(TrackBatchSlot).pipe(Schema.minItems(1), Schema.maxItems(TRACK_BATCH_MAX))
}).annotations({ identifier: "TrackBatchRequest", parseOptions: { errors: "all" } })
export type TrackBatchRequest = typeof TrackBatchRequest.Type

export const TrackBatchResponse = Schema.Struct({
  results: Schema.Array(Schema.Union(EntitlementState, ErrorBody)).annotations({
    description: "In request order: each item's entitlement state, or its error body (nothing of it recorded)"
  })
}).annotations({ identifier: "TrackBatchResponse" })
export type TrackBatchResponse = typeof TrackBatchResponse.Type

export class EntitlementsGroup extends HttpApiGroup.make("entitlements")
  .annotate(OpenApi.Description, "May this customer use this feature? Record what they used")
  .add(
    HttpApiEndpoint.post("check", "/v1/check")
      .setPayload(CheckRequest)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(EntitlementState)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Check feature entitlement")
  )
  .add(
    HttpApiEndpoint.post("track", "/v1/track")
      .setPayload(TrackRequest)
      .setHeaders(IdempotencyHeaders)
      .addSuccess(EntitlementState)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Record metered usage")
  )
  .add(
    HttpApiEndpoint.post("trackBatch", "/v1/track/batch")
      .setPayload(TrackBatchRequest)
      .addSuccess(TrackBatchResponse)
      .annotate(OpenApi.Summary, "Record a batch of usage events")
      .annotate(
        OpenApi.Description,
        "1 to 1,000 tracks decided in order and independently (a denied or invalid item records nothing); the " +
          "accepted items commit together before the answer, so after a crash or a 503 all are recorded or none. " +
          "An item that fails the item schema is answered in its place with the 400 body a track of it would get; " +
          "the whole request is 400 only when it is not a batch (an object whose events are 1 to 1,000 objects). " +
          "One request to the rate limit."
      )
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
