/**
 * The database ceiling of an allowed `track`: the statements the service sends to PostgreSQL for one allowed
 * track of a metered feature granted directly by a plan (no idempotency key, no spend cap, no entity), replayed by
 * a raw-driver loop (`Bun.sql`, prepared statements) with the same parameters, on the same rows. What this loop
 * reaches is what the database can do for the service's exact work; the service's rate over it is its efficiency.
 *
 * Keep `current` identical to what the service runs (src/http/Authentication.ts, src/entitlements/hotStatements.ts). `v1` is the statement sequence of the first version (before issue 7), kept as a
 * fixed reference: one key lookup, three reads, and a transaction holding the balance's row lock across five
 * client round trips. (Its UPDATE also bumps `balances.version`, as every writer of a balance must now, so the two
 * can run against the same rows as the service.)
 */
import type { SQL } from "bun"

export interface CeilingContext {
  readonly organizationId: string
  readonly keyHash: string
  readonly featureId: string
  readonly planId: string
  /** Micro-units per track (value 1 = 1,000,000). */
  readonly valueMicro: number
  readonly customers: ReadonlyArray<{ readonly id: string; readonly externalId: string }>
}

export type CeilingScript = (
  db: SQL,
  ctx: CeilingContext,
  customer: CeilingContext["customers"][number]
) => Promise<void>

const ROLLUP_MS = 15 * 60_000
const ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
export const eventId = (now: number) => {
  let t = now
  let out = ""
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32] + out
    t = Math.floor(t / 32)
  }
  for (const b of crypto.getRandomValues(new Uint8Array(16))) out += ALPHABET[b & 31]
  return `evt_${out}`
}

/** The first version: reads, then BEGIN; create-if-missing; SELECT … FOR UPDATE; UPDATE; rollup; event; COMMIT. */
const v1: CeilingScript = async (db, ctx, customer) => {
  const org = ctx.organizationId
  const now = Date.now()
  await db`SELECT o.id, o.slug, o.name, k.environment FROM api_keys k JOIN organizations o ON o.id = k.organization_id
           WHERE k.key_hash = ${ctx.keyHash} AND k.revoked_at IS NULL`
  await db`SELECT * FROM customers WHERE organization_id = ${org}
           AND (id = ${customer.externalId} OR external_id = ${customer.externalId} OR email_lower = ${customer.externalId.toLowerCase()})`
  await db`SELECT * FROM subscriptions WHERE organization_id = ${org} AND customer_id = ${customer.id}
           AND status IN ('active', 'trialing', 'past_due') ORDER BY started_at, id`
  await db`SELECT overage, max_overage_units FROM customer_feature_configs
           WHERE organization_id = ${org} AND customer_id = ${customer.id} AND feature_id = ${ctx.featureId}`
  await db.begin(async (tx) => {
    await tx`INSERT INTO balances (organization_id, customer_id, subject_id, window_start, window_end, used, overage, bonus, addon, updated_at)
             VALUES (${org}, ${customer.id}, ${ctx.featureId}, ${now}, ${null}, 0, 0, 0, 0, ${now}) ON CONFLICT DO NOTHING`
    const [row] = await tx`SELECT window_start, window_end, used, overage, bonus, addon FROM balances
             WHERE organization_id = ${org} AND customer_id = ${customer.id} AND subject_id = ${ctx.featureId} FOR UPDATE`
    await tx`UPDATE balances SET window_start = ${row.window_start}, window_end = ${row.window_end},
               used = ${String(BigInt(row.used) + BigInt(ctx.valueMicro))}, overage = ${row.overage}, bonus = ${row.bonus},
               addon = ${row.addon}, updated_at = ${now}, version = version + 1
             WHERE organization_id = ${org} AND customer_id = ${customer.id} AND subject_id = ${ctx.featureId}`
    await tx`INSERT INTO usage_rollups (organization_id, customer_id, feature_id, bucket_start, value, records)
             VALUES (${org}, ${customer.id}, ${ctx.featureId}, ${now - (now % ROLLUP_MS)}, ${ctx.valueMicro}, 1)
             ON CONFLICT (organization_id, customer_id, feature_id, bucket_start)
             DO UPDATE SET value = usage_rollups.value + excluded.value, records = usage_rollups.records + 1`
    await tx`INSERT INTO usage_events (organization_id, id, customer_id, feature_id, subject_id, entity_id, value, cost,
               from_plan, from_bonus, from_addon, overage, billable, plan_id, metadata, created_at)
             VALUES (${org}, ${eventId(now)}, ${customer.id}, ${ctx.featureId}, ${ctx.featureId}, ${null}, ${ctx.valueMicro},
               ${ctx.valueMicro}, ${ctx.valueMicro}, 0, 0, 0, 0, ${ctx.planId}, '{}', ${now})`
  })
}

/**
 * This version (the statements PostgreSQL logs for one allowed track of an existing customer, `log_statement = all`):
 * one read of everything the decision needs and one guarded write of the balance with its event and rollup, both
 * functions of migration 0014 (src/entitlements/hotStatements.ts). The service writes many draws in one such call when they arrive together; the
 * ceiling is one call per request, the database's own work for each request without that help. (The key lookup is cached by the service: one query per key every few seconds, left
 * out.) The parameters are the service's: the decision is made on the version the read returned, and a moved version
 * means reading and deciding again.
 */
const current: CeilingScript = async (db, ctx, customer) => {
  const org = ctx.organizationId
  const f = ctx.featureId
  const v = String(ctx.valueMicro)
  for (let attempt = 0; attempt < 100; attempt++) {
    const [read] = await db.unsafe("SELECT entitlement_reads($1) AS contexts", [
      JSON.stringify([
        { org, ref: customer.externalId, refLower: customer.externalId.toLowerCase(), feature: f, subjects: f }
      ])
    ])
    const balance = read.contexts[0].balances[0]
    const now = Date.now()
    const events = [
      {
        id: eventId(now),
        feature_id: f,
        entity_id: null,
        value: v,
        cost: v,
        from_plan: v,
        from_bonus: "0",
        from_addon: "0",
        overage: "0",
        billable: "0",
        plan_id: ctx.planId,
        metadata: "{}",
        created_at: now
      }
    ]
    const rollups = [{ feature_id: f, bucket_start: now - (now % ROLLUP_MS), value: v, records: 1 }]
    const items = JSON.stringify([
      {
        org,
        customer: customer.id,
        subject: f,
        expected: balance.version,
        windowStart: balance.windowStart,
        windowEnd: balance.windowEnd,
        used: String(BigInt(balance.used) + BigInt(ctx.valueMicro)),
        overage: balance.overage,
        bonus: balance.bonus,
        addon: balance.addon,
        now,
        events,
        rollups
      }
    ])
    const [written] = await db.unsafe("SELECT commit_balances($1::text::json) AS versions", [items])
    // A moved version (a concurrent writer of the same balance): the service reads again and decides again.
    if (written.versions[0] !== null) return
  }
  throw new Error("the balance kept changing")
}

export const ceilingScripts: Record<string, CeilingScript> = { v1, current }
