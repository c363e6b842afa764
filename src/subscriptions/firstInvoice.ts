import type { PaidInvoiceInput } from "../billing/Invoices.ts"
import type { InvoiceQuote } from "../billing/invoiceQuote.ts"
import type { Plan } from "../catalog/model.ts"
import { planLineDescription } from "./changeProposal.ts"
import type { SubscriptionRecord } from "./model.ts"

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * The invoice of a subscription's first payment (docs/decisions.md "The first payment is an invoice (h18)"): the
 * quote the payment was charged by, its plan line's period moved to the period the payment started (the quote was
 * priced when the payment was asked for; the period starts when it is confirmed). Money is the quote's, unchanged.
 */
export const firstInvoiceOf = (
  quote: InvoiceQuote,
  activated: SubscriptionRecord,
  plan: Plan | undefined,
  amountPaid: string,
  currency: string
): PaidInvoiceInput => {
  const start = activated.currentPeriodStart
  const end = activated.currentPeriodEnd
  return {
    customerId: activated.customerId,
    subscriptionId: activated.id,
    currency,
    quote: {
      ...quote,
      lines: quote.lines.map((line) => ({
        ...line,
        ...(plan === undefined || line.feature !== plan.slug
          ? {}
          : { description: planLineDescription(plan, start, end) }),
        periodStart: iso(start),
        periodEnd: iso(end ?? start)
      }))
    },
    periodStart: start,
    periodEnd: end,
    amountPaid
  }
}
