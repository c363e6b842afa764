import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

export const PaymentsHttp = HttpApiBuilder.group(BillingApi, "payments", (handlers) =>
  handlers
    .handle("purchaseAddon", () => notImplemented("Credit pack purchases"))
    .handle("createWalletSetup", () => notImplemented("Payment-method setup"))
    .handle("removePaymentMethod", () => notImplemented("Payment-method removal"))
    .handle("listPaymentMethods", () => notImplemented("Saved payment methods")))
