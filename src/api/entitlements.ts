import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  CustomerRef,
  Email,
  IdempotencyHeaders,
  IsoDateTime,
  Metadata,
  NonEmptyString,
  oneOf,
  optionalWithServerDefault
} from "./common.ts"
import { UsageValue } from "./numbers.ts"
import { BadRequestError, ConflictError } from "./errors.ts"
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
  entity: Schema.optionalWith(NonEmptyString, { exact: true })
}).annotations({ identifier: "CheckRequest", parseOptions: { errors: "all" } })
export type CheckRequest = typeof CheckRequest.Type

export const TrackRequest = Schema.Struct({
  customer: CustomerRef,
  feature: NonEmptyString,
  value: optionalWithServerDefault(UsageValue, 1),
  customerData: Schema.optionalWith(CustomerData, { exact: true }),
  entity: Schema.optionalWith(NonEmptyString, { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true })
}).annotations({ identifier: "TrackRequest", parseOptions: { errors: "all" } })
export type TrackRequest = typeof TrackRequest.Type

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
  .addError(BadRequestError)
  .middleware(Authentication) {}
