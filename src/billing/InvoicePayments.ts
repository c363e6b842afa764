import { Context, Effect, Layer } from "effect"
import { Customers } from "../customers/Customers.ts"
import { type AmountTooLarge, Conflict, type NotFound, PaymentFailed, type ProviderFailure } from "../domain/errors.ts"
import { assertMoneyFitsJson, roundHalfUp, toNumber } from "../domain/money.ts"
import { Payments } from "../payments/Payments.ts"
import type { IdempotencyKey } from "../platform/idempotencyKey.ts"
import { amountDueOf, Invoices, type InvoiceRecord } from "./Invoices.ts"

export interface PayOutcome {
  readonly paid: boolean
  readonly checkoutUrl: string | null
  readonly invoice: InvoiceRecord
  readonly code: "invoice_paid" | "already_paid" | "checkout_required" | "payment_processing"
  readonly message: string
}

/** Collecting an open invoice (spec 4.1, decisions.md §7): saved method, else checkout, else 402. */
export interface InvoicePaymentsShape {
  readonly pay: (
    org: string,
    invoiceId: string,
    callbackUrl: string | null,
    idempotency?: IdempotencyKey | undefined
  ) => Effect.Effect<PayOutcome, NotFound | Conflict | PaymentFailed | ProviderFailure | AmountTooLarge>
}

export class InvoicePayments extends Context.Tag("InvoicePayments")<InvoicePayments, InvoicePaymentsShape>() {}

export const amountDue = (invoice: InvoiceRecord) => toNumber(roundHalfUp(amountDueOf(invoice)))

export const InvoicePaymentsLive = Layer.effect(
  InvoicePayments,
  Effect.gen(function* () {
    const invoices = yield* Invoices
    const payments = yield* Payments
    const customers = yield* Customers

    return {
      pay: (org, invoiceId, callbackUrl, idempotency) =>
        Effect.gen(function* () {
          const invoice = yield* invoices.get(org, invoiceId)
          if (invoice.status === "paid") {
            return {
              paid: true,
              checkoutUrl: null,
              invoice,
              code: "already_paid" as const,
              message: "The invoice is already paid"
            }
          }
          if (invoice.status === "void" || invoice.status === "draft") {
            return yield* new Conflict({
              code: "invoice_not_open",
              message: `The invoice is ${invoice.status}, not open`
            })
          }
          // An invoice stored before amounts were bounded may be past what a provider request's number carries:
          // refused, never charged rounded.
          yield* assertMoneyFitsJson(amountDueOf(invoice), `Invoice ${invoice.number}'s amount due`, invoice.currency)
          const customer = yield* customers.resolve(org, invoice.customerId).pipe(
            Effect.catchTag("Conflict", () => Effect.die("a customer id is unambiguous")),
            Effect.catchTag("NotFound", () => Effect.die("an invoice's customer exists"))
          )
          const result = yield* payments
            .collect(org, customer, {
              purpose: "invoice",
              targetId: invoice.id,
              amount: amountDue(invoice),
              currency: invoice.currency,
              description: `Invoice ${invoice.number}`,
              callbackUrl,
              provider: null,
              payable: invoices.lockPayable(org, invoice.id),
              ...(idempotency === undefined ? {} : { idempotency })
            })
            .pipe(
              Effect.catchTag("ProviderNotConfigured", (e) => Effect.fail(new PaymentFailed({ message: e.message })))
            )
          const current = yield* invoices.get(org, invoiceId)
          switch (result._tag) {
            case "Paid":
              return {
                paid: true,
                checkoutUrl: null,
                invoice: current,
                code: "invoice_paid" as const,
                message: "Paid with the saved payment method"
              }
            case "NotPayable":
              // Paid (or voided) between the first read and the claim's lock.
              if (current.status === "paid") {
                return {
                  paid: true,
                  checkoutUrl: null,
                  invoice: current,
                  code: "already_paid" as const,
                  message: "The invoice is already paid"
                }
              }
              return yield* new Conflict({
                code: "invoice_not_open",
                message: `The invoice is ${current.status}, not open`
              })
            case "Processing":
              return {
                paid: false,
                checkoutUrl: null,
                invoice: current,
                code: "payment_processing" as const,
                message: "A payment of this invoice is in progress at the provider; its outcome arrives by webhook"
              }
            case "Checkout":
              return {
                paid: false,
                checkoutUrl: result.checkoutUrl,
                invoice: current,
                code: "checkout_required" as const,
                message:
                  result.chargeFailure === null
                    ? "No saved payment method: send the customer to the checkout"
                    : `The saved method could not be charged (${result.chargeFailure}): send the customer to the checkout`
              }
            case "Failed":
              return yield* new PaymentFailed({ message: result.message })
          }
        })
    }
  })
)
