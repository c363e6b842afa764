import { HttpApiEndpoint, HttpApiGroup, HttpApiSchema, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import {
  CustomerRef,
  EpochMillis,
  IsoDateTime,
  NonEmptyString,
  OptionalCustomerQuery,
  UriString,
  Url
} from "./common.ts"
import { Invoice, InvoiceLine } from "./billing.ts"
import { ApplyDiscount } from "./coupons.ts"
import { CustomerData } from "./entitlements.ts"
import {
  BadGatewayError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PaymentRequiredError,
  UnprocessableError
} from "./errors.ts"
import { Authentication } from "./security.ts"

export const SubscriptionStatus = Schema.Literal(
  "pending",
  "trialing",
  "active",
  "past_due",
  "canceled",
  "expired"
).annotations({ identifier: "SubscriptionStatus" })
export type SubscriptionStatus = typeof SubscriptionStatus.Type

/** decisions.md §14. */
export const ScheduledChange = Schema.Struct({
  plan: Schema.String.annotations({ description: "Slug of the plan the renewal switches to" }),
  at: IsoDateTime
}).annotations({ identifier: "ScheduledChange" })

export const PendingChange = Schema.Struct({
  plan: Schema.String.annotations({ description: "Slug of the plan the subscription moves to once paid" }),
  invoiceId: Schema.String,
  expiresAt: IsoDateTime.annotations({ description: "Unpaid by then, the change lapses and its invoice is voided" })
}).annotations({ identifier: "PendingChange" })

export const ChangeWhen = Schema.Literal("now", "period_end").annotations({ identifier: "ChangeWhen" })

/** decisions.md §7. Instants other than createdAt/updatedAt are ISO 8601 strings (decisions.md §1). */
export const Subscription = Schema.Struct({
  id: Schema.String,
  customerId: Schema.String,
  planId: Schema.String,
  plan: Schema.String.annotations({ description: "Slug of the plan" }),
  status: SubscriptionStatus,
  currentPeriodStart: Schema.NullOr(IsoDateTime).annotations({ description: "null until the subscription starts" }),
  currentPeriodEnd: Schema.NullOr(IsoDateTime).annotations({
    description: "null for one-time plans or until it starts"
  }),
  trialEndsAt: Schema.NullOr(IsoDateTime),
  cancelAtPeriodEnd: Schema.Boolean,
  canceledAt: Schema.NullOr(IsoDateTime),
  scheduledChange: Schema.optionalWith(ScheduledChange, { exact: true }).annotations({
    description: "A change waiting for the period end (absent when none)"
  }),
  pendingChange: Schema.optionalWith(PendingChange, { exact: true }).annotations({
    description: "A change made now that waits for its invoice to be paid; the current plan stays in force until then"
  }),
  createdAt: EpochMillis,
  updatedAt: EpochMillis
}).annotations({ identifier: "Subscription" })
export type Subscription = typeof Subscription.Type

export const AttachRequest = Schema.Struct({
  customer: CustomerRef,
  product: Schema.propertySignature(NonEmptyString).annotations({ description: "Slug of the plan to attach" }),
  customerData: Schema.optionalWith(CustomerData, { exact: true }),
  callbackUrl: Schema.optionalWith(Url, { exact: true }),
  when: Schema.optionalWith(ChangeWhen, { exact: true }).annotations({
    description:
      "A change of plan in a group the customer already has: `now` or at `period_end`. Default: `now` to a higher monthly-equivalent price, from a trial or to another interval; `period_end` to a lower price or a free plan"
  }),
  prorate: Schema.optionalWith(Schema.Boolean, { exact: true }).annotations({
    description:
      "A change made now: credit the old plan's unused time and charge the new plan's remaining time (default true); false: no lines, the new price from the next renewal"
  }),
  coupon: ApplyDiscount.fields.coupon.annotations({
    description:
      "Slug of a coupon for the subscription this attach creates or changes (at most one of coupon and promotionCode); an invalid one is 422 `coupon_invalid`"
  }),
  promotionCode: ApplyDiscount.fields.promotionCode.annotations({
    description: "A promotion code (case-insensitive) for its coupon, instead of `coupon`"
  })
})
  .pipe(
    // Both at once is a malformed request (400), unlike a code that names nothing usable (422 coupon_invalid).
    Schema.filter(
      (r) =>
        r.coupon === undefined ||
        r.promotionCode === undefined || {
          path: ["promotionCode"],
          message: "give at most one of coupon and promotionCode"
        }
    )
  )
  .annotations({ identifier: "AttachRequest", parseOptions: { errors: "all" } })
export type AttachRequest = typeof AttachRequest.Type

export const AttachResult = Schema.Struct({
  success: Schema.Boolean,
  subscription: Subscription,
  checkoutUrl: Schema.NullOr(UriString).annotations({ description: "Set when payment must be collected first" }),
  invoice: Schema.optionalWith(Invoice, { exact: true }).annotations({
    description: "A plan change's invoice (its credit and charge lines), when the change made one"
  }),
  message: Schema.String
}).annotations({ identifier: "AttachResult" })
export type AttachResult = typeof AttachResult.Type

export const PreviewLine = Schema.Struct({
  feature: Schema.String.annotations({ description: "Slug of the plan the line prices" }),
  description: Schema.String,
  quantity: Schema.Number,
  unitPrice: Schema.Number,
  amount: Schema.Number.annotations({ description: "Minor units; a credit is negative" }),
  periodStart: IsoDateTime,
  periodEnd: IsoDateTime,
  discounts: InvoiceLine.fields.discounts,
  taxes: InvoiceLine.fields.taxes
}).annotations({ identifier: "PreviewLine" })

/** decisions.md §14: what the same attach would produce at this instant; nothing is changed. */
export const AttachPreview = Schema.Struct({
  success: Schema.Boolean,
  subscriptionId: Schema.NullOr(Schema.String).annotations({
    description: "The subscription changed; null: a new one"
  }),
  plan: Schema.String,
  previousPlan: Schema.NullOr(Schema.String),
  when: ChangeWhen,
  effectiveAt: IsoDateTime,
  scheduled: Schema.Boolean.annotations({ description: "True when the change waits for the period end" }),
  currency: Schema.String,
  lines: Schema.Array(PreviewLine),
  subtotal: Schema.Number,
  discount: Schema.Number,
  tax: Schema.Number,
  total: Schema.Number,
  creditApplied: Schema.Number.annotations({ description: "Of the total, what the credit balance would pay" }),
  amountDue: Schema.Number,
  creditBalanceAfter: Schema.Number.annotations({ description: "The credit balance in this currency afterwards" })
}).annotations({ identifier: "AttachPreview" })
export type AttachPreview = typeof AttachPreview.Type

export const ListSubscriptionsQuery = OptionalCustomerQuery
export type ListSubscriptionsQuery = typeof ListSubscriptionsQuery.Type

export const SubscriptionList = Schema.Struct({
  success: Schema.Boolean,
  subscriptions: Schema.Array(Subscription)
}).annotations({ identifier: "SubscriptionList" })

/** Spec 4.2. */
export const SubscriptionCheckoutRequest = Schema.Struct({
  callbackUrl: Schema.optionalWith(Url, { exact: true })
}).annotations({ identifier: "SubscriptionCheckoutRequest", parseOptions: { errors: "all" } })
export type SubscriptionCheckoutRequest = typeof SubscriptionCheckoutRequest.Type

export const SubscriptionCheckout = Schema.Struct({
  success: Schema.Boolean,
  checkoutUrl: Schema.NullOr(UriString),
  reference: Schema.NullOr(Schema.String),
  accessCode: Schema.NullOr(Schema.String),
  activatedDirectly: Schema.Boolean.annotations({
    description: "True when a free plan or a charge on a saved method activated it without checkout"
  }),
  code: Schema.Literal("activated", "checkout_required", "payment_processing").annotations({
    description: "`payment_processing`: the first payment is in flight at the provider; no new checkout is opened"
  }),
  message: Schema.String
}).annotations({ identifier: "SubscriptionCheckout" })
export type SubscriptionCheckout = typeof SubscriptionCheckout.Type

export const SubscriptionResult = Schema.Struct({
  success: Schema.Boolean,
  subscription: Subscription
}).annotations({ identifier: "SubscriptionResult" })

const idParam = HttpApiSchema.param("id", Schema.String)

export class SubscriptionsGroup extends HttpApiGroup.make("subscriptions")
  .annotate(OpenApi.Description, "Plans attached to customers: attach, list, pay a pending one, cancel")
  .add(
    HttpApiEndpoint.post("attach", "/v1/attach")
      .setPayload(AttachRequest)
      .addSuccess(AttachResult)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(PaymentRequiredError)
      .addError(UnprocessableError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Attach a plan to a customer")
      .annotate(
        OpenApi.Description,
        "Accepts an `Idempotency-Key` header: requests with the same key answer from the one payment attempt it claimed; the same key with a different request is 409 `idempotency_conflict`."
      )
  )
  .add(
    HttpApiEndpoint.post("previewAttach", "/v1/attach/preview")
      .setPayload(AttachRequest)
      .addSuccess(AttachPreview)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(UnprocessableError)
      .annotate(OpenApi.Summary, "Preview an attach or a plan change")
      .annotate(
        OpenApi.Description,
        "The lines and totals the same `POST /v1/attach` would produce at this instant; nothing is created or charged."
      )
  )
  .add(
    HttpApiEndpoint.get("listSubscriptions", "/v1/subscriptions")
      .setUrlParams(ListSubscriptionsQuery)
      .addSuccess(SubscriptionList)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "List subscriptions")
  )
  .add(
    HttpApiEndpoint.post("checkoutSubscription")`/v1/subscriptions/${idParam}/checkout`
      .setPayload(SubscriptionCheckoutRequest)
      .addSuccess(SubscriptionCheckout)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(PaymentRequiredError)
      .addError(UnprocessableError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Generate checkout for a pending subscription")
  )
  .add(
    HttpApiEndpoint.post("cancelSubscription")`/v1/subscriptions/${idParam}/cancel`
      .addSuccess(SubscriptionResult)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Cancel a subscription")
  )
  .add(
    HttpApiEndpoint.post("resumeSubscription")`/v1/subscriptions/${idParam}/resume`
      .addSuccess(SubscriptionResult)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Resume a subscription set to cancel at its period end")
      .annotate(
        OpenApi.Description,
        "Undoes a cancellation at period end: the subscription renews again (`subscription.resumed`). 409 `subscription_not_canceling` when it is not set to cancel, `subscription_ended` when it already ended."
      )
  )
  .add(
    HttpApiEndpoint.post("cancelChange")`/v1/subscriptions/${idParam}/cancel-change`
      .addSuccess(SubscriptionResult)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Withdraw a scheduled or pending plan change")
      .annotate(
        OpenApi.Description,
        "A pending change's open invoice is voided (any credit balance it used is given back). Nothing to withdraw: the subscription as it is."
      )
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
