import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../api/Api.ts"
import { CurrentOrganization } from "../api/security.ts"
import { mapDomainErrors } from "../boundary/toApiError.ts"
import { idempotencyKeyOf } from "../platform/idempotencyKey.ts"
import { storedLine, wireLine } from "../billing/lines.ts"
import { InvoiceLinks } from "../billing/documents/links.ts"
import { toWireInvoice } from "../billing/Invoices.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { PlanChanges } from "./changes.ts"
import { Subscriptions, toWireSubscription } from "./Subscriptions.ts"

export const SubscriptionsHttp = HttpApiBuilder.group(BillingApi, "subscriptions", (handlers) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions
    const changes = yield* PlanChanges
    const catalog = yield* Catalog
    const links = yield* InvoiceLinks
    const plansOf = (org: string) => Effect.map(catalog.snapshot(org), (snap) => snap.plansById)
    return handlers
      .handle("attach", ({ payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const idempotency = yield* idempotencyKeyOf("attach", payload)
          const a = yield* subscriptions.attach(org.id, { ...payload, idempotency })
          return {
            success: true,
            subscription: toWireSubscription(a.subscription, a.plan, yield* plansOf(org.id)),
            checkoutUrl: a.checkoutUrl,
            ...(a.invoice === undefined ? {} : { invoice: toWireInvoice(a.invoice, links) }),
            message: a.message
          }
        }).pipe(mapDomainErrors)
      )
      .handle("previewAttach", ({ payload }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const { from, proposal: p, subscription, to } = yield* subscriptions.preview(org.id, payload)
          return {
            success: true,
            subscriptionId: subscription?.id ?? null,
            plan: to.slug,
            previousPlan: from?.slug ?? null,
            when: p.when,
            effectiveAt: new Date(p.effectiveAt).toISOString(),
            scheduled: p.when === "period_end",
            currency: p.currency,
            // Priced as the invoice would be (discounts, taxes), when the proposal has lines to price.
            lines: (p.pricedLines ?? p.lines.map(storedLine)).map((line) => {
              const { tierBreakdown: _, ...wire } = wireLine(line)
              return wire
            }),
            subtotal: Number(p.subtotal),
            discount: Number(p.discount),
            tax: Number(p.tax),
            total: Number(p.total),
            creditApplied: Number(p.creditApplied),
            amountDue: Number(p.amountDue),
            creditBalanceAfter: Number(p.creditBalanceAfter)
          }
        }).pipe(mapDomainErrors)
      )
      .handle("cancelChange", ({ path }) =>
        Effect.gen(function* () {
          const org = yield* CurrentOrganization
          const s = yield* changes.cancelChange(org.id, path.id)
          const plans = yield* plansOf(org.id)
          return { success: true, subscription: toWireSubscription(s, plans.get(s.planId), plans) }
        }).pipe(mapDomainErrors)
      )
      .handle("listSubscriptions", ({ urlParams }) =>
        Effect.flatMap(CurrentOrganization, (org) => subscriptions.list(org.id, urlParams.customer)).pipe(
          Effect.zipWith(
            Effect.flatMap(CurrentOrganization, (org) => plansOf(org.id)),
            (list, plans) => ({
              success: true,
              subscriptions: list.map(({ plan, subscription }) => toWireSubscription(subscription, plan, plans))
            })
          ),
          mapDomainErrors
        )
      )
      .handle("checkoutSubscription", ({ path, payload }) =>
        Effect.flatMap(CurrentOrganization, (org) =>
          subscriptions.checkout(org.id, path.id, payload.callbackUrl ?? null)
        ).pipe(
          Effect.map((a) => ({
            success: true,
            checkoutUrl: a.checkoutUrl,
            reference: a.reference,
            accessCode: a.accessCode,
            activatedDirectly: a.subscription.status === "active",
            code: a.code ?? (a.checkoutUrl !== null ? ("checkout_required" as const) : ("activated" as const)),
            message: a.message
          })),
          mapDomainErrors
        )
      )
      .handle("resumeSubscription", ({ path }) =>
        Effect.flatMap(CurrentOrganization, (org) => subscriptions.resume(org.id, path.id)).pipe(
          Effect.map(({ plan, subscription }) => ({
            success: true,
            subscription: toWireSubscription(subscription, plan)
          })),
          mapDomainErrors
        )
      )
      .handle("cancelSubscription", ({ path }) =>
        Effect.flatMap(CurrentOrganization, (org) => subscriptions.cancel(org.id, path.id)).pipe(
          Effect.map(({ plan, subscription }) => ({
            success: true,
            subscription: toWireSubscription(subscription, plan)
          })),
          mapDomainErrors
        )
      )
  })
)
