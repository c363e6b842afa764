import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CustomerRef, EpochMillis, IsoDateTime, OptionalCustomerQuery, UriString, Url } from "./common.ts"
import { TierBreakdownItem } from "./entitlements.ts"
import { LineDiscount, LineTax } from "./taxes.ts"
import {
  BadGatewayError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PaymentRequiredError,
  UnprocessableError
} from "./errors.ts"
import { Authentication } from "./security.ts"

const MinorUnits = Schema.Number.annotations({ description: "Minor currency units (whole)" })

export const InvoiceStatus = Schema.Literal("draft", "open", "paid", "void", "uncollectible").annotations({
  identifier: "InvoiceStatus"
})
export type InvoiceStatus = typeof InvoiceStatus.Type

export const InvoiceLine = Schema.Struct({
  feature: Schema.String.annotations({ description: "Slug of the feature" }),
  description: Schema.String,
  quantity: Schema.Number.annotations({ description: "Billable units" }),
  unitPrice: Schema.Number.annotations({ description: "Minor currency units; may be fractional" }),
  amount: MinorUnits,
  tierBreakdown: Schema.Array(TierBreakdownItem),
  periodStart: IsoDateTime,
  periodEnd: IsoDateTime,
  discounts: Schema.Array(LineDiscount).annotations({ description: "Discounts taken off this line" }),
  taxes: Schema.Array(LineTax).annotations({
    description: "Taxes of this line, on its amount after its discounts (inclusive ones are part of `amount`)"
  })
}).annotations({ identifier: "InvoiceLine" })
export type InvoiceLine = typeof InvoiceLine.Type

/** decisions.md §7. */
export const Invoice = Schema.Struct({
  id: Schema.String,
  number: Schema.String.annotations({ description: "Per-organization sequence, e.g. INV-000001" }),
  customerId: Schema.String,
  currency: Schema.String,
  status: InvoiceStatus,
  lines: Schema.Array(InvoiceLine),
  subtotal: MinorUnits.annotations({ description: "Sum of the lines' amounts" }),
  discount: MinorUnits.annotations({ description: "Sum of the lines' discounts" }),
  tax: MinorUnits.annotations({ description: "Sum of the lines' taxes, inclusive and exclusive" }),
  taxNote: Schema.optionalWith(Schema.String, { exact: true }).annotations({
    description: "Why an exempt or reverse-charge customer is taxed at zero"
  }),
  total: MinorUnits.annotations({ description: "subtotal − discount + exclusive tax" }),
  amountPaid: MinorUnits,
  creditApplied: MinorUnits.annotations({
    description: "Of the total, what the customer's credit balance paid when the invoice was created"
  }),
  amountDue: MinorUnits.annotations({ description: "total − creditApplied − amountPaid" }),
  amountRefunded: MinorUnits.annotations({
    description: "Refunded or lost to disputes, of what its payments paid; a refunded invoice stays `paid`"
  }),
  createdAt: EpochMillis,
  paidAt: Schema.NullOr(IsoDateTime),
  hostedUrl: Schema.String.annotations({
    format: "uri",
    description:
      "The invoice's page for the customer, served by the service without a key (a PDF link, and a Pay button while it is open)"
  })
}).annotations({ identifier: "Invoice" })
export type Invoice = typeof Invoice.Type

/** Spec 4.11. */
export const GenerateInvoice = Schema.Struct({
  customer: CustomerRef
}).annotations({ identifier: "GenerateInvoice", parseOptions: { errors: "all" } })
export type GenerateInvoice = typeof GenerateInvoice.Type

export const InvoiceGenerated = Schema.Struct({
  success: Schema.Boolean,
  invoice: Invoice.annotations({ description: "The first invoice created" }),
  invoices: Schema.Array(Invoice).annotations({
    description: "Every invoice created: one per currency of the unbilled usage"
  })
}).annotations({ identifier: "InvoiceGenerated" })
export type InvoiceGenerated = typeof InvoiceGenerated.Type

export const CustomerQuery = OptionalCustomerQuery
export type CustomerQuery = typeof CustomerQuery.Type

export const InvoiceList = Schema.Struct({
  success: Schema.Boolean,
  invoices: Schema.Array(Invoice)
}).annotations({ identifier: "InvoiceList" })

/** One feature's unbilled usage (decisions.md §7). */
export const UnbilledUsageLine = Schema.Struct({
  feature: Schema.String.annotations({ description: "Slug of the feature" }),
  usage: Schema.Number.annotations({ description: "Usage in the unbilled periods" }),
  included: Schema.Number.annotations({ description: "Units covered by the plan" }),
  billableUnits: Schema.Number,
  amount: MinorUnits,
  tierBreakdown: Schema.Array(TierBreakdownItem)
}).annotations({ identifier: "UnbilledUsageLine" })
export type UnbilledUsageLine = typeof UnbilledUsageLine.Type

export const CustomerUnbilledUsage = Schema.Struct({
  customerId: Schema.String,
  currency: Schema.String,
  lines: Schema.Array(UnbilledUsageLine),
  total: MinorUnits
}).annotations({
  identifier: "CustomerUnbilledUsage",
  description: "One entry per customer and currency"
})
export type CustomerUnbilledUsage = typeof CustomerUnbilledUsage.Type

export const UnbilledUsage = Schema.Struct({
  success: Schema.Boolean,
  customers: Schema.Array(CustomerUnbilledUsage)
}).annotations({ identifier: "UnbilledUsage" })
export type UnbilledUsage = typeof UnbilledUsage.Type

/** Spec 4.1. */
export const PayInvoiceRequest = Schema.Struct({
  callbackUrl: Schema.optionalWith(Url, { exact: true })
}).annotations({ identifier: "PayInvoiceRequest", parseOptions: { errors: "all" } })
export type PayInvoiceRequest = typeof PayInvoiceRequest.Type

export const InvoiceSummary = Schema.Struct({
  id: Schema.String,
  number: Schema.String,
  currency: Schema.String,
  status: InvoiceStatus,
  total: MinorUnits
}).annotations({ identifier: "InvoiceSummary" })

export const PayInvoiceResult = Schema.Struct({
  success: Schema.Boolean,
  paid: Schema.Boolean,
  checkoutUrl: Schema.NullOr(UriString).annotations({ description: "Set when the charge could not be made here" }),
  invoice: InvoiceSummary,
  code: Schema.Literal("invoice_paid", "already_paid", "checkout_required", "payment_processing").annotations({
    description:
      "`payment_processing`: a payment of this invoice is in flight at the provider (no second charge is made)"
  }),
  message: Schema.String
}).annotations({ identifier: "PayInvoiceResult" })
export type PayInvoiceResult = typeof PayInvoiceResult.Type

const idParam = HttpApiSchema.param("id", Schema.String)

export class BillingGroup extends HttpApiGroup.make("billing")
  .annotate(OpenApi.Description, "Invoices: generate from unbilled usage, list, pay; unbilled usage")
  .add(
    HttpApiEndpoint.post("generateInvoice", "/v1/billing/invoice")
      .setPayload(GenerateInvoice)
      .addSuccess(InvoiceGenerated)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(UnprocessableError)
      .annotate(OpenApi.Summary, "Invoice unbilled usage")
      .annotate(
        OpenApi.Description,
        "422 `amount_too_large`: a line or the total would pass 9007199254740991 minor units (Number.MAX_SAFE_INTEGER, the most a JSON number carries exactly); the message names it and its exact amount, and nothing is invoiced."
      )
  )
  .add(
    HttpApiEndpoint.get("listInvoices", "/v1/billing/invoices")
      .setUrlParams(CustomerQuery)
      .addSuccess(InvoiceList)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "List invoices")
  )
  .add(
    HttpApiEndpoint.get("getUnbilledUsage", "/v1/billing/usage")
      .setUrlParams(CustomerQuery)
      .addSuccess(UnbilledUsage)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(UnprocessableError)
      .annotate(OpenApi.Summary, "Get unbilled usage")
      .annotate(
        OpenApi.Description,
        "422 `amount_too_large`: a line or a total would pass 9007199254740991 minor units (Number.MAX_SAFE_INTEGER); the message names it and its exact amount."
      )
  )
  .add(
    HttpApiEndpoint.post("payInvoice")`/v1/billing/invoice/${idParam}/pay`
      .setPayload(PayInvoiceRequest)
      .addSuccess(PayInvoiceResult)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(PaymentRequiredError)
      .addError(UnprocessableError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Pay an invoice")
      .annotate(
        OpenApi.Description,
        "Accepts an `Idempotency-Key` header: requests with the same key answer from the one payment attempt it claimed; the same key with a different request is 409 `idempotency_conflict`."
      )
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
