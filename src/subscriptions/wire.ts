import type { Subscription } from "../api/subscriptions.ts"
import type { Plan } from "../catalog/model.ts"
import type { SubscriptionRecord } from "./model.ts"

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString())

/**
 * The wire subscription of decisions.md §7 and §14. `plans` (the catalog's plans by id) names the plan of a waiting
 * change by its slug; without it the change shows the plan's id.
 */
export const toWireSubscription = (
  s: SubscriptionRecord,
  plan: Plan | undefined,
  plans?: ReadonlyMap<string, Plan>
): Subscription => {
  const slug = (id: string) => plans?.get(id)?.slug ?? id
  const scheduled =
    s.scheduledPlanId != null && s.scheduledAt != null
      ? { scheduledChange: { plan: slug(s.scheduledPlanId), at: iso(s.scheduledAt)! } }
      : {}
  const pending =
    s.pendingPlanId != null && s.pendingInvoiceId != null && s.pendingExpiresAt != null
      ? {
          pendingChange: {
            plan: slug(s.pendingPlanId),
            invoiceId: s.pendingInvoiceId,
            expiresAt: iso(s.pendingExpiresAt)!
          }
        }
      : {}
  return {
    id: s.id,
    customerId: s.customerId,
    planId: s.planId,
    plan: plan?.slug ?? s.planId,
    status: s.status,
    currentPeriodStart: s.status === "pending" ? null : iso(s.currentPeriodStart),
    currentPeriodEnd: s.status === "pending" ? null : iso(s.currentPeriodEnd),
    trialEndsAt: iso(s.trialEndsAt),
    cancelAtPeriodEnd: s.cancelAtPeriodEnd,
    canceledAt: iso(s.canceledAt),
    ...scheduled,
    ...pending,
    createdAt: s.createdAt,
    updatedAt: s.updatedAt
  }
}
