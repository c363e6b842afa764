import { SqlClient } from "@effect/sql"
import { BigDecimal, Clock, Effect } from "effect"
import { format, toDecimal } from "../domain/money.ts"

// What the dashboard shows that no `/v1` route answers: the overview's aggregates and a customer's entities. Reads
// only, every one scoped by the session's organization.

const DAY_MS = 86_400_000

/** Twelfths of a month per billing interval (decisions.md §13: daily × 30, weekly × 52 / 12, quarterly / 3, …). */
const TWELFTHS: Record<string, bigint> = { daily: 360n, weekly: 52n, monthly: 12n, quarterly: 4n, yearly: 1n }

/**
 * A currency's sum of twelfths as a monthly amount in whole minor units: summed exactly, divided by 12 once and
 * rounded half-up (a yearly 49,900 is 4,158.33… a month: shown as 4,158). Prices carry at most 6 decimal places.
 */
const twelfthsToMinor = (twelfths: BigDecimal.BigDecimal): string => {
  const scaled = BigDecimal.scale(twelfths, 6).value
  const whole = (scaled * 2n + 12_000_000n) / 24_000_000n // (x / 12) rounded half-up; never negative
  return format(BigDecimal.fromBigInt(whole))
}

export const overview = (organizationId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const now = yield* Clock.currentTimeMillis
    const subs = yield* sql<{
      status: string
      price: string
      currency: string
      interval: string | null
      billingType: string
      graceEndsAt: number | null
    }>`SELECT s.status, p.price, p.currency, p.interval, p.billing_type, s.grace_ends_at
      FROM subscriptions s JOIN plans p ON p.organization_id = s.organization_id AND p.id = s.plan_id
      WHERE s.organization_id = ${organizationId} AND s.status IN ('active', 'trialing', 'past_due')`
    const counts: Record<string, number> = { active: 0, trialing: 0, past_due: 0 }
    const mrr = new Map<string, BigDecimal.BigDecimal>()
    for (const s of subs) {
      counts[s.status] = (counts[s.status] ?? 0) + 1
      const inGrace = s.status === "past_due" && (s.graceEndsAt === null || Number(s.graceEndsAt) > now)
      if (s.status !== "active" && !inGrace) continue
      const twelfths = s.interval === null ? undefined : TWELFTHS[s.interval]
      if (s.billingType !== "recurring" || twelfths === undefined || s.currency === "") continue
      const add = BigDecimal.multiply(toDecimal(s.price), BigDecimal.fromBigInt(twelfths))
      mrr.set(s.currency, BigDecimal.sum(mrr.get(s.currency) ?? BigDecimal.fromBigInt(0n), add))
    }
    const since = Math.floor(now / DAY_MS) * DAY_MS - 29 * DAY_MS
    const usage = yield* sql<{ day: number; records: number; value: number }>`
      SELECT bucket_start / ${DAY_MS} AS day, SUM(records) AS records
      FROM usage_rollups WHERE organization_id = ${organizationId} AND bucket_start >= ${since}
      GROUP BY 1`
    const perDay = new Map(usage.map((r) => [Number(r.day), Number(r.records)]))
    const days = Array.from({ length: 30 }, (_, i) => since + i * DAY_MS)
    const pastDue = yield* sql<{
      id: string
      customerId: string
      externalId: string | null
      name: string | null
      email: string | null
      plan: string
      graceEndsAt: number | null
    }>`SELECT s.id, s.customer_id, c.external_id, c.name, c.email, p.slug AS plan, s.grace_ends_at
      FROM subscriptions s
      JOIN customers c ON c.organization_id = s.organization_id AND c.id = s.customer_id
      JOIN plans p ON p.organization_id = s.organization_id AND p.id = s.plan_id
      WHERE s.organization_id = ${organizationId} AND s.status = 'past_due'
      ORDER BY s.updated_at DESC LIMIT 50`
    return {
      subscriptions: counts,
      recurringRevenue: [...mrr.entries()]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([currency, twelfths]) => ({ currency, monthly: twelfthsToMinor(twelfths) })),
      usage: {
        days: days.map((d) => new Date(d).toISOString().slice(0, 10)),
        records: days.map((d) => perDay.get(d / DAY_MS) ?? 0)
      },
      pastDue: pastDue.map((p) => ({
        ...p,
        graceEndsAt: p.graceEndsAt === null ? null : new Date(Number(p.graceEndsAt)).toISOString()
      }))
    }
  }).pipe(Effect.orDie)

export const entities = (organizationId: string, customerId: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    return yield* sql<{
      entity: string
      name: string | null
      email: string | null
      status: string
      feature: string
      createdAt: number
    }>`SELECT e.entity, e.name, e.email, e.status, f.slug AS feature, e.created_at
      FROM entities e JOIN features f ON f.organization_id = e.organization_id AND f.id = e.feature_id
      WHERE e.organization_id = ${organizationId} AND e.customer_id = ${customerId}
      ORDER BY e.created_at DESC LIMIT 200`
  }).pipe(Effect.orDie)
