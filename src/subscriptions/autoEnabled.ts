import { type CatalogSnapshot, isFree, type Plan } from "../catalog/model.ts"
import { addInterval } from "../domain/periods.ts"
import type { SubscriptionRecord } from "./model.ts"
import { replaces, type SubscriptionEventType, toWireSubscription } from "./Subscriptions.ts"

/** The free `autoEnable` plans a new customer starts with, in the catalog's order (as `attachAutoEnabled`). */
export const autoEnabledPlans = (snapshot: CatalogSnapshot): ReadonlyArray<Plan> =>
  [...snapshot.plans.values()].filter((plan) => plan.autoEnable && isFree(plan))

export interface StartedSubscriptions {
  /** The new customer's subscriptions as they are left (one replaced by a later plan of its group is canceled). */
  readonly subscriptions: ReadonlyArray<SubscriptionRecord>
  /** Their events in the order `attachAutoEnabled` writes them. */
  readonly events: ReadonlyArray<{
    readonly type: SubscriptionEventType
    readonly subscriptionId: string
    readonly data: ReturnType<typeof toWireSubscription>
  }>
}

/**
 * What `attachAutoEnabled` does for a customer that has no subscription yet, as data (pure): each plan started at
 * `now` in turn, ending the earlier ones of its group. `ids` holds one subscription id per plan. A batch creating many
 * customers writes all of theirs with a few multi-row statements (src/entitlements/newCustomers.ts).
 */
export const startAutoEnabled = (
  organizationId: string,
  customerId: string,
  plans: ReadonlyArray<Plan>,
  now: number,
  ids: ReadonlyArray<string>
): StartedSubscriptions => {
  const live: Array<{ subscription: SubscriptionRecord; plan: Plan }> = []
  const ended: Array<SubscriptionRecord> = []
  const events: Array<StartedSubscriptions["events"][number]> = []
  plans.forEach((plan, i) => {
    for (let j = 0; j < live.length; j++) {
      const old = live[j]!
      if (!replaces(plan, old.plan)) continue
      const canceled: SubscriptionRecord = { ...old.subscription, status: "canceled", canceledAt: now, updatedAt: now }
      ended.push(canceled)
      events.push({
        type: "subscription.canceled",
        subscriptionId: canceled.id,
        data: toWireSubscription(canceled, old.plan)
      })
      live.splice(j--, 1)
    }
    const trialDays = plan.trialDays ?? 0
    const subscription: SubscriptionRecord = {
      organizationId,
      id: ids[i]!,
      customerId,
      planId: plan.id,
      status: trialDays > 0 ? "trialing" : "active",
      startedAt: now,
      currentPeriodStart: now,
      currentPeriodEnd:
        plan.billingType === "recurring" && plan.interval !== null ? addInterval(now, plan.interval, 1) : null,
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
    live.push({ subscription, plan })
    events.push({
      type: "subscription.created",
      subscriptionId: subscription.id,
      data: toWireSubscription(subscription, plan)
    })
  })
  const order = new Map(ids.map((id, i) => [id, i]))
  const all = [...ended, ...live.map((l) => l.subscription)].sort((a, b) => order.get(a.id)! - order.get(b.id)!)
  return { subscriptions: all, events }
}
