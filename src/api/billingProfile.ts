import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { allErrors, Email, EpochMillis } from "./common.ts"
import { BadRequestError } from "./errors.ts"
import { isCountryCode } from "./countries.ts"
import { Authentication } from "./security.ts"

/** ISO 3166-1 alpha-2, upper case (`NG`, `DE`); lower case is accepted and stored upper. */
export const CountryCode = Schema.transform(
  Schema.String.pipe(Schema.pattern(/^[A-Za-z]{2}$/, { message: () => "must be a two-letter country code" })),
  Schema.String.pipe(Schema.filter(isCountryCode, { message: () => "must be an ISO 3166-1 alpha-2 country code" })),
  { strict: true, decode: (s) => s.toUpperCase(), encode: (s) => s }
).annotations({ identifier: "CountryCode", description: "ISO 3166-1 alpha-2, e.g. NG, DE, US" })

const Line = (max: number) => Schema.String.pipe(Schema.maxLength(max))
const RequiredLine = (max: number) =>
  Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }), Schema.maxLength(max))

/** A postal address (decisions.md §16); `country` is required, every other line optional. */
export const Address = Schema.Struct({
  line1: Schema.optionalWith(Line(200), { exact: true }),
  line2: Schema.optionalWith(Line(200), { exact: true }),
  city: Schema.optionalWith(Line(100), { exact: true }),
  postalCode: Schema.optionalWith(Line(20), { exact: true }),
  state: Schema.optionalWith(Line(100), { exact: true }).annotations({
    description: "State, province or region; tax rates with a `state` match it case-insensitively"
  }),
  country: CountryCode
}).annotations({ identifier: "Address", ...allErrors })
export type Address = typeof Address.Type

/** An invoice prefix: 3 to 12 of A-Z and 0-9. */
export const InvoicePrefix = Schema.String.pipe(
  Schema.pattern(/^[A-Z0-9]{3,12}$/, { message: () => "must be 3 to 12 characters of A-Z and 0-9" })
).annotations({ identifier: "InvoicePrefix" })

export const DEFAULT_INVOICE_PREFIX = "INV"

/** The organization as the seller on its invoices (decisions.md §16). */
export const BillingProfile = Schema.Struct({
  success: Schema.Boolean,
  legalName: Schema.optionalWith(Schema.String, { exact: true }),
  address: Schema.optionalWith(Address, { exact: true }),
  email: Schema.optionalWith(Schema.String, { exact: true }),
  taxId: Schema.optionalWith(Schema.String, { exact: true }),
  invoicePrefix: Schema.String.annotations({ description: "Invoice numbers are `{invoicePrefix}-000001`" }),
  footer: Schema.optionalWith(Schema.String, { exact: true }),
  updatedAt: Schema.NullOr(EpochMillis).annotations({ description: "null until the profile is first set" })
}).annotations({ identifier: "BillingProfile" })
export type BillingProfile = typeof BillingProfile.Type

/**
 * A partial update: a field sent replaces the stored one, `null` clears it (the prefix goes back to `INV`), a field
 * absent keeps it. A new prefix numbers the invoices finalized from then on; the sequence continues.
 */
export const UpdateBillingProfile = Schema.Struct({
  legalName: Schema.optionalWith(Schema.NullOr(RequiredLine(200)), { exact: true }),
  address: Schema.optionalWith(Schema.NullOr(Address), { exact: true }),
  email: Schema.optionalWith(Schema.NullOr(Email), { exact: true }),
  taxId: Schema.optionalWith(Schema.NullOr(RequiredLine(64)), { exact: true }),
  invoicePrefix: Schema.optionalWith(Schema.NullOr(InvoicePrefix), { exact: true }).annotations({
    default: DEFAULT_INVOICE_PREFIX
  }),
  footer: Schema.optionalWith(Schema.NullOr(Line(1000)), { exact: true })
}).annotations({ identifier: "UpdateBillingProfile", ...allErrors })
export type UpdateBillingProfile = typeof UpdateBillingProfile.Type

/** A customer's tax id: its kind (`eu_vat`, `ng_tin`, …) and value. */
export const TaxId = Schema.Struct({
  type: RequiredLine(32),
  value: RequiredLine(64)
}).annotations({ identifier: "TaxId" })
export type TaxId = typeof TaxId.Type

export const TaxExempt = Schema.Literal("none", "exempt", "reverse_charge").annotations({
  identifier: "TaxExempt",
  description: "`exempt` and `reverse_charge` customers are taxed at zero with a `taxNote` on their invoices",
  message: () => ({ message: "must be one of none, exempt, reverse_charge", override: true })
})
export type TaxExempt = typeof TaxExempt.Type

export class BillingProfileGroup extends HttpApiGroup.make("billingProfile")
  .annotate(OpenApi.Description, "The organization's billing profile: the seller on its invoices")
  .add(
    HttpApiEndpoint.get("getBillingProfile", "/v1/billing/profile")
      .addSuccess(BillingProfile)
      .annotate(OpenApi.Summary, "Get the billing profile")
  )
  .add(
    HttpApiEndpoint.post("updateBillingProfile", "/v1/billing/profile")
      .setPayload(UpdateBillingProfile)
      .addSuccess(BillingProfile)
      .annotate(OpenApi.Summary, "Update the billing profile")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
