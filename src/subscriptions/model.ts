import type { SubscriptionStatus as SubscriptionStatusSchema } from "../api/subscriptions.ts"
import { addInterval, type BillingInterval } from "../domain/periods.ts"

/** The contract's statuses (src/api/subscriptions.ts holds the one list). */
export type SubscriptionStatus = typeof SubscriptionStatusSchema.Type

export interface SubscriptionRecord {
  readonly organizationId: string
  readonly id: string
  readonly customerId: string
  readonly planId: string
  readonly status: SubscriptionStatus
  /** Anchor of the billing period, and of every reset window the plan grants unless `resetAnchor` is set. */
  readonly startedAt: number
  readonly currentPeriodStart: number
  /** `null` for a plan that never renews (one-time, or free without an interval). */
  readonly currentPeriodEnd: number | null
  readonly trialEndsAt: number | null
  readonly cancelAtPeriodEnd: boolean
  readonly canceledAt: number | null
  readonly graceEndsAt: number | null
  readonly createdAt: number
  readonly updatedAt: number
  /**
   * A change waiting for the period end (decisions.md §14): the plan the renewal at `scheduledAt` switches to.
   */
  readonly scheduledPlanId: string | null
  readonly scheduledAt: number | null
  /**
   * A change made now, waiting for its invoice to be paid; the old plan stays in force until then. Absent where the
   * reader did not load it (the entitlement hot path reads only what grants and what its answer says).
   */
  readonly pendingPlanId?: string | null
  readonly pendingInvoiceId?: string | null
  readonly pendingExpiresAt?: number | null
  /**
   * The anchor of the reset windows once an interval change has restarted the billing anchor (`startedAt`): the
   * windows keep theirs, so the current window's usage stays counted (decisions.md §14). Null: `startedAt`.
   */
  readonly resetAnchor: number | null
}

/** Where the reset windows of a subscription's features are anchored. */
export const resetAnchorOf = (s: SubscriptionRecord): number => s.resetAnchor ?? s.startedAt

/**
 * The record with its billing anchor moved to `startedAt` (an interval change): the reset windows stay where they
 * were, so the usage of the current one is not lost at the switch.
 */
export const withStartedAt = (
  s: SubscriptionRecord,
  startedAt: number
): Pick<SubscriptionRecord, "startedAt" | "resetAnchor"> =>
  startedAt === s.startedAt ? { startedAt, resetAnchor: s.resetAnchor } : { startedAt, resetAnchor: resetAnchorOf(s) }

/** Whether a subscription grants its plan's features at `now` (decisions.md §5). */
export const isGranting = (s: SubscriptionRecord, now: number): boolean => {
  switch (s.status) {
    case "active":
      return !(s.cancelAtPeriodEnd && s.currentPeriodEnd !== null && now >= s.currentPeriodEnd)
    case "trialing":
      return s.trialEndsAt === null || now < s.trialEndsAt
    case "past_due":
      return s.graceEndsAt !== null && now < s.graceEndsAt
    default:
      return false
  }
}

/**
 * A free subscription's period rolls forward lazily: the period containing `now`, anchored at its start.
 * (Paid renewals are charged by the billing worker, which moves the period itself.)
 */
export const rollFreePeriod = (
  s: SubscriptionRecord,
  interval: BillingInterval | null,
  now: number
): SubscriptionRecord => {
  if (interval === null || s.currentPeriodEnd === null || now < s.currentPeriodEnd || s.cancelAtPeriodEnd) return s
  let k = 1
  while (addInterval(s.startedAt, interval, k) <= now) k++
  return {
    ...s,
    currentPeriodStart: addInterval(s.startedAt, interval, k - 1),
    currentPeriodEnd: addInterval(s.startedAt, interval, k)
  }
}

/** The status a reader should see: a subscription past its canceling period end is canceled. */
export const effectiveStatus = (s: SubscriptionRecord, now: number): SubscriptionStatus => {
  if (s.status === "active" && s.cancelAtPeriodEnd && s.currentPeriodEnd !== null && now >= s.currentPeriodEnd) {
    return "canceled"
  }
  if (s.status === "past_due" && s.graceEndsAt !== null && now >= s.graceEndsAt) return "canceled"
  return s.status
}
