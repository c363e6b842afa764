import { SqlClient } from "@effect/sql"
import { BigDecimal, Clock, Context, Effect, Layer, Option } from "effect"
import type { CustomerUnbilledUsage, Invoice } from "../api/billing.ts"
import { DEFAULT_INVOICE_PREFIX } from "../api/billingProfile.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { CreditBalance } from "../creditBalance/CreditBalance.ts"
import { Customers } from "../customers/Customers.ts"
import { type AmountTooLarge, Conflict, NotFound } from "../domain/errors.ts"
import { Outbox } from "../events/Outbox.ts"
import { assertMoneyFitsJson, format, max, roundHalfUp, toDecimal, toNumber, ZERO } from "../domain/money.ts"
import type { DecimalLike } from "../domain/rating.ts"
import { Ids } from "../platform/ids.ts"
import { type InvoiceRecord, InvoicesRepo } from "./InvoicesRepo.ts"
import { InvoiceLinks, type InvoiceLinksShape } from "./documents/links.ts"
import { BillingProfiles } from "./profile/BillingProfiles.ts"
import { type PricedInvoice, priceLines } from "./taxes.ts"
import type { InvoiceQuote } from "./invoiceQuote.ts"
import { TaxRates, toTerms } from "../catalog/taxRates.ts"
import type { CouponRecord } from "../catalog/coupons.ts"
import { couponTerms, CustomerDiscounts } from "../catalog/customerDiscounts.ts"
import { SubscriptionDiscounts } from "../catalog/subscriptionDiscounts.ts"
import type { CouponTerms } from "../domain/discounts.ts"
import { usageDiscountTerms } from "./usageDiscounts.ts"
import { groupFitsJson, type LineInput, rateUnbilled, wireLine, wireTiers } from "./lines.ts"

export type { InvoiceRecord } from "./InvoicesRepo.ts"
export type { LineInput } from "./lines.ts"

/** Which discounts price an invoice (decisions.md §15; docs/decisions.md "Coupons on attach"). */
export interface QuoteOptions {
  /** The subscription whose invoice it is: its discount applies (while it has invoices left). */
  readonly subscriptionId?: string | undefined
  /**
   * In place of the subscription's discount: the coupon an attach redeems for it (its preview, or a first charge);
   * null: none.
   */
  readonly coupon?: CouponRecord | null | undefined
  /** false: the customer's discount does not apply (an invoice repriced without the use it could not take). */
  readonly customerDiscount?: boolean | undefined
  /**
   * A usage invoice's subscription discounts, each narrowed to its subscription's lines (`usageDiscountTerms`): before
   * the customer's, and spending none of their cycles (docs/decisions.md h19).
   */
  readonly usageDiscounts?: ReadonlyArray<CouponTerms> | undefined
}

export interface CreateInvoiceOptions extends QuoteOptions {
  /** Epoch milliseconds: the period the invoice bills (a renewal's subscription period). */
  readonly periodStart?: number | undefined
  readonly periodEnd?: number | undefined
}

/** Invoices (decisions.md §7 and docs/decisions.md "Invoices"). */
export interface InvoicesShape {
  /**
   * All of the customer's unbilled billable usage into one `open` invoice per currency, in one transaction that also
   * marks exactly those events invoiced. Nothing unbilled: `Conflict` `nothing_to_invoice`.
   */
  readonly generate: (
    org: string,
    customerRef: string
  ) => Effect.Effect<ReadonlyArray<InvoiceRecord>, NotFound | Conflict | AmountTooLarge>
  /** Newest first; one customer's, or (undefined) the organization's. */
  readonly list: (
    org: string,
    customerRef: string | undefined
  ) => Effect.Effect<ReadonlyArray<InvoiceRecord>, NotFound | Conflict>
  /** What `generate` would bill, per customer and currency, writing nothing; without a customer, every one with some. */
  readonly unbilled: (
    org: string,
    customerRef: string | undefined
  ) => Effect.Effect<ReadonlyArray<CustomerUnbilledUsage>, NotFound | Conflict | AmountTooLarge>
  readonly get: (org: string, invoiceId: string) => Effect.Effect<InvoiceRecord, NotFound>
  /**
   * Inside a payment's claim: locks the invoice and says whether it can still take a payment (`open` or
   * `uncollectible`), so a payment settling at the same moment is seen (decisions.md §7, money moves once).
   */
  readonly lockPayable: (org: string, invoiceId: string) => Effect.Effect<boolean>
  /**
   * Records a collected payment: `open` or `uncollectible` → `paid` with `amountPaid = amount` (minor units) and
   * `paidAt` (epoch ms). Idempotent: an invoice already `paid` is returned unchanged. `void`/`draft`: `Conflict`
   * `invoice_not_open`. Joins the caller's transaction when there is one.
   */
  readonly markPaid: (
    org: string,
    invoiceId: string,
    amount: DecimalLike,
    paidAt: number
  ) => Effect.Effect<InvoiceRecord, NotFound | Conflict>
  /**
   * A new invoice of the given lines (e.g. a renewal whose first line is the plan price): numbered from the
   * organization's sequence, `open` (`paid` at once when its total is zero). Joins the caller's transaction when
   * there is one, so the invoice and the caller's other writes commit together.
   */
  readonly createInvoice: (
    org: string,
    customerId: string,
    currency: string,
    lines: ReadonlyArray<LineInput>,
    options?: CreateInvoiceOptions
  ) => Effect.Effect<InvoiceRecord>
  /** How `createInvoice` would price these lines now (discounts, taxes, sums), writing nothing: previews, first charges. */
  readonly quote: (
    org: string,
    customerId: string,
    currency: string,
    lines: ReadonlyArray<LineInput>,
    options?: QuoteOptions
  ) => Effect.Effect<PricedInvoice & { readonly took: ReadonlyArray<boolean>; readonly customerTook: boolean }>
  /**
   * `open` → `void` (an unpaid plan change that expired or was withdrawn), giving back the credit balance it had
   * spent; false when it was no longer open. Joins the caller's transaction.
   */
  readonly voidInvoice: (org: string, invoiceId: string) => Effect.Effect<boolean>
  /** A payment attempt of the invoice failed: `invoice.payment_failed`, in the caller's transaction. */
  readonly paymentFailed: (org: string, invoiceId: string, message: string) => Effect.Effect<void>
  /**
   * A payment already collected, recorded as its invoice (a subscription's first payment, docs/decisions.md "The
   * first payment is an invoice (h18)"): numbered now (finalized and paid at once), with the quote's lines and sums
   * and `amountPaid` = what was charged; `invoice.created` then `invoice.paid`. Spends no discount (the quote was
   * priced, and its coupon counted, when the payment was claimed) and the credit balance the quote counted on: should
   * the balance have been spent elsewhere meanwhile, the shortfall stays due and the invoice `open`. The caller's
   * transaction.
   */
  readonly recordPaid: (org: string, paid: PaidInvoiceInput) => Effect.Effect<InvoiceRecord>
}

export interface PaidInvoiceInput {
  readonly customerId: string
  readonly subscriptionId: string
  readonly currency: string
  readonly quote: InvoiceQuote
  /** Epoch milliseconds: the period the payment started. */
  readonly periodStart: number
  readonly periodEnd: number | null
  /** Whole minor units the payment collected. */
  readonly amountPaid: string
}

export class Invoices extends Context.Tag("Invoices")<Invoices, InvoicesShape>() {}

/**
 * `{prefix}-000001` (decisions.md §16): six digits, more when the sequence outgrows them. The sequence is the
 * organization's, whatever its prefix was: a new prefix continues it, so no two invoices ever share a number.
 */
export const invoiceNumber = (n: number, prefix = DEFAULT_INVOICE_PREFIX): string =>
  `${prefix}-${String(n).padStart(6, "0")}`

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/** What is left to collect: the total less what the credit balance and payments paid. */
export const amountDueOf = (r: Pick<InvoiceRecord, "total" | "amountPaid" | "creditApplied">) =>
  BigDecimal.subtract(BigDecimal.subtract(toDecimal(r.total), toDecimal(r.creditApplied)), toDecimal(r.amountPaid))

/** The wire invoice of decisions.md §7. */
/** `amountRefunded`: what its payments had refunded (payments owns refunds; an invoice just created has none). */
export const toWireInvoice = (
  r: InvoiceRecord & { readonly amountRefunded?: string },
  links: Pick<InvoiceLinksShape, "hostedUrl">
): Invoice => ({
  id: r.id,
  number: r.number,
  customerId: r.customerId,
  currency: r.currency,
  status: r.status,
  lines: r.lines.map(wireLine),
  subtotal: Number(r.subtotal),
  discount: Number(r.discount),
  tax: Number(r.tax),
  ...(r.taxNote === null ? {} : { taxNote: r.taxNote }),
  total: Number(r.total),
  amountPaid: Number(r.amountPaid),
  creditApplied: Number(r.creditApplied),
  amountDue: toNumber(amountDueOf(r)),
  amountRefunded: Number(r.amountRefunded ?? "0"),
  createdAt: r.createdAt,
  paidAt: iso(r.paidAt),
  hostedUrl: links.hostedUrl(r.organizationId, r.id)
})

const invoiceNotFound = (id: string) => new NotFound({ code: "invoice_not_found", message: `No invoice '${id}'` })

const nothingToInvoice = () =>
  new Conflict({ code: "nothing_to_invoice", message: "The customer has no unbilled usage to invoice" })

export const InvoicesLive = Layer.effect(
  Invoices,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* InvoicesRepo
    const catalog = yield* Catalog
    const customers = yield* Customers
    const ids = yield* Ids
    const outbox = yield* Outbox
    const credit = yield* CreditBalance
    const profiles = yield* BillingProfiles
    const taxRates = yield* TaxRates
    const customerDiscounts = yield* CustomerDiscounts
    const subscriptionDiscounts = yield* SubscriptionDiscounts
    const links = yield* InvoiceLinks

    const announce = (
      type: "invoice.created" | "invoice.paid" | "invoice.payment_failed",
      invoice: InvoiceRecord,
      extra = {}
    ) =>
      outbox.emit(invoice.organizationId, {
        type,
        data: { ...toWireInvoice(invoice, links), ...extra },
        customerId: invoice.customerId,
        subjectId: invoice.id
      })

    /**
     * The coupons an invoice takes, in order (decisions.md §15): the subscription's discount on the subscription's
     * own invoices (or the coupon an attach is about to bind in its place), then the customer's. Each with the write
     * that spends one of its invoices, for the invoices that take something from it.
     */
    const couponsFor = (org: string, customerId: string, options: QuoteOptions) =>
      Effect.gen(function* () {
        // `use` answers whether the use was taken: a concurrent invoice may have taken a customer discount's last one.
        const out: Array<{
          readonly terms: CouponTerms
          readonly use: Effect.Effect<boolean>
          readonly customer?: true
        }> = []
        const subscriptionId = options.subscriptionId
        if (options.coupon !== undefined) {
          if (options.coupon !== null) {
            const use = subscriptionId === undefined ? Effect.void : subscriptionDiscounts.used(org, subscriptionId)
            out.push({ terms: couponTerms(options.coupon), use: Effect.as(use, true) })
          }
        } else if (subscriptionId !== undefined) {
          const bound = yield* subscriptionDiscounts.active(org, subscriptionId)
          if (Option.isSome(bound)) {
            out.push({
              terms: couponTerms(bound.value.coupon),
              use: Effect.as(subscriptionDiscounts.used(org, subscriptionId), true)
            })
          }
        }
        for (const terms of options.usageDiscounts ?? []) out.push({ terms, use: Effect.succeed(true) })
        if (options.customerDiscount !== false) {
          const active = yield* customerDiscounts.active(org, customerId)
          if (Option.isSome(active)) {
            const use = customerDiscounts.used(org, customerId, active.value.invoicesLeft)
            out.push({ terms: couponTerms(active.value.coupon), use, customer: true })
          }
        }
        return out
      })

    /** The invoice these lines would make now, priced exactly as `createInvoice` prices it; writes nothing. */
    const pricing = (
      org: string,
      customerId: string,
      currency: string,
      lines: ReadonlyArray<LineInput>,
      options: QuoteOptions
    ) =>
      Effect.gen(function* () {
        const coupons = yield* couponsFor(org, customerId, options)
        // Taxed by the rates of the buyer's jurisdiction as they stand at finalization; the invoice keeps them.
        const buyer = yield* customers.billingDetails(org, customerId)
        const rates = (yield* taxRates.list(org)).map(toTerms)
        const priced = priceLines(
          lines,
          coupons.map((c) => c.terms),
          currency,
          rates,
          buyer
        )
        return { priced, coupons }
      })

    /** Number and store one invoice; the caller provides the transaction (the sequence row stays locked in it). */
    const insertInvoice = (
      org: string,
      customerId: string,
      currency: string,
      lines: ReadonlyArray<LineInput>,
      options: CreateInvoiceOptions,
      now: number
    ) =>
      Effect.gen(function* () {
        // The number first: the organization's counter row is the one lock every finalization shares, so it is taken
        // before the customer's own rows (its discount's uses, its credit balance). A renewal run finalizing several
        // customers' invoices in one transaction holds the counter; a usage invoice of one of them taken at the same
        // moment then waits for it holding none of that customer's rows, instead of the two waiting on each other
        // (PostgreSQL's "deadlock detected", which ended the renewal run or answered the request 500).
        const number = yield* repo.nextNumber(org)
        let { coupons, priced } = yield* pricing(org, customerId, currency, lines, options)
        // An invoice that got something off a `once` or `repeating` discount uses one of its invoices. The discount
        // was read without a lock: when a concurrent invoice (a renewal beside a usage invoice) took the customer's
        // last use since, the guarded decrement refuses and this invoice is priced again without it. The customer's
        // discount is the last coupon, so the uses already taken stand (their takes only grow without it).
        for (const [i, c] of coupons.entries()) {
          if (priced.took[i] === true && !(yield* c.use)) {
            ;({ coupons, priced } = yield* pricing(org, customerId, currency, lines, {
              ...options,
              customerDiscount: false
            }))
            break
          }
        }
        // Generation refuses such usage with a 422 first; any other caller (a renewal's plan price is at most 10^12)
        // passing money no JSON number carries is a defect, not an invoice to send rounded.
        for (const l of priced.lines)
          yield* Effect.orDie(assertMoneyFitsJson(toDecimal(l.amount), `Line '${l.description}'`))
        yield* Effect.orDie(assertMoneyFitsJson(priced.subtotal, "The invoice subtotal"))
        yield* Effect.orDie(assertMoneyFitsJson(priced.total, "The invoice total"))
        // A plan change's credit line can exceed its charge: the total never goes below zero (the caller puts the
        // surplus on the credit balance, decisions.md §14).
        const total = max(priced.total, ZERO)
        const id = yield* ids.next("inv")
        // The number was taken in this transaction from the organization's counter row (locked by its upsert until
        // the commit): a rollback gives it back, so finalized invoices stay consecutive, and two finalizations at
        // once wait for each other instead of sharing it.
        const { invoicePrefix } = yield* profiles.get(org)
        // The customer's credit balance pays first, before anything is charged.
        const applied = yield* credit.spend(org, customerId, currency, BigDecimal.scale(total, 0).value, id)
        const free = BigDecimal.isZero(BigDecimal.subtract(total, BigDecimal.make(applied, 0)))
        const record: InvoiceRecord = {
          organizationId: org,
          id,
          number: invoiceNumber(number, invoicePrefix),
          customerId,
          subscriptionId: options.subscriptionId ?? null,
          currency: currency.toUpperCase(),
          // Nothing to collect: settled at once, so no one tries to charge zero.
          status: free ? "paid" : "open",
          lines: priced.lines,
          subtotal: format(priced.subtotal),
          discount: format(priced.discount),
          tax: format(priced.tax),
          taxNote: priced.taxNote,
          total: format(total),
          amountPaid: "0",
          creditApplied: applied.toString(),
          periodStart: options.periodStart ?? null,
          periodEnd: options.periodEnd ?? null,
          attempts: 0,
          nextAttemptAt: null,
          createdAt: now,
          updatedAt: now,
          paidAt: free ? now : null
        }
        yield* repo.insert(record)
        yield* announce("invoice.created", record)
        if (free) yield* announce("invoice.paid", record)
        return record
      })

    /**
     * Lock the unbilled events (PostgreSQL), claim them for this transaction with a guarded UPDATE, and invoice only
     * what was claimed: even without the lock, an event a racing generate took first is simply not ours.
     */
    const generateFor = (org: string, customerId: string) =>
      Effect.gen(function* () {
        const snapshot = yield* catalog.snapshot(org)
        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const candidates = yield* repo.lockUnbilled(org, customerId)
            if (candidates.length === 0) return yield* nothingToInvoice()
            // A holder no invoice has: the events never leave the transaction with it (moved below, or rolled back).
            const claim = `claim_${yield* ids.next("inv")}`
            const claimed = new Set(
              yield* repo.moveEvents(
                org,
                { from: null, to: claim },
                candidates.map((e) => e.id)
              )
            )
            const groups = rateUnbilled(
              snapshot,
              candidates.filter((e) => claimed.has(e.id))
            )
            if (groups.length === 0) return yield* nothingToInvoice()
            // Refused before anything is written (the claim above rolls back with the failure): an invoice carries
            // exact money or none (issue 37 item 5).
            for (const group of groups) yield* groupFitsJson(group)
            const now = yield* Clock.currentTimeMillis
            // The subscriptions' discounts reach their usage lines (§15); read only when some subscription has one.
            const bound = yield* subscriptionDiscounts.ofCustomer(org, customerId)
            // The customer's invoices tell whether a spent coupon still covers its current period, and what an amount
            // off already took off it.
            const needed = bound.some(
              (b) =>
                b.discount.coupon.amountOff !== null ||
                (b.discount.invoicesLeft !== null && b.discount.invoicesLeft <= 0)
            )
            const earlier = needed ? yield* repo.list(org, customerId) : []
            const invoices: Array<InvoiceRecord> = []
            for (const group of groups) {
              const invoice = yield* insertInvoice(
                org,
                customerId,
                group.currency,
                group.lines,
                {
                  periodStart: group.periodStart,
                  periodEnd: group.periodEnd,
                  usageDiscounts: usageDiscountTerms(group.lines, bound, snapshot.plansById, earlier)
                },
                now
              )
              const moved = yield* repo.moveEvents(org, { from: claim, to: invoice.id }, group.eventIds)
              if (moved.length !== group.eventIds.length) {
                return yield* Effect.dieMessage(
                  "invoice generation: claimed events changed hands inside the transaction"
                )
              }
              invoices.push(invoice)
            }
            return invoices
          })
        )
      })

    const generate = (org: string, customerRef: string) =>
      Effect.gen(function* () {
        const customer = yield* customers.resolve(org, customerRef)
        return yield* generateFor(org, customer.id).pipe(Effect.catchTag("SqlError", Effect.die))
      })

    const list = (org: string, customerRef: string | undefined) =>
      Effect.gen(function* () {
        const customerId = customerRef === undefined ? undefined : (yield* customers.resolve(org, customerRef)).id
        return yield* repo.list(org, customerId)
      })

    const unbilled = (org: string, customerRef: string | undefined) =>
      Effect.gen(function* () {
        const customerId = customerRef === undefined ? undefined : (yield* customers.resolve(org, customerRef)).id
        const snapshot = yield* catalog.snapshot(org)
        const groups = rateUnbilled(snapshot, yield* repo.listUnbilled(org, customerId))
        for (const group of groups) yield* groupFitsJson(group)
        // A line's usage is what its own events recorded: `included` is the part of them the plan and grants covered.
        return groups.map((group) => ({
          customerId: group.customerId,
          currency: group.currency,
          lines: group.lines.map((line) => {
            const usage = max(line.recorded, line.quantity)
            return {
              feature: line.feature,
              usage: toNumber(usage),
              included: toNumber(BigDecimal.subtract(usage, line.quantity)),
              billableUnits: toNumber(line.quantity),
              amount: toNumber(line.amount),
              tierBreakdown: wireTiers(line.tierBreakdown)
            }
          }),
          total: toNumber(group.subtotal)
        }))
      })

    const get = (org: string, invoiceId: string) =>
      Effect.flatMap(
        repo.find(org, invoiceId),
        Option.match({
          onNone: () => Effect.fail(invoiceNotFound(invoiceId)),
          onSome: Effect.succeed
        })
      )

    const markPaid = (org: string, invoiceId: string, amount: DecimalLike, paidAt: number) =>
      Effect.gen(function* () {
        const invoice = yield* get(org, invoiceId)
        if (invoice.status === "paid") return invoice
        const now = yield* Clock.currentTimeMillis
        const amountPaid = format(roundHalfUp(toDecimal(amount)))
        const paid = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              if (!(yield* repo.markPaid(org, invoiceId, amountPaid, paidAt, now))) return false
              yield* announce("invoice.paid", yield* get(org, invoiceId))
              return true
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
        if (paid) return yield* get(org, invoiceId)
        // The status changed between the read and the update: paid by someone else is still success.
        const after = yield* get(org, invoiceId)
        if (after.status === "paid") return after
        return yield* new Conflict({
          code: "invoice_not_open",
          message: `Invoice ${after.number} is ${after.status} and cannot be paid`
        })
      })

    const createInvoice = (
      org: string,
      customerId: string,
      currency: string,
      lines: ReadonlyArray<LineInput>,
      options: CreateInvoiceOptions = {}
    ) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) =>
        sql.withTransaction(insertInvoice(org, customerId, currency, lines, options, now))
      ).pipe(Effect.catchTag("SqlError", Effect.die))

    const lockPayable = (org: string, invoiceId: string) =>
      Effect.map(repo.lockStatus(org, invoiceId), (status) =>
        Option.exists(status, (s) => s === "open" || s === "uncollectible")
      )

    const paymentFailed: InvoicesShape["paymentFailed"] = (org, invoiceId, message) =>
      Effect.flatMap(
        repo.find(org, invoiceId),
        Option.match({
          onNone: () => Effect.void,
          onSome: (invoice) => Effect.asVoid(announce("invoice.payment_failed", invoice, { failureMessage: message }))
        })
      )

    const voidInvoice: InvoicesShape["voidInvoice"] = (org, invoiceId) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        if (!(yield* repo.markVoid(org, invoiceId, now))) return false
        const invoice = yield* get(org, invoiceId).pipe(Effect.orDie)
        yield* credit.add(
          org,
          invoice.customerId,
          invoice.currency,
          BigInt(invoice.creditApplied),
          "invoice_voided",
          invoice.id
        )
        return true
      })

    const quote: InvoicesShape["quote"] = (org, customerId, currency, lines, options = {}) =>
      Effect.map(pricing(org, customerId, currency, lines, options), ({ priced, coupons }) => ({
        ...priced,
        customerTook: coupons.some((c, i) => c.customer === true && priced.took[i] === true)
      }))

    const recordPaid: InvoicesShape["recordPaid"] = (org, paid) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const planned = BigInt(paid.quote.creditApplied)
        if ((BigInt(paid.quote.total) - planned).toString() !== paid.amountPaid) {
          // Never by construction (the amount charged is the quote's total); if it happens the invoice still says
          // what was paid, and the difference is for a person to look at.
          yield* Effect.logError("a first payment's amount differs from its quote's total", {
            organization: org,
            subscription: paid.subscriptionId,
            total: paid.quote.total,
            creditApplied: paid.quote.creditApplied,
            paid: paid.amountPaid
          })
        }
        const id = yield* ids.next("inv")
        const { invoicePrefix } = yield* profiles.get(org)
        const applied = planned > 0n ? yield* credit.spend(org, paid.customerId, paid.currency, planned, id) : 0n
        // The customer's discount took something off the charge: this invoice is one of its invoices. It was read when
        // the charge was priced; if another invoice took its last use since, the charge stands as it was made (money
        // moved), and the overlap is logged for a person to see.
        if (paid.quote.customerDiscountUsed) {
          const active = yield* customerDiscounts.active(org, paid.customerId)
          const taken = Option.isSome(active)
            ? yield* customerDiscounts.used(org, paid.customerId, active.value.invoicesLeft)
            : false
          if (!taken) {
            yield* Effect.logWarning("a first payment's customer discount was used up or removed before it settled", {
              organization: org,
              customer: paid.customerId,
              subscription: paid.subscriptionId
            })
          }
        }
        const settled = BigInt(paid.quote.total) - applied - BigInt(paid.amountPaid) <= 0n
        const record: InvoiceRecord = {
          organizationId: org,
          id,
          // Taken from the organization's counter in the settling transaction: finalized (and paid) now.
          number: invoiceNumber(yield* repo.nextNumber(org), invoicePrefix),
          customerId: paid.customerId,
          subscriptionId: paid.subscriptionId,
          currency: paid.currency.toUpperCase(),
          status: settled ? "paid" : "open",
          lines: paid.quote.lines,
          subtotal: paid.quote.subtotal,
          discount: paid.quote.discount,
          tax: paid.quote.tax,
          taxNote: paid.quote.taxNote,
          total: paid.quote.total,
          amountPaid: paid.amountPaid,
          creditApplied: applied.toString(),
          periodStart: paid.periodStart,
          periodEnd: paid.periodEnd,
          attempts: 0,
          nextAttemptAt: null,
          createdAt: now,
          updatedAt: now,
          paidAt: settled ? now : null
        }
        yield* repo.insert(record)
        yield* announce("invoice.created", record)
        if (settled) yield* announce("invoice.paid", record)
        return record
      })

    return {
      generate,
      list,
      unbilled,
      get,
      lockPayable,
      markPaid,
      createInvoice,
      quote,
      voidInvoice,
      paymentFailed,
      recordPaid
    }
  })
)
