import { describe, expect, test } from "bun:test"
import { Either, Schema } from "effect"
import fc from "fast-check"
import { fastContext } from "../src/entitlements/hotDecode.ts"
import { EntitlementContext } from "../src/entitlements/hotStatements.ts"

/**
 * The hot read's fast decoder (src/entitlements/hotDecode.ts) against the schema it stands in for: on rows the
 * statements give and on rows they must never give, the same value or a refusal by both.
 */
const bySchema = Schema.decodeUnknownEither(EntitlementContext)

const text = fc.string({ maxLength: 12 })
const instant = fc.integer({ min: 0, max: 2 ** 45 })
const stored = fc.oneof(
  fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }).map(String),
  fc.integer(),
  fc.constantFrom("1e+30", "-5", "12.5", " 7 ", "", "x", "99999999999999999999")
)
const customer = fc.record({
  id: text,
  externalId: fc.option(text, { nil: null }),
  email: fc.option(text, { nil: null }),
  overageMaxAmount: fc.option(fc.oneof(fc.constantFrom("100", "0.5", "1e+100", "-3"), fc.integer()), { nil: null }),
  overageOnLimit: fc.constantFrom(null, "block", "notify"),
  createdAt: instant
})
const subscription = fc.record({
  organizationId: text,
  id: text,
  customerId: text,
  planId: text,
  status: fc.constantFrom("pending", "trialing", "active", "past_due", "canceled", "expired"),
  startedAt: instant,
  currentPeriodStart: instant,
  currentPeriodEnd: fc.option(instant, { nil: null }),
  trialEndsAt: fc.option(instant, { nil: null }),
  cancelAtPeriodEnd: fc.constantFrom(0, 1),
  canceledAt: fc.option(instant, { nil: null }),
  graceEndsAt: fc.option(instant, { nil: null }),
  scheduledPlanId: fc.option(text, { nil: null }),
  scheduledAt: fc.option(instant, { nil: null }),
  createdAt: instant,
  updatedAt: instant
})
const config = fc.record({
  customerId: text,
  overage: fc.constantFrom("block", "charge"),
  maxOverageUnits: fc.option(stored, { nil: null })
})
const balance = fc.record({
  customerId: text,
  subjectId: text,
  windowStart: instant,
  windowEnd: fc.option(instant, { nil: null }),
  used: stored,
  overage: stored,
  bonus: stored,
  addon: stored,
  version: instant
})
const context = fc.record({
  catalogVersion: instant,
  customers: fc.array(customer, { maxLength: 3 }),
  subscriptions: fc.array(subscription, { maxLength: 3 }),
  configs: fc.array(config, { maxLength: 2 }),
  balances: fc.array(balance, { maxLength: 3 })
})

/** One field somewhere replaced by a value of another kind, or removed: what a drifted statement could give. */
const broken = fc
  .tuple(context, fc.nat(), fc.constantFrom(undefined, null, "x", 7, true, [], {}, "unknown-status"))
  .map(([c, pick, value]) => {
    const json = JSON.parse(JSON.stringify(c)) as Record<string, any>
    const slots: Array<[Record<string, any>, string]> = [[json, "catalogVersion"]]
    for (const part of ["customers", "subscriptions", "configs", "balances"]) {
      slots.push([json, part])
      for (const row of json[part]) for (const key of Object.keys(row)) slots.push([row, key])
    }
    const [target, key] = slots[pick % slots.length]!
    if (value === undefined) delete target[key]
    else target[key] = value
    return json
  })

const agree = (u: unknown) => {
  const schema = bySchema(u)
  const fast = fastContext(u)
  if (Either.isLeft(schema)) expect(fast).toBeUndefined()
  else expect(fast).toEqual(schema.right)
}

describe("the hot read's fast decoder", () => {
  test("decodes what the statements give exactly as the schema does", () => {
    fc.assert(fc.property(context, agree), { numRuns: 500 })
  })

  test("refuses what the schema refuses (a missing field, a value of another kind, an unknown status)", () => {
    fc.assert(fc.property(broken, agree), { numRuns: 1000 })
  })

  test("extra keys are ignored by both, as a newer statement's would be", () => {
    const c = fc.sample(context, 1)[0]!
    agree({ ...c, extra: 1, customers: c.customers.map((x) => ({ ...x, name: "n" })) })
  })
})
