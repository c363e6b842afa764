import { Schema } from "effect"
import { CountryCode } from "./billingProfile.ts"
import { EpochMillis } from "./common.ts"
import { boundedNumber } from "./numbers.ts"

/** A tax percentage: 0 to 100, at most 4 decimals (7.5, 19, 8.875). */
export const TaxPercentage = boundedNumber({
  min: 0,
  max: 100,
  decimals: 4,
  what: "Tax percentage",
  title: "TaxPercentage"
})

/** A catalog tax rate (decisions.md §16), synced by slug like every catalog item. */
export const SyncTaxRate = Schema.Struct({
  slug: Schema.String.pipe(
    Schema.pattern(/^[a-z0-9][a-z0-9._-]{0,63}$/, {
      message: () => "must be 1-64 characters of a-z, 0-9, '-', '_' and '.', starting with a letter or digit"
    })
  ),
  name: Schema.String.pipe(
    Schema.minLength(1, { message: () => "must not be empty" }),
    Schema.maxLength(100)
  ).annotations({ description: 'Shown on invoices, e.g. "VAT"' }),
  percentage: TaxPercentage,
  inclusive: Schema.optionalWith(Schema.Boolean, { exact: true }).annotations({
    default: false,
    description: "Inclusive: the tax is part of the line's amount (carved out); exclusive: added to it"
  }),
  country: CountryCode,
  state: Schema.optionalWith(Schema.String.pipe(Schema.minLength(1), Schema.maxLength(100)), {
    exact: true
  }).annotations({ description: "Only customers in this state (case-insensitive); absent: the whole country" })
}).annotations({ identifier: "SyncTaxRate" })
export type SyncTaxRate = typeof SyncTaxRate.Type

/** A tax rate as the service returns it. */
export const TaxRate = Schema.Struct({
  id: Schema.String,
  slug: Schema.String,
  name: Schema.String,
  percentage: Schema.Number,
  inclusive: Schema.Boolean,
  country: Schema.String,
  state: Schema.optionalWith(Schema.String, { exact: true }),
  createdAt: EpochMillis,
  updatedAt: EpochMillis
}).annotations({ identifier: "TaxRate" })
export type TaxRate = typeof TaxRate.Type

/** One tax of an invoice line (decisions.md §16). */
export const LineTax = Schema.Struct({
  rate: Schema.String.annotations({ description: "Slug of the tax rate" }),
  name: Schema.String,
  percentage: Schema.Number,
  inclusive: Schema.Boolean,
  amount: Schema.Number.annotations({ description: "Minor currency units (whole), rounded half-up once per line" })
}).annotations({ identifier: "LineTax" })

/** One discount of an invoice line (decisions.md §15). */
export const LineDiscount = Schema.Struct({
  coupon: Schema.String.annotations({ description: "Slug of the coupon" }),
  amount: Schema.Number.annotations({ description: "Minor currency units (whole)" })
}).annotations({ identifier: "LineDiscount" })
