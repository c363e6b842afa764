import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { EpochMillis, Metadata, NonEmptyString, oneOf, wireBody, withDefault } from "./common.ts"
import {
  AMOUNT,
  Amount,
  boundedNumber,
  Count,
  Money,
  POSITIVE_AMOUNT,
  PositiveAmount,
  TrialDays,
  UnitPrice
} from "./numbers.ts"
import { RatingModel, UsageModel } from "./entitlements.ts"
import { BadRequestError } from "./errors.ts"
import { Authentication } from "./security.ts"
import { SyncTaxRate } from "./taxes.ts"
import { SyncCoupon, SyncPromotionCode } from "./coupons.ts"

/**
 * Catalog sync (spec 4.5, decisions.md §3). Items are lenient about what a catalog-as-code file may leave
 * out (optional, with the documented defaults applied on decode) and strict about the types of what it
 * does say: numbers in their declared ranges (./numbers.ts), literal enums. Cross-item rules (tiers ascending, a pack
 * naming a known credit system...) are the sync service's job: it reports every problem in one 400.
 */

/** Refinements carry their own messages, so a description added to them never becomes the error text. */
const SlugRef = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(256, { message: () => "must be at most 256 characters" })
)

/**
 * The slug of an item a sync defines (decisions.md §1): 1–64 characters of `a-z`, `0-9`, `-`, `_` and `.`, starting
 * with a letter or digit. References to other items (`SlugRef`) are only bounded: an item stored before the format
 * keeps working, and naming an unknown one is the sync service's 400.
 */
export const SLUG_FORMAT = /^[a-z0-9][a-z0-9._-]{0,63}$/
export const Slug = SlugRef.pipe(
  Schema.pattern(SLUG_FORMAT, {
    message: () => "must be 1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
  })
).annotations({
  identifier: "Slug",
  description: "1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
})
const Name = Schema.String.pipe(Schema.maxLength(256))
const Description = Schema.String.pipe(Schema.maxLength(4096))
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
)
export const OverageBehaviour = oneOf("OverageBehaviour", "block", "charge")

export const SyncFeature = Schema.Struct({
  slug: Slug,
  name: Name,
  type: FeatureType,
  meterType: withDefault(MeterType, "consumable"),
  unit: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(64)), { exact: true })
}).annotations({ identifier: "SyncFeature" })
export type SyncFeature = typeof SyncFeature.Type

export const SyncCreditSystemFeature = Schema.Struct({
  feature: SlugRef,
  creditCost: boundedNumber({ ...AMOUNT, what: "Credits drawn per unit of the feature" })
}).annotations({ identifier: "SyncCreditSystemFeature" })

export const SyncCreditSystem = Schema.Struct({
  slug: Slug,
  name: Name,
  description: Schema.optionalWith(Description, { exact: true }),
  features: withDefault(Schema.Array(SyncCreditSystemFeature), [])
}).annotations({ identifier: "SyncCreditSystem" })
export type SyncCreditSystem = typeof SyncCreditSystem.Type

export const SyncCreditPack = Schema.Struct({
  slug: Slug,
  name: Name,
  description: Schema.optionalWith(Description, { exact: true }),
  credits: boundedNumber({ ...POSITIVE_AMOUNT, what: "Credits one pack adds" }),
  price: Money,
  currency: Schema.optionalWith(CurrencyCode, { exact: true }),
  creditSystem: SlugRef.annotations({ description: "Slug of the credit system the credits go to" }),
  provider: Schema.optionalWith(Provider, { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true }),
  isActive: withDefault(Schema.Boolean, true)
}).annotations({ identifier: "SyncCreditPack" })
export type SyncCreditPack = typeof SyncCreditPack.Type

export const SyncTier = Schema.Struct({
  upTo: withDefault(
    Schema.NullOr(PositiveAmount),
    null,
    "Inclusive upper bound of the tier; null (or absent) for the last, open-ended tier"
  ),
  unitPrice: withDefault(UnitPrice, 0),
  flatFee: withDefault(Money, 0)
}).annotations({ identifier: "SyncTier" })
export type SyncTier = typeof SyncTier.Type

export const SyncPlanFeature = Schema.Struct({
  slug: SlugRef.annotations({ description: "A feature slug or a credit-system slug" }),
  enabled: withDefault(Schema.Boolean, true),
  limit: Schema.optionalWith(Schema.NullOr(Amount).annotations({ description: "null = unlimited" }), { exact: true }),
  trialLimit: Schema.optionalWith(Schema.NullOr(Amount).annotations({ description: "null = unlimited" }), {
    exact: true
  }),
  reset: withDefault(ResetInterval, "monthly", "`never` is an alias of `none`; `non_consumable` features never reset"),
  usageModel: withDefault(UsageModel, "included"),
  ratingModel: withDefault(RatingModel, "package"),
  pricePerUnit: Schema.optionalWith(UnitPrice, { exact: true }),
  billingUnits: withDefault(boundedNumber({ ...POSITIVE_AMOUNT, what: "Units one price applies to" }), 1),
  tiers: Schema.optionalWith(Schema.Array(SyncTier), { exact: true }),
  overage: withDefault(OverageBehaviour, "block"),
  overagePrice: Schema.optionalWith(UnitPrice, { exact: true }),
  maxOverageUnits: Schema.optionalWith(Schema.NullOr(Count).annotations({ description: "null = no cap" }), {
    exact: true
  }),
  creditCost: Schema.optionalWith(Amount, { exact: true })
}).annotations({ identifier: "SyncPlanFeature" })
export type SyncPlanFeature = typeof SyncPlanFeature.Type

export const SyncPlan = Schema.Struct({
  slug: Slug,
  name: Name,
  description: Schema.optionalWith(Description, { exact: true }),
  price: withDefault(Money, 0),
  currency: Schema.optionalWith(CurrencyCode, { exact: true }),
  interval: Schema.optionalWith(PlanInterval, { exact: true }),
  billingType: withDefault(BillingType, "recurring"),
  autoEnable: withDefault(Schema.Boolean, false, "Attach to every new customer"),
  isAddon: withDefault(Schema.Boolean, false),
  portal: withDefault(
    Schema.Boolean,
    false,
    "Offered in the customer portal's plan change (decisions.md §17); the customer's current plan shows regardless"
  ),
  planGroup: Schema.optionalWith(Schema.String.pipe(Schema.maxLength(256)), { exact: true }),
  trialDays: Schema.optionalWith(TrialDays, { exact: true }),
  provider: Schema.optionalWith(Provider, { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true }),
  features: withDefault(Schema.Array(SyncPlanFeature), [])
}).annotations({
  identifier: "SyncPlan",
  description: "A recurring paid plan needs `interval` and `currency`; the sync service reports them missing"
})
export type SyncPlan = typeof SyncPlan.Type

export const SyncRequest = Schema.Struct({
  defaultProvider: Schema.optionalWith(Provider, { exact: true }),
  features: Schema.Array(SyncFeature),
  creditSystems: withDefault(Schema.Array(SyncCreditSystem), []),
  creditPacks: withDefault(Schema.Array(SyncCreditPack), []),
  plans: Schema.Array(SyncPlan),
  taxRates: withDefault(Schema.Array(SyncTaxRate), [], "Tax rates by country and state (decisions.md §16)"),
  coupons: withDefault(Schema.Array(SyncCoupon), [], "Coupons (decisions.md §15)"),
  promotionCodes: withDefault(Schema.Array(SyncPromotionCode), [], "Promotion codes for the coupons (decisions.md §15)")
}).annotations({ identifier: "SyncRequest", parseOptions: { errors: "all" } })
export type SyncRequest = typeof SyncRequest.Type
/** `SyncRequest` as clients send it: every field with a default optional (the handler applies the defaults). */
export const SyncRequestBody = wireBody(SyncRequest, "SyncRequest")

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
  taxRates: SyncChanges,
  coupons: SyncChanges,
  promotionCodes: SyncChanges,
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
  .annotate(
    OpenApi.Description,
    "The catalog as code: features, credit systems, credit packs and plans, synced from one definition"
  )
  .add(
    HttpApiEndpoint.post("sync", "/v1/sync")
      .setPayload(SyncRequestBody)
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
  .middleware(Authentication) {}
