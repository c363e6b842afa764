import { HttpApiBuilder } from "@effect/platform"
import { BillingApi } from "../api/Api.ts"
import { notImplemented } from "../http/toApiError.ts"

export const BillingHttp = HttpApiBuilder.group(BillingApi, "billing", (handlers) =>
  handlers
    .handle("generateInvoice", () => notImplemented("Invoicing"))
    .handle("listInvoices", () => notImplemented("Invoices"))
    .handle("getUnbilledUsage", () => notImplemented("Unbilled usage"))
    .handle("payInvoice", () => notImplemented("Invoice payment")))
