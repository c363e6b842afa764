import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { EpochMillis, Metadata, NonEmptyString } from "./common.ts"
import { RatingModel, UsageModel } from "./entitlements.ts"
import { BadRequestError } from "./errors.ts"
import { Authentication } from "./security.ts"

/** A literal union whose decode failure reads "must be one of …" instead of one issue per member. */
const oneOf = <const L extends readonly [string, ...Array<string>]>(identifier: string, ...values: L) =>
  Schema.Literal(...values).annotations({
    identifier,
    message: () => ({ message: `must be one of ${values.join(", ")}`, override: true })
  })

/**
 * Catalog sync (spec 4.5, decisions.md §3). Items are lenient about what a catalog-as-code file may leave
 * out (optional, with the documented defaults applied on decode) and strict about the types of what it
 * does say: finite numbers, non-negative money, literal enums. Cross-item rules (tiers ascending, a pack
 * naming a known credit system...) are the sync service's job: it reports every problem in one 400.
 */

const Slug = NonEmptyString.pipe(Schema.maxLength(256))
const Name = Schema.String.pipe(Schema.maxLength(256))
const Description = Schema.String.pipe(Schema.maxLength(4096))
/** Minor currency units; may be fractional (a price per unit of 0.25 kobo). */
const finite = Schema.finite({ message: () => "must be a finite number" })
const NonNegative = Schema.Number.pipe(finite, Schema.nonNegative({ message: () => "must be >= 0" }))
const Positive = Schema.Number.pipe(finite, Schema.positive({ message: () => "must be > 0" }))
const Money = NonNegative.annotations({ description: "Minor currency units (kobo, cents); may be fractional" })
export const CurrencyCode = Schema.String.pipe(
  Schema.pattern(/^[A-Za-z]{3}$/, { message: () => "must be a 3-letter ISO 4217 currency code" })
).annotations({ identifier: "CurrencyCode", description: "ISO 4217 code, e.g. NGN or USD" })
const Provider = NonEmptyString.pipe(
  Schema.maxLength(64, { message: () => "must be a provider name such as paystack or stripe" })
).annotations({ description: "Payment provider: `paystack`, `stripe` (or `simulated` on sandbox)" })

export const FeatureType = oneOf("FeatureType", "metered", "boolean")
export const MeterType = oneOf("MeterType", "consumable", "non_consumable")
export const PlanInterval = oneOf("PlanInterval", "daily", "weekly", "monthly", "quarterly", "yearly")
export const BillingType = oneOf("BillingType", "recurring", "one_time")
export const ResetInterval = oneOf(
  "ResetInterval",
  "none",
  "never",
  "5min",
  "15min",
  "30min",
  "hourly",
  "daily",
  "weekly",
  "monthly",
  "quarterly",
  "semi_annual",
  "yearly"
).annotations({ description: "`never` is an alias of `none`" })
export const OverageBehaviour = oneOf("OverageBehaviour", "block", "charge")

export const SyncFeature = Schema.Struct({
  slug: Slug,
  name: Name,
  type: FeatureType,
  meterType: Schema.optionalWith(MeterType, { default: () => "consumable" as const }),
  unit: Schema.optional(Schema.String.pipe(Schema.maxLength(64)))
}).annotations({ identifier: "SyncFeature" })
export type SyncFeature = typeof SyncFeature.Type

export const SyncCreditSystemFeature = Schema.Struct({
  feature: Slug,
  creditCost: Schema.propertySignature(NonNegative).annotations({ description: "Credits drawn per unit of the feature" })
}).annotations({ identifier: "SyncCreditSystemFeature" })

export const SyncCreditSystem = Schema.Struct({
  slug: Slug,
  name: Name,
  description: Schema.optional(Description),
  features: Schema.optionalWith(Schema.Array(SyncCreditSystemFeature), { default: () => [] })
}).annotations({ identifier: "SyncCreditSystem" })
export type SyncCreditSystem = typeof SyncCreditSystem.Type

export const SyncCreditPack = Schema.Struct({
  slug: Slug,
  name: Name,
  description: Schema.optional(Description),
  credits: Positive,
  price: Money,
  currency: Schema.optional(CurrencyCode),
  creditSystem: Schema.propertySignature(Slug).annotations({ description: "Slug of the credit system the credits go to" }),
  provider: Schema.optional(Provider),
  metadata: Schema.optional(Metadata),
  isActive: Schema.optionalWith(Schema.Boolean, { default: () => true })
}).annotations({ identifier: "SyncCreditPack" })
export type SyncCreditPack = typeof SyncCreditPack.Type

export const SyncTier = Schema.Struct({
  upTo: Schema.optionalWith(Schema.NullOr(Positive), { default: () => null }).annotations({
    description: "Inclusive upper bound of the tier; null (or absent) for the last, open-ended tier"
  }),
  unitPrice: Schema.optionalWith(Money, { default: () => 0 }),
  flatFee: Schema.optionalWith(Money, { default: () => 0 })
}).annotations({ identifier: "SyncTier" })
export type SyncTier = typeof SyncTier.Type

export const SyncPlanFeature = Schema.Struct({
  slug: Schema.propertySignature(Slug).annotations({ description: "A feature slug or a credit-system slug" }),
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => true }),
  limit: Schema.optional(Schema.NullOr(NonNegative)).annotations({ description: "null = unlimited" }),
  trialLimit: Schema.optional(Schema.NullOr(NonNegative)),
  reset: Schema.optionalWith(ResetInterval, { default: () => "monthly" as const }),
  usageModel: Schema.optionalWith(UsageModel, { default: () => "included" as const }),
  ratingModel: Schema.optionalWith(RatingModel, { default: () => "package" as const }),
  pricePerUnit: Schema.optional(Money),
  billingUnits: Schema.optionalWith(Positive, { default: () => 1 }),
  tiers: Schema.optional(Schema.Array(SyncTier)),
  overage: Schema.optionalWith(OverageBehaviour, { default: () => "block" as const }),
  overagePrice: Schema.optional(Money),
  maxOverageUnits: Schema.optional(Schema.NullOr(NonNegative)),
  creditCost: Schema.optional(NonNegative)
}).annotations({ identifier: "SyncPlanFeature" })
export type SyncPlanFeature = typeof SyncPlanFeature.Type

export const SyncPlan = Schema.Struct({
  slug: Slug,
  name: Name,
  description: Schema.optional(Description),
  price: Schema.optionalWith(Money, { default: () => 0 }),
  currency: Schema.optional(CurrencyCode),
  interval: Schema.optional(PlanInterval).annotations({ description: "Required for recurring paid plans" }),
  billingType: Schema.optionalWith(BillingType, { default: () => "recurring" as const }),
  autoEnable: Schema.optionalWith(Schema.Boolean, { default: () => false }).annotations({
    description: "Attach to every new customer"
  }),
  isAddon: Schema.optionalWith(Schema.Boolean, { default: () => false }),
  planGroup: Schema.optional(Schema.String.pipe(Schema.maxLength(256))),
  trialDays: Schema.optional(Schema.Number.pipe(Schema.int(), Schema.nonNegative())),
  provider: Schema.optional(Provider),
  metadata: Schema.optional(Metadata),
  features: Schema.optionalWith(Schema.Array(SyncPlanFeature), { default: () => [] })
}).annotations({ identifier: "SyncPlan" })
export type SyncPlan = typeof SyncPlan.Type

export const SyncRequest = Schema.Struct({
  defaultProvider: Schema.optional(Provider),
  features: Schema.Array(SyncFeature),
  creditSystems: Schema.optionalWith(Schema.Array(SyncCreditSystem), { default: () => [] }),
  creditPacks: Schema.optionalWith(Schema.Array(SyncCreditPack), { default: () => [] }),
  plans: Schema.Array(SyncPlan)
}).annotations({ identifier: "SyncRequest", parseOptions: { errors: "all" } })
export type SyncRequest = typeof SyncRequest.Type

export const SyncChanges = Schema.Struct({
  created: Schema.Array(Schema.String),
  updated: Schema.Array(Schema.String),
  unchanged: Schema.Array(Schema.String)
}).annotations({ identifier: "SyncChanges", description: "Slugs of the items, by outcome" })

export const SyncResult = Schema.Struct({
  success: Schema.Boolean,
  features: SyncChanges,
  creditSystems: SyncChanges,
  creditPacks: SyncChanges,
  plans: SyncChanges,
  warnings: Schema.Array(Schema.String)
}).annotations({ identifier: "SyncResult" })
export type SyncResult = typeof SyncResult.Type

/** Spec 2.5. */
export const CreditSystem = Schema.Struct({
  slug: Schema.String,
  name: Schema.String,
  description: Schema.String.annotations({ description: "Empty when the catalog gives none" }),
  features: Schema.Array(Schema.Struct({ feature: Schema.String, creditCost: Schema.Number }))
}).annotations({ identifier: "CreditSystem" })
export type CreditSystem = typeof CreditSystem.Type

export const CreditSystemList = Schema.Struct({
  success: Schema.Boolean,
  creditSystems: Schema.Array(CreditSystem)
}).annotations({ identifier: "CreditSystemList" })

/** Spec 2.4. */
export const CreditPack = Schema.Struct({
  id: Schema.String,
  slug: Schema.String,
  name: Schema.String,
  description: Schema.String.annotations({ description: "Empty when the catalog gives none" }),
  credits: Schema.Number,
  price: Schema.Number.annotations({ description: "Minor currency units" }),
  currency: Schema.String,
  creditSystemId: Schema.String,
  creditSystem: Schema.String.annotations({ description: "Slug of the credit system" }),
  provider: Schema.String,
  metadata: Metadata,
  isActive: Schema.Boolean,
  createdAt: EpochMillis,
  updatedAt: EpochMillis
}).annotations({ identifier: "CreditPack" })
export type CreditPack = typeof CreditPack.Type

export const CreditPackList = Schema.Struct({
  success: Schema.Boolean,
  data: Schema.Array(CreditPack)
}).annotations({ identifier: "CreditPackList" })

export class CatalogGroup extends HttpApiGroup.make("catalog")
  .add(
    HttpApiEndpoint.post("sync", "/v1/sync")
      .setPayload(SyncRequest)
      .addSuccess(SyncResult)
      .annotate(OpenApi.Summary, "Sync the catalog from code")
  )
  .add(
    HttpApiEndpoint.get("listCreditSystems", "/v1/credit-systems")
      .addSuccess(CreditSystemList)
      .annotate(OpenApi.Summary, "List credit systems")
  )
  .add(
    HttpApiEndpoint.get("listCreditPacks", "/v1/credit-packs")
      .addSuccess(CreditPackList)
      .annotate(OpenApi.Summary, "List active credit packs")
  )
  .addError(BadRequestError)
  .middleware(Authentication)
{}
