import { Schema } from "effect"
import { boundedNumber, COUNT_MAX, PositiveMoney } from "./numbers.ts"

const Slug = Schema.String.pipe(
  Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
    message: () => "must be 1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
  })
)

/** A coupon's percentage: more than 0, at most 100, at most 2 decimals (decisions.md §15). */
export const PercentOff = boundedNumber({
  min: 0,
  exclusiveMin: true,
  max: 100,
  decimals: 2,
  what: "Percentage off",
  title: "PercentOff"
})

/** A redemption limit: 1 or more. */
const MaxRedemptions = boundedNumber({
  min: 1,
  max: COUNT_MAX,
  decimals: 0,
  what: "Redemptions allowed",
  title: "MaxRedemptions"
})

const DurationInCycles = boundedNumber({
  min: 1,
  max: 1_000,
  decimals: 0,
  what: "Invoices a repeating coupon applies to",
  title: "DurationInCycles"
})

/** An instant: ISO 8601 with a time zone (a date alone is refused: its instant would depend on a zone). */
export const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})$/
const Instant = Schema.String.pipe(
  Schema.pattern(ISO_INSTANT, { message: () => "must be an ISO 8601 date-time with a time zone" }),
  Schema.filter((s) => !Number.isNaN(Date.parse(s)) || "must be a real date-time")
).annotations({ format: "date-time" })

export const CouponDuration = Schema.Literal("once", "repeating", "forever").annotations({
  identifier: "CouponDuration"
})

/**
 * A catalog coupon (decisions.md §15), synced by slug. Exactly one of `percentOff` and `amountOff` (with
 * `currency`); `durationInCycles` with `repeating` only: the sync reports a broken combination by path.
 */
export const SyncCoupon = Schema.Struct({
  slug: Slug,
  name: Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }), Schema.maxLength(100)),
  percentOff: Schema.optionalWith(PercentOff, { exact: true }),
  amountOff: Schema.optionalWith(PositiveMoney, { exact: true }).annotations({
    description: "Minor currency units off, with `currency`"
  }),
  currency: Schema.optionalWith(
    Schema.String.pipe(Schema.pattern(/^[A-Za-z]{3}$/, { message: () => "must be a 3-letter ISO 4217 code" })),
    { exact: true }
  ),
  duration: CouponDuration,
  durationInCycles: Schema.optionalWith(DurationInCycles, { exact: true }),
  maxRedemptions: Schema.optionalWith(MaxRedemptions, { exact: true }),
  redeemBy: Schema.optionalWith(Instant, { exact: true }).annotations({
    description: "No redemption after this instant"
  }),
  plans: Schema.optionalWith(Schema.Array(Slug), { exact: true }).annotations({
    description: "Slugs of the plans it applies to; absent: every plan"
  })
}).annotations({ identifier: "SyncCoupon" })
export type SyncCoupon = typeof SyncCoupon.Type

/** A promotion code (decisions.md §15): the code a customer types, for a coupon. */
export const SyncPromotionCode = Schema.Struct({
  code: Schema.String.pipe(
    Schema.pattern(/^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/, {
      message: () => "must be 1-64 characters of letters, digits, '-' and '_'"
    })
  ).annotations({ description: "Case-insensitive, unique per organization" }),
  coupon: Slug.annotations({ description: "Slug of the coupon" }),
  maxRedemptions: Schema.optionalWith(MaxRedemptions, { exact: true }),
  expiresAt: Schema.optionalWith(Instant, { exact: true }),
  active: Schema.optionalWith(Schema.Boolean, { exact: true }).annotations({ default: true })
}).annotations({ identifier: "SyncPromotionCode" })
export type SyncPromotionCode = typeof SyncPromotionCode.Type

/** `POST /v1/customers/{id}/discount`: exactly one of `coupon` (a slug) and `promotionCode`. */
export const ApplyDiscount = Schema.Struct({
  coupon: Schema.optionalWith(Slug, { exact: true }),
  promotionCode: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(64)), { exact: true })
}).annotations({ identifier: "ApplyDiscount" })
export type ApplyDiscount = typeof ApplyDiscount.Type

/** A customer's discount: the coupon every later invoice takes while it lasts. */
export const CustomerDiscount = Schema.Struct({
  success: Schema.Boolean,
  customer: Schema.String,
  coupon: Schema.String.annotations({ description: "Slug of the coupon" }),
  promotionCode: Schema.optionalWith(Schema.String, { exact: true }),
  invoicesLeft: Schema.NullOr(Schema.Number).annotations({ description: "Invoices it still discounts; null: forever" })
}).annotations({ identifier: "CustomerDiscount" })
export type CustomerDiscount = typeof CustomerDiscount.Type

export const DiscountRemoved = Schema.Struct({
  success: Schema.Boolean,
  customer: Schema.String,
  removed: Schema.Boolean.annotations({ description: "Whether the customer had a discount" })
}).annotations({ identifier: "DiscountRemoved" })
