import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { CustomerRef, EpochMillis, Metadata, NonEmptyString, UriString, Url, wireBody } from "./common.ts"
import { PackQuantity } from "./numbers.ts"
import {
  BadGatewayError,
  BadRequestError,
  ConflictError,
  NotFoundError,
  PaymentRequiredError,
  UnprocessableError
} from "./errors.ts"
import { Authentication } from "./security.ts"

/** Spec 4.7, decisions.md §7. */
export const PurchaseAddon = Schema.Struct({
  customer: CustomerRef,
  pack: NonEmptyString.pipe(Schema.maxLength(256, { message: () => "must be at most 256 characters" })).annotations({
    description: "Slug (or id) of the credit pack"
  }),
  quantity: Schema.optionalWith(PackQuantity, { default: () => 1, exact: true }).annotations({ default: 1 }),
  currency: Schema.optionalWith(Schema.String.pipe(Schema.minLength(3)), { exact: true }),
  metadata: Schema.optionalWith(Metadata, { exact: true }),
  callbackUrl: Schema.optionalWith(Url, { exact: true })
}).annotations({ identifier: "PurchaseAddon", parseOptions: { errors: "all" } })
export type PurchaseAddon = typeof PurchaseAddon.Type
/** `PurchaseAddon` as clients send it: `quantity` optional (the handler applies its default). */
export const PurchaseAddonBody = wireBody(PurchaseAddon, "PurchaseAddon")

export const AddonPurchase = Schema.Struct({
  success: Schema.Boolean,
  requiresCheckout: Schema.Boolean,
  checkoutUrl: Schema.NullOr(UriString).annotations({ description: "Set when requiresCheckout" }),
  quantity: Schema.Number,
  credits: Schema.Number.annotations({ description: "Credits bought (pack credits × quantity)" }),
  balance: Schema.NullOr(Schema.Number).annotations({
    description: "New purchased-credits balance; null until the checkout completes"
  }),
  code: Schema.Literal("credits_added", "checkout_required", "payment_processing").annotations({
    description:
      "`payment_processing`: a charge is in flight at the provider; the credits are added once it is confirmed"
  }),
  message: Schema.String
}).annotations({ identifier: "AddonPurchase" })
export type AddonPurchase = typeof AddonPurchase.Type

/** Spec 4.10. */
export const WalletSetupRequest = Schema.Struct({
  customer: CustomerRef,
  callbackUrl: Schema.optionalWith(Url, { exact: true }),
  provider: Schema.optionalWith(NonEmptyString.pipe(Schema.maxLength(64)), { exact: true }),
  currency: Schema.optionalWith(Schema.String.pipe(Schema.pattern(/^[A-Za-z]{3}$/)), { exact: true }).annotations({
    description: "Currency of the small card-saving charge where the provider needs one (Paystack: its minimum)"
  })
}).annotations({ identifier: "WalletSetupRequest", parseOptions: { errors: "all" } })
export type WalletSetupRequest = typeof WalletSetupRequest.Type

export const WalletSetup = Schema.Struct({
  url: UriString,
  reference: Schema.String
}).annotations({ identifier: "WalletSetup" })
export type WalletSetup = typeof WalletSetup.Type

/** Spec 4.20. */
export const RemovePaymentMethod = Schema.Struct({
  customer: CustomerRef,
  id: Schema.propertySignature(NonEmptyString).annotations({ description: "Payment method id" })
}).annotations({ identifier: "RemovePaymentMethod", parseOptions: { errors: "all" } })
export type RemovePaymentMethod = typeof RemovePaymentMethod.Type

export const PaymentMethodRemoved = Schema.Struct({
  success: Schema.Boolean
}).annotations({ identifier: "PaymentMethodRemoved" })

/** Makes a saved method the customer's default, the one charged first (decisions record "Customer portal (h15)"). */
export const DefaultPaymentMethod = Schema.Struct({
  customer: CustomerRef,
  id: Schema.propertySignature(NonEmptyString).annotations({ description: "Payment method id" })
}).annotations({ identifier: "DefaultPaymentMethod", parseOptions: { errors: "all" } })
export type DefaultPaymentMethod = typeof DefaultPaymentMethod.Type

export const PaymentMethod = Schema.Struct({
  id: Schema.String,
  provider: Schema.String,
  type: Schema.String.annotations({ description: "e.g. card, bank" }),
  brand: Schema.NullOr(Schema.String),
  last4: Schema.NullOr(Schema.String),
  expMonth: Schema.NullOr(Schema.Number),
  expYear: Schema.NullOr(Schema.Number),
  isDefault: Schema.Boolean,
  createdAt: EpochMillis
}).annotations({ identifier: "PaymentMethod" })
export type PaymentMethod = typeof PaymentMethod.Type

export const WalletQuery = Schema.Struct({
  customer: CustomerRef
}).annotations({ parseOptions: { errors: "all" } })
export type WalletQuery = typeof WalletQuery.Type

export const PaymentMethodList = Schema.Struct({
  success: Schema.Boolean,
  paymentMethods: Schema.Array(PaymentMethod)
}).annotations({ identifier: "PaymentMethodList" })

export class PaymentsGroup extends HttpApiGroup.make("payments")
  .annotate(OpenApi.Description, "Credit pack purchases and saved payment methods")
  .add(
    HttpApiEndpoint.post("purchaseAddon", "/v1/addon")
      .setPayload(PurchaseAddonBody)
      .addSuccess(AddonPurchase)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(PaymentRequiredError)
      .addError(UnprocessableError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Purchase a credit pack")
      .annotate(
        OpenApi.Description,
        "Accepts an `Idempotency-Key` header: requests with the same key answer from the one payment attempt it claimed; the same key with a different request is 409 `idempotency_conflict`."
      )
  )
  .add(
    HttpApiEndpoint.post("createWalletSetup", "/v1/wallet/setup")
      .setPayload(WalletSetupRequest)
      .addSuccess(WalletSetup)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(UnprocessableError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Create a payment-method setup session")
  )
  .add(
    HttpApiEndpoint.post("setDefaultPaymentMethod", "/v1/wallet/default")
      .setPayload(DefaultPaymentMethod)
      .addSuccess(PaymentMethodList)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "Make a saved payment method the default")
      .annotate(
        OpenApi.Description,
        "The default is the method charged first (renewals, attaches, invoices). Answers the wallet afterwards; `payment_method.updated` is sent when the default changed."
      )
  )
  .add(
    HttpApiEndpoint.post("removePaymentMethod", "/v1/wallet/remove")
      .setPayload(RemovePaymentMethod)
      .addSuccess(PaymentMethodRemoved)
      .addError(NotFoundError)
      .addError(ConflictError)
      .addError(UnprocessableError)
      .addError(BadGatewayError)
      .annotate(OpenApi.Summary, "Remove a payment method")
  )
  .add(
    HttpApiEndpoint.get("listPaymentMethods", "/v1/wallet")
      .setUrlParams(WalletQuery)
      .addSuccess(PaymentMethodList)
      .addError(NotFoundError)
      .addError(ConflictError)
      .annotate(OpenApi.Summary, "List saved payment methods")
  )
  .addError(BadRequestError)
  .middleware(Authentication) {}
