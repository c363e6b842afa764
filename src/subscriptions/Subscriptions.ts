import { SqlClient } from "@effect/sql"
import { BigDecimal, Clock, Context, Effect, Either, Layer, Option } from "effect"
import type { EventType } from "../api/events.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { type CatalogSnapshot, isFree, type Plan } from "../catalog/model.ts"
import { type CustomerInput, Customers } from "../customers/Customers.ts"
import type { CustomerRecord } from "../customers/CustomersRepo.ts"
import { Conflict, NotFound, type Unprocessable } from "../domain/errors.ts"
import { Outbox } from "../events/Outbox.ts"
import { Payments } from "../payments/Payments.ts"
import { addInterval } from "../domain/periods.ts"
import type { IdempotencyKey } from "../platform/idempotencyKey.ts"
import { retryWriteConflicts } from "../platform/db/deadlocks.ts"
import { Ids } from "../platform/ids.ts"
import { effectiveStatus, isGranting, rollFreePeriod, type SubscriptionRecord } from "./model.ts"
import { SubscriptionsRepo } from "./SubscriptionsRepo.ts"
import { Invoices } from "../billing/Invoices.ts"
import { Coupons } from "../catalog/coupons.ts"
import { countRedemption, findRedeemable, invoicesOf, type Redeemable } from "../catalog/redemption.ts"
import { SubscriptionDiscounts } from "../catalog/subscriptionDiscounts.ts"
import type { ChangeWhen } from "../domain/planChange.ts"
import { newAttachProposal, type Proposal, withPricing } from "./changeProposal.ts"
import { PlanChanges } from "./changes.ts"
import { CreditBalance } from "../creditBalance/CreditBalance.ts"
import { toWireSubscription } from "./wire.ts"
import { invoiceQuoteOf } from "../billing/invoiceQuote.ts"
import { firstInvoiceOf } from "./firstInvoice.ts"
import { alreadyAttached, type AttachError, type Attached } from "./attached.ts"
import { makeFirstPayment } from "./firstPayment.ts"

export interface AttachInput {
  readonly customer: string
  readonly product: string
  readonly customerData?: Omit<CustomerInput, "externalId"> | undefined
  readonly callbackUrl?: string | undefined
  /** The request's Idempotency-Key: one first-payment attempt per key. */
  readonly idempotency?: IdempotencyKey | undefined
  /** A change of plan (decisions.md §14): when it takes effect, and whether it is prorated. */
  readonly when?: ChangeWhen | undefined
  readonly prorate?: boolean | undefined
  /** A coupon (or a promotion code for one) for the subscription created or changed (decisions.md §15). */
  readonly coupon?: string | undefined
  readonly promotionCode?: string | undefined
}

export interface SubscriptionsShape {
  readonly attach: (organizationId: string, input: AttachInput) => Effect.Effect<Attached, AttachError>
  /** What `attach` would do now, changing nothing: a change's proposal, or a new subscription's first charge. */
  readonly preview: (
    organizationId: string,
    input: AttachInput
  ) => Effect.Effect<AttachPreviewOutcome, NotFound | Conflict | Unprocessable>
  readonly list: (
    organizationId: string,
    customer?: string
  ) => Effect.Effect<ReadonlyArray<{ subscription: SubscriptionRecord; plan: Plan | undefined }>, NotFound | Conflict>
  readonly cancel: (
    organizationId: string,
    id: string
  ) => Effect.Effect<{ subscription: SubscriptionRecord; plan: Plan | undefined }, NotFound>
  /**
   * Undoes a cancellation at period end (`subscription.resumed`): the subscription renews again. Not set to cancel
   * at period end: 409 `subscription_not_canceling`; already ended (canceled or expired): 409 `subscription_ended`.
   */
  readonly resume: (
    organizationId: string,
    id: string
  ) => Effect.Effect<{ subscription: SubscriptionRecord; plan: Plan | undefined }, NotFound | Conflict>
  readonly checkout: (
    organizationId: string,
    id: string,
    callbackUrl: string | null
  ) => Effect.Effect<Attached, AttachError>
  /**
   * A confirmed first payment: pending → active from now (a payment effect, inside its transaction), answering the
   * activated subscription and its plan. `null` when it was no longer pending (canceled meanwhile, or activated by
   * another payment).
   */
  readonly activate: (
    organizationId: string,
    id: string
  ) => Effect.Effect<{ readonly subscription: SubscriptionRecord; readonly plan: Plan | undefined } | null>
  /** A paid renewal invoice: past_due → active (a payment effect, inside its transaction). */
  readonly renewalPaid: (organizationId: string, id: string) => Effect.Effect<void>
  /** The customer's subscriptions granting at `now`, oldest first, with their plans. */
  readonly granting: (
    organizationId: string,
    customerId: string,
    now: number
  ) => Effect.Effect<ReadonlyArray<{ subscription: SubscriptionRecord; plan: Plan }>>
  /** Attach every free `autoEnable` plan to a customer (new customers: inside their creation, from its instant). */
  readonly attachAutoEnabled: (organizationId: string, customer: CustomerRecord, now: number) => Effect.Effect<void>
  /** Attach newly `autoEnable` free plans to every existing customer (after a sync). */
  readonly attachPlansToAll: (organizationId: string, planIds: ReadonlyArray<string>) => Effect.Effect<void>
}

export interface AttachPreviewOutcome {
  readonly subscription: SubscriptionRecord | null
  readonly from: Plan | null
  readonly to: Plan
  readonly proposal: Proposal
}

export class Subscriptions extends Context.Tag("Subscriptions")<Subscriptions, SubscriptionsShape>() {}

const planNotFound = (ref: string) => new NotFound({ code: "plan_not_found", message: `No plan '${ref}'` })
const subscriptionNotFound = (id: string) =>
  new NotFound({ code: "subscription_not_found", message: `No subscription '${id}'` })

/** Plans in the same group replace each other; add-ons stack. Plans without a group share the default one. */
export const replaces = (incoming: Plan, existing: Plan | undefined) =>
  existing !== undefined && !incoming.isAddon && !existing.isAddon && incoming.planGroup === existing.planGroup

/**
 * Of a customer's live subscriptions (`listLive`: oldest first), those granting at `now`, with their plans (pure: the
 * entitlement engine reads the live subscriptions together with the customer and calls this).
 */
export const grantingOf = (
  live: ReadonlyArray<SubscriptionRecord>,
  snapshot: CatalogSnapshot,
  now: number
): Array<{ subscription: SubscriptionRecord; plan: Plan }> => {
  const out: Array<{ subscription: SubscriptionRecord; plan: Plan }> = []
  for (const s of live) {
    const plan = snapshot.plansById.get(s.planId)
    // Free periods roll lazily; readers of currentPeriodEnd (entity removal) need the current one.
    const current = plan !== undefined && isFree(plan) ? rollFreePeriod(s, plan.interval, now) : s
    if (plan !== undefined && isGranting(current, now)) out.push({ subscription: current, plan })
  }
  return out
}

export const SubscriptionsLive = Layer.effect(
  Subscriptions,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* SubscriptionsRepo
    const catalog = yield* Catalog
    const customers = yield* Customers
    const ids = yield* Ids
    const payments = yield* Payments
    const outbox = yield* Outbox
    const changes = yield* PlanChanges
    const credit = yield* CreditBalance
    const invoices = yield* Invoices
    const coupons = yield* Coupons
    const subscriptionDiscounts = yield* SubscriptionDiscounts

    /** The subscription's event, written with the change (the caller's transaction). */
    const announce = (type: SubscriptionEventType, s: SubscriptionRecord, plan: Plan | undefined) =>
      Effect.flatMap(catalog.snapshot(s.organizationId), (snap) =>
        outbox.emit(s.organizationId, {
          type,
          // The catalog names a waiting plan change by its slug.
          data: toWireSubscription(s, plan, snap.plansById),
          customerId: s.customerId,
          subjectId: s.id
        })
      ).pipe(Effect.asVoid)

    const planOf = (organizationId: string, planId: string) =>
      Effect.map(catalog.snapshot(organizationId), (snap) => snap.plansById.get(planId))

    /**
     * Create a live subscription of a free plan; replaced plans end now. One transaction with its events, and with
     * the attach's coupon counted and bound to it (only when it is created: an attach finding it counts nothing).
     */
    const start = (
      organizationId: string,
      customerId: string,
      plan: Plan,
      now: number,
      pending = false,
      discount?: { readonly redeemed: Redeemable; readonly invoicesLeft: number | null }
    ) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            // One read for both questions: the payment of a pending one activates it without the customer's lock, so
            // a second read could miss it in both states (pending, then active) and start a second subscription.
            const ofPlan = (yield* repo.listByCustomer(organizationId, customerId)).filter((s) => s.planId === plan.id)
            const same = ofPlan.find((s) => isGranting(s, now))
            if (same !== undefined) return { subscription: same, created: false }
            // A paid plan already waiting for its first payment is the one to pay, not a second one to charge.
            const waiting = pending ? ofPlan.find((s) => s.status === "pending") : undefined
            if (waiting !== undefined) return { subscription: waiting, created: false }
            // A pending subscription replaces nothing until it is paid for (see activate).
            if (!pending) yield* replaceGroup(organizationId, customerId, plan, now, null)
            const trialDays = plan.trialDays ?? 0
            const periodEnd =
              plan.billingType === "recurring" && plan.interval !== null ? addInterval(now, plan.interval, 1) : null
            const subscription: SubscriptionRecord = {
              organizationId,
              id: yield* ids.next("sub"),
              customerId,
              planId: plan.id,
              status: pending ? "pending" : trialDays > 0 ? "trialing" : "active",
              startedAt: now,
              currentPeriodStart: now,
              currentPeriodEnd: periodEnd,
              trialEndsAt: trialDays > 0 ? now + trialDays * 86_400_000 : null,
              cancelAtPeriodEnd: false,
              canceledAt: null,
              graceEndsAt: null,
              scheduledPlanId: null,
              scheduledAt: null,
              resetAnchor: null,
              createdAt: now,
              updatedAt: now
            }
            yield* repo.insert(subscription)
            if (discount !== undefined) {
              yield* countRedemption(sql, organizationId, discount.redeemed)
              yield* subscriptionDiscounts.bind(
                organizationId,
                subscription.id,
                discount.redeemed,
                discount.invoicesLeft,
                now
              )
            }
            yield* announce("subscription.created", subscription, plan)
            return { subscription, created: true }
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    const replaceGroup = (organizationId: string, customerId: string, plan: Plan, now: number, keepId: string | null) =>
      Effect.gen(function* () {
        const snap = yield* catalog.snapshot(organizationId)
        for (const old of yield* repo.listLive(organizationId, customerId)) {
          if (old.id !== keepId && replaces(plan, snap.plansById.get(old.planId))) {
            const canceled: SubscriptionRecord = { ...old, status: "canceled", canceledAt: now, updatedAt: now }
            yield* repo.update(canceled)
            yield* announce("subscription.canceled", canceled, snap.plansById.get(old.planId))
          }
        }
      })

    // `activate` is defined below; the first payment only calls it later, when a balance covers a charge.
    const { collectFirstPayment, firstCharge } = makeFirstPayment({
      sql,
      repo,
      payments,
      invoices,
      credit,
      subscriptionDiscounts,
      activate: (organizationId, id) => activate(organizationId, id)
    })

    /** The coupon an attach names, found and checked against the plan; undefined when it names none. */
    const requestedDiscount = (organizationId: string, input: AttachInput, plan: Plan, now: number) =>
      input.coupon === undefined && input.promotionCode === undefined
        ? Effect.succeed(undefined)
        : findRedeemable(coupons, organizationId, { coupon: input.coupon, promotionCode: input.promotionCode }, now, {
            plan: plan.slug,
            currency: plan.currency ?? "NGN"
          })

    const resolveCustomer = (
      organizationId: string,
      input: AttachInput,
      now: number
    ): Effect.Effect<CustomerRecord, NotFound | Conflict> =>
      customers
        .resolve(organizationId, input.customer)
        .pipe(
          Effect.catchTag("NotFound", (notFound): Effect.Effect<CustomerRecord, NotFound | Conflict> =>
            input.customerData === undefined
              ? Effect.fail(notFound)
              : customers.findOrCreate(organizationId, { ...input.customerData, externalId: input.customer }, now)
          )
        )

    /** The customer's live subscription that attaching `plan` would change: same group, not an add-on, granting. */
    const changeable = (organizationId: string, customerId: string, plan: Plan, snap: CatalogSnapshot, now: number) =>
      plan.isAddon
        ? Effect.succeed(undefined)
        : Effect.map(repo.listLive(organizationId, customerId), (live) =>
            live.find(
              (s) => isGranting(s, now) && (s.planId === plan.id || replaces(plan, snap.plansById.get(s.planId)))
            )
          )

    const preview = (organizationId: string, input: AttachInput) =>
      Effect.gen(function* () {
        const now = yield* Clock.currentTimeMillis
        const customer = yield* customers.resolve(organizationId, input.customer)
        const snap = yield* catalog.snapshot(organizationId)
        const plan = snap.plans.get(input.product) ?? snap.plansById.get(input.product)
        if (plan === undefined) return yield* planNotFound(input.product)
        const redeem = yield* requestedDiscount(organizationId, input, plan, now)
        const live = yield* changeable(organizationId, customer.id, plan, snap, now)
        if (live !== undefined) {
          const { from, proposal, to } = yield* changes.preview(organizationId, live, plan, { ...input, redeem })
          return { subscription: live, from, to, proposal }
        }
        const proposal = newAttachProposal(plan, now)
        const balance = yield* credit.balance(organizationId, customer.id, proposal.currency)
        if (proposal.lines.length === 0) {
          return { subscription: null, from: null, to: plan, proposal: { ...proposal, creditBalanceAfter: balance } }
        }
        const priced = yield* firstCharge(organizationId, customer.id, plan, now, redeem?.coupon ?? null)
        // The first payment is an invoice (h18): the credit balance pays first, the payment the rest.
        return { subscription: null, from: null, to: plan, proposal: withPricing(proposal, priced, balance) }
      })

    const attach = (organizationId: string, input: AttachInput): Effect.Effect<Attached, AttachError> =>
      Effect.gen(function* () {
        // One instant for the request: a customer it creates and the plan it attaches start together.
        const now = yield* Clock.currentTimeMillis
        const snap = yield* catalog.snapshot(organizationId)
        const plan = snap.plans.get(input.product) ?? snap.plansById.get(input.product)
        if (plan === undefined) return yield* planNotFound(input.product)
        // An unusable coupon refuses the attach before anything is written (not even a customer from customerData).
        const redeem = yield* requestedDiscount(organizationId, input, plan, now)
        const customer = yield* resolveCustomer(organizationId, input, now)
        // A plan of a group the customer already has a live plan in: a change of that subscription (§14).
        const live = yield* changeable(organizationId, customer.id, plan, snap, now)
        if (live !== undefined) {
          if (!isFree(plan)) yield* payments.ensureProvider(organizationId, plan.provider)
          return yield* changes.change(organizationId, customer, live, plan, { ...input, redeem })
        }
        const charged = !isFree(plan) && (plan.trialDays ?? 0) === 0
        if (charged) yield* payments.ensureProvider(organizationId, plan.provider)
        const first = charged
          ? yield* firstCharge(organizationId, customer.id, plan, now, redeem?.coupon ?? null)
          : undefined
        // A first charge the coupon takes to zero has nothing to collect: the subscription starts at once.
        const paid = first !== undefined && BigDecimal.greaterThan(first.total, BigDecimal.fromBigInt(0n))
        // The first charge is the first of the coupon's invoices when the coupon took something off it.
        const discount =
          redeem === undefined
            ? undefined
            : {
                redeemed: redeem,
                invoicesLeft: ((n) => (n !== null && first?.took[0] === true ? n - 1 : n))(invoicesOf(redeem.coupon))
              }
        // The customer's row lock makes concurrent attaches of one plan take turns: the second finds the first's.
        // Run again when the database gave up on it before writing anything (a SQLite file shared by processes).
        const { created, subscription } = yield* retryWriteConflicts(
          sql.withTransaction(
            Effect.gen(function* () {
              yield* repo.lockCustomer(organizationId, customer.id)
              const started = yield* start(organizationId, customer.id, plan, now, paid, discount)
              // A first charge the coupon took to zero is still a sale: its paid invoice of total 0 (the discount on
              // its line) is written with the subscription, so only the request that created it writes one.
              if (started.created && first !== undefined && !paid) {
                const currency = (plan.currency ?? "NGN").toUpperCase()
                yield* invoices.recordPaid(
                  organizationId,
                  firstInvoiceOf(invoiceQuoteOf(first, 0n), started.subscription, plan, "0", currency)
                )
              }
              return started
            })
          )
        ).pipe(Effect.catchTag("SqlError", Effect.die))
        if (!paid || (!created && subscription.status !== "pending")) {
          return created
            ? { ...alreadyAttached(subscription, plan), message: `Attached ${plan.slug}` }
            : alreadyAttached(subscription, plan)
        }
        return yield* collectFirstPayment(
          organizationId,
          customer,
          subscription,
          plan,
          input.callbackUrl ?? null,
          input.idempotency,
          // The request that created it is a possible duplicate too: an identical attach that found it pending may
          // claim first (the creator still pricing), have the card declined, and leave the creator to claim next. A
          // new subscription has no other declines, so the one-minute hold only ever stops that second charge.
          { attaching: true, duplicate: true }
        )
      })

    const activate = (organizationId: string, id: string) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const current = yield* repo.getForUpdate(organizationId, id)
            if (Option.isNone(current) || current.value.status !== "pending") return null
            const now = yield* Clock.currentTimeMillis
            const plan = yield* planOf(organizationId, current.value.planId)
            if (plan !== undefined) yield* replaceGroup(organizationId, current.value.customerId, plan, now, id)
            const periodEnd =
              plan !== undefined && plan.billingType === "recurring" && plan.interval !== null
                ? addInterval(now, plan.interval, 1)
                : null
            const activated: SubscriptionRecord = {
              ...current.value,
              status: "active",
              startedAt: now,
              currentPeriodStart: now,
              currentPeriodEnd: periodEnd,
              updatedAt: now
            }
            yield* repo.update(activated)
            yield* announce("subscription.activated", activated, plan)
            return { subscription: activated, plan }
          })
        )
        .pipe(Effect.orDie)

    const withPlans = (organizationId: string, subs: ReadonlyArray<SubscriptionRecord>, now: number) =>
      Effect.map(catalog.snapshot(organizationId), (snap) =>
        subs.map((s) => {
          const plan = snap.plansById.get(s.planId)
          const rolled = rollFreePeriod(s, plan !== undefined && isFree(plan) ? plan.interval : null, now)
          return { subscription: { ...rolled, status: effectiveStatus(rolled, now) }, plan }
        })
      )

    const get = (organizationId: string, id: string) =>
      Effect.flatMap(
        repo.get(organizationId, id),
        Option.match({ onNone: () => Effect.fail(subscriptionNotFound(id)), onSome: Effect.succeed })
      )

    return {
      attach,
      preview,
      list: (organizationId, customer) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const subs =
            customer === undefined
              ? yield* repo.listByOrganization(organizationId)
              : yield* Effect.flatMap(customers.resolve(organizationId, customer), (c) =>
                  repo.listByCustomer(organizationId, c.id)
                )
          return yield* withPlans(organizationId, subs, now)
        }),
      cancel: (organizationId, id) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          yield* get(organizationId, id)
          // Decided over the locked row, so a plan change or a renewal at the same moment is not written over.
          const next = yield* sql
            .withTransaction(
              Effect.gen(function* () {
                const current = Option.getOrThrow(yield* repo.getForUpdate(organizationId, id))
                const status = effectiveStatus(current, now)
                if (status === "canceled" || status === "expired") return current
                // A period that ends is kept to its end; one that never ends (or never started) stops now. A
                // scheduled plan change gives way to the cancellation (decisions.md §14: the later one wins).
                const next: SubscriptionRecord =
                  current.currentPeriodEnd !== null && status !== "pending"
                    ? { ...current, cancelAtPeriodEnd: true, scheduledPlanId: null, scheduledAt: null, updatedAt: now }
                    : { ...current, status: "canceled", canceledAt: now, updatedAt: now }
                yield* repo.update(next)
                // Canceled now: announced with the change; canceled at period end: when the renewals worker ends it.
                if (next.status === "canceled")
                  yield* announce("subscription.canceled", next, yield* planOf(organizationId, next.planId))
                return next
              })
            )
            .pipe(Effect.orDie)
          return (yield* withPlans(organizationId, [next], now))[0]!
        }),
      resume: (organizationId, id) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          yield* get(organizationId, id)
          // Decided over the locked row, as cancel is: a renewal ending it at this moment is not written over.
          const outcome = yield* sql
            .withTransaction(
              Effect.gen(function* () {
                const current = Option.getOrThrow(yield* repo.getForUpdate(organizationId, id))
                const status = effectiveStatus(current, now)
                if (status === "canceled" || status === "expired") {
                  return Either.left(
                    new Conflict({
                      code: "subscription_ended",
                      message: `The subscription is ${status}: attach the plan again instead`
                    })
                  )
                }
                if (!current.cancelAtPeriodEnd) {
                  return Either.left(
                    new Conflict({
                      code: "subscription_not_canceling",
                      message: "The subscription is not set to cancel at its period end: nothing to resume"
                    })
                  )
                }
                const next: SubscriptionRecord = { ...current, cancelAtPeriodEnd: false, updatedAt: now }
                yield* repo.update(next)
                yield* announce("subscription.resumed", next, yield* planOf(organizationId, next.planId))
                return Either.right(next)
              })
            )
            .pipe(Effect.orDie)
          const next = yield* outcome
          return (yield* withPlans(organizationId, [next], now))[0]!
        }),
      checkout: (organizationId, id, callbackUrl) =>
        Effect.gen(function* () {
          const now = yield* Clock.currentTimeMillis
          const current = yield* get(organizationId, id)
          if (current.status !== "pending") {
            return yield* new Conflict({
              code: "subscription_not_pending",
              message: `The subscription is ${effectiveStatus(current, now)}, not pending`
            })
          }
          const plan = yield* planOf(organizationId, current.planId)
          if (plan === undefined) return yield* planNotFound(current.planId)
          if (isFree(plan)) {
            yield* activate(organizationId, current.id)
            const activated = Option.getOrElse(yield* repo.get(organizationId, id), () => current)
            return {
              subscription: activated,
              plan,
              checkoutUrl: null,
              reference: null,
              accessCode: null,
              message: "Activated without payment: the plan is free"
            }
          }
          const customer = yield* customers
            .resolve(organizationId, current.customerId)
            .pipe(Effect.catchTag("Conflict", () => Effect.die("a customer id is unambiguous")))
          return yield* collectFirstPayment(organizationId, customer, current, plan, callbackUrl)
        }),
      activate,
      renewalPaid: (organizationId, id) =>
        Effect.gen(function* () {
          const current = yield* repo.get(organizationId, id)
          if (Option.isNone(current) || current.value.status !== "past_due") return
          const renewed: SubscriptionRecord = {
            ...current.value,
            status: "active",
            graceEndsAt: null,
            updatedAt: yield* Clock.currentTimeMillis
          }
          yield* repo.update(renewed)
          // The renewal's invoice is paid (this runs in the settling transaction): the renewal went through.
          yield* announce("subscription.renewed", renewed, yield* planOf(organizationId, renewed.planId))
        }),
      granting: (organizationId, customerId, now) =>
        Effect.gen(function* () {
          const live = yield* repo.listLive(organizationId, customerId)
          if (live.length === 0) return []
          const snap = yield* catalog.snapshot(organizationId)
          return grantingOf(live, snap, now)
        }),
      attachAutoEnabled: (organizationId, customer, now) =>
        Effect.gen(function* () {
          const snap = yield* catalog.snapshot(organizationId)
          for (const plan of snap.plans.values()) {
            if (plan.autoEnable && isFree(plan)) yield* Effect.orDie(start(organizationId, customer.id, plan, now))
          }
        }),
      attachPlansToAll: (organizationId, planIds) =>
        Effect.gen(function* () {
          const snap = yield* catalog.snapshot(organizationId)
          const plans = planIds
            .map((id) => snap.plansById.get(id))
            .filter((p): p is Plan => p !== undefined && isFree(p))
          if (plans.length === 0) return
          const now = yield* Clock.currentTimeMillis
          const all = yield* customers.listAllIds(organizationId)
          for (const customerId of all) {
            for (const plan of plans) yield* Effect.orDie(start(organizationId, customerId, plan, now))
          }
        })
    }
  })
)

export type { Attached } from "./attached.ts"
export type SubscriptionEventType = Extract<EventType, `subscription.${string}`>

export { toWireSubscription } from "./wire.ts"
