import { SqlClient } from "@effect/sql"
import { Context, Effect, Layer, Option, Schema } from "effect"
import { Address, TaxExempt, TaxId } from "../api/billingProfile.ts"
import { decodeFirstRow, JsonText, Millis, recordSchema } from "../platform/db/rowSchemas.ts"

/** A customer as the buyer on its invoices (decisions.md §16). */
export interface CustomerBillingDetails {
  readonly address: Address | null
  readonly taxIds: ReadonlyArray<TaxId>
  readonly taxExempt: TaxExempt
}

/** What a customer without stored details has. */
export const noBillingDetails: CustomerBillingDetails = { address: null, taxIds: [], taxExempt: "none" }

/** A change of the details: a field absent keeps what is stored. */
export interface BillingDetailsInput {
  readonly address?: Address | null | undefined
  readonly taxIds?: ReadonlyArray<TaxId> | undefined
  readonly taxExempt?: TaxExempt | undefined
}

export const isEmptyInput = (input: BillingDetailsInput | undefined) =>
  input === undefined || (input.address === undefined && input.taxIds === undefined && input.taxExempt === undefined)

export const applyInput = (current: CustomerBillingDetails, input: BillingDetailsInput): CustomerBillingDetails => ({
  address: input.address === undefined ? current.address : input.address,
  taxIds: input.taxIds ?? current.taxIds,
  taxExempt: input.taxExempt ?? current.taxExempt
})

export interface BillingDetailsRepoShape {
  readonly find: (org: string, customerId: string) => Effect.Effect<CustomerBillingDetails>
  /** Writes the whole details (joins the caller's transaction when there is one). */
  readonly save: (org: string, customerId: string, details: CustomerBillingDetails, now: number) => Effect.Effect<void>
}

export class BillingDetailsRepo extends Context.Tag("BillingDetailsRepo")<
  BillingDetailsRepo,
  BillingDetailsRepoShape
>() {}

/** Stored JSON was validated on the way in; the row decoders re-check its shape without re-validating the country. */
const StoredAddress = Schema.Struct({
  line1: Schema.optionalWith(Schema.String, { exact: true }),
  line2: Schema.optionalWith(Schema.String, { exact: true }),
  city: Schema.optionalWith(Schema.String, { exact: true }),
  postalCode: Schema.optionalWith(Schema.String, { exact: true }),
  state: Schema.optionalWith(Schema.String, { exact: true }),
  country: Schema.String
})
export const AddressText = Schema.NullOr(JsonText(StoredAddress))

const DetailsRow = recordSchema<CustomerBillingDetails & { readonly updatedAt: number }>()(
  Schema.Struct({
    address: AddressText,
    taxIds: JsonText(Schema.Array(Schema.Struct({ type: Schema.String, value: Schema.String }))),
    taxExempt: TaxExempt,
    updatedAt: Millis
  })
)
const detailsRow = decodeFirstRow("customer_billing_details", DetailsRow)

export const BillingDetailsRepoSql = Layer.effect(
  BillingDetailsRepo,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return {
      find: (org, customerId) =>
        sql`SELECT address, tax_ids, tax_exempt, updated_at FROM customer_billing_details
            WHERE organization_id = ${org} AND customer_id = ${customerId}`.pipe(
          Effect.flatMap(detailsRow),
          Effect.map(
            Option.match({
              onNone: () => noBillingDetails,
              onSome: ({ address, taxIds, taxExempt }) => ({ address, taxIds, taxExempt })
            })
          ),
          Effect.orDie
        ),
      save: (org, customerId, details, now) =>
        sql`INSERT INTO customer_billing_details ${sql.insert({
          organizationId: org,
          customerId,
          address: details.address === null ? null : JSON.stringify(details.address),
          taxIds: JSON.stringify(details.taxIds),
          taxExempt: details.taxExempt,
          updatedAt: now
        })}
          ON CONFLICT (organization_id, customer_id) DO UPDATE SET address = excluded.address,
            tax_ids = excluded.tax_ids, tax_exempt = excluded.tax_exempt, updated_at = excluded.updated_at`.pipe(
          Effect.asVoid,
          Effect.orDie
        )
    }
  })
)
