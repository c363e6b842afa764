import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { allErrors, CustomerRef, Email, EpochMillis, Metadata, NonEmptyString } from "./common.ts"
import { boundedIntegerFromQuery, boundedNumber, COUNT, COUNT_MAX, POSITIVE_MONEY } from "./numbers.ts"
import { Address, TaxExempt, TaxId } from "./billingProfile.ts"
import { BadRequestError, ConflictError, NotFoundError } from "./errors.ts"
import { Authentication } from "./security.ts"

export const OnLimitReached = Schema.Literal("block", "notify")

export const OverageLimit = Schema.Struct({
  maxOverageAmount: Schema.Number.annotations({ description: "Spend cap in minor currency units" }),
  onLimitReached: OnLimitReached,
  createdAt: EpochMillis,
  updatedAt: EpochMillis
}).annotations({ identifier: "OverageLimit" })

export const FeatureConfig = Schema.Struct({
  feature: Schema.Struct({ id: Schema.String, slug: Schema.String, name: Schema.String }),
  overage: Schema.Literal("block", "charge"),
  maxOverageUnits: Schema.NullOr(Schema.Number),
  createdAt: EpochMillis,
  updatedAt: EpochMillis
}).annotations({ identifier: "FeatureConfig" })

const customerFields = {
  id: Schema.String,
  externalId: Schema.NullOr(Schema.String),
  email: Schema.NullOr(Schema.String),
  name: Schema.NullOr(Schema.String),
  metadata: Metadata,
  createdAt: EpochMillis,
  updatedAt: EpochMillis
}

/** The customer as the buyer on its invoices (decisions.md §16). */
const billingDetailsFields = {
  address: Schema.optionalWith(Address, { exact: true }),
  taxIds: Schema.Array(TaxId),
  taxExempt: TaxExempt
}

export const Customer = Schema.Struct({
  success: Schema.Boolean,
  ...customerFields,
  ...billingDetailsFields,
  billing: Schema.Struct({
    overageLimit: Schema.NullOr(OverageLimit),
    featureConfigs: Schema.Array(FeatureConfig),
    creditBalance: Schema.Record({ key: Schema.String, value: Schema.Number }).annotations({
      description:
        "Minor units owed to the customer by plan changes, by currency (`{}` when none); spent on the next invoices before any charge"
    })
  })
}).annotations({ identifier: "Customer" })
export type Customer = typeof Customer.Type

export const CustomerListItem = Schema.Struct(customerFields).annotations({ identifier: "CustomerListItem" })
export type CustomerListItem = typeof CustomerListItem.Type

export const CreateCustomer = Schema.Struct({
  id: Schema.optional(NonEmptyString.pipe(Schema.maxLength(256))).annotations({
    description: "Your own id for the customer (stored as externalId)"
  }),
  email: Email,
  name: Schema.optional(Schema.String.pipe(Schema.maxLength(256))),
  metadata: Schema.optional(Metadata),
  address: Schema.optionalWith(Schema.NullOr(Address), { exact: true }).annotations({
    description: "The billing address; null clears it"
  }),
  taxIds: Schema.optionalWith(Schema.Array(TaxId).pipe(Schema.maxItems(10)), { exact: true }).annotations({
    description: "Replaces the stored tax ids"
  }),
  taxExempt: Schema.optionalWith(TaxExempt, { exact: true }).annotations({ default: "none" })
}).annotations({ identifier: "CreateCustomer", ...allErrors })
export type CreateCustomer = typeof CreateCustomer.Type

export const ListCustomersQuery = Schema.Struct({
  limit: Schema.optional(
    boundedIntegerFromQuery({ min: 1, max: 100, what: "Customers per page", title: "PageSize" })
  ).annotations({ default: 50 }),
  offset: Schema.optional(
    boundedIntegerFromQuery({ min: 0, max: COUNT_MAX, what: "Customers to skip", title: "Offset" })
  ).annotations({ default: 0 }),
  search: Schema.optional(NonEmptyString),
  email: Schema.optional(NonEmptyString),
  externalId: Schema.optional(NonEmptyString)
}).annotations(allErrors)
export type ListCustomersQuery = typeof ListCustomersQuery.Type

export const CustomerList = Schema.Struct({
  success: Schema.Boolean,
  data: Schema.Array(CustomerListItem),
  total: Schema.Number,
  limit: Schema.Number,
  offset: Schema.Number
}).annotations({ identifier: "CustomerList" })

export const SetOverageLimit = Schema.Struct({
  customer: CustomerRef,
  maxOverageAmount: Schema.NullOr(
    boundedNumber({ ...POSITIVE_MONEY, what: "Spend cap in whole minor currency units" })
  ).annotations({ description: "null clears it" }),
  onLimitReached: Schema.optional(OnLimitReached).annotations({ default: "block" })
}).annotations({ identifier: "SetOverageLimit", ...allErrors })
export type SetOverageLimit = typeof SetOverageLimit.Type

export const SetFeatureConfig = Schema.Struct({
  customer: CustomerRef,
  feature: NonEmptyString,
  overage: Schema.Literal("block", "charge"),
  maxOverageUnits: Schema.optional(
    Schema.NullOr(boundedNumber({ ...COUNT, what: "Overage units allowed per reset window" })).annotations({
      description: "null = no cap"
    })
  )
}).annotations({ identifier: "SetFeatureConfig", ...allErrors })
export type SetFeatureConfig = typeof SetFeatureConfig.Type

const idParam = HttpApiSchema.param("id", Schema.String)

export class CustomersGroup extends HttpApiGroup.make("customers")
  .annotate(OpenApi.Description, "Customers, their overage spend caps and per-feature overage settings")
  .add(
    HttpApiEndpoint.post("createCustomer", "/v1/customers")
      .setPayload(CreateCustomer)
      .addSuccess(Customer)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Create or resolve a customer")
  )
  .add(
    HttpApiEndpoint.get("listCustomers", "/v1/customers")
      .setUrlParams(ListCustomersQuery)
      .addSuccess(CustomerList)
      .annotate(OpenApi.Summary, "List or search customers")
  )
  .add(
    HttpApiEndpoint.get("getCustomer")`/v1/customers/${idParam}`
      .addSuccess(Customer)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Get a customer by id, external id or email")
  )
  .add(
    HttpApiEndpoint.post("setOverageLimit", "/v1/customers/overage-limit")
      .setPayload(SetOverageLimit)
      .addSuccess(Customer)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Set a customer's overage spend cap")
  )
  .add(
    HttpApiEndpoint.post("setFeatureConfig", "/v1/customers/feature-config")
      .setPayload(SetFeatureConfig)
      .addSuccess(Customer)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Set a customer's overage behaviour for one feature")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
