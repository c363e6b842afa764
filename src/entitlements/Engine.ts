import { SqlClient } from "@effect/sql"
import { BigDecimal, Clock, Context, Effect, Layer, Option } from "effect"
import type { EntitlementCode, EntitlementState } from "../api/entitlements.ts"
import { Catalog } from "../catalog/Catalog.ts"
import type { Feature } from "../catalog/model.ts"
import { ambiguous, Customers, pickMatch } from "../customers/Customers.ts"
import { matchesOf } from "../customers/CustomersRepo.ts"
import { type Draw, draw } from "../domain/drawing.ts"
import { crossed } from "../domain/thresholds.ts"
import { Conflict, customerNotFound, InvalidInput } from "../domain/errors.ts"
import { format, toDecimal } from "../domain/money.ts"
import { currentWindow, type Window } from "../domain/periods.ts"
import { fitsMicro, FACTOR_BIGINT, fromMicro, toMicro } from "../domain/quantity.ts"
import { AMOUNT_MAX_MICRO, AMOUNT_MAX_TEXT, VALUE_MAX, WINDOW_MAX, WINDOW_MAX_MICRO } from "../domain/bounds.ts"
import { Outbox } from "../events/Outbox.ts"
import { sha256Hex } from "../platform/crypto.ts"
import { Ids } from "../platform/ids.ts"
import { grantingOf } from "../subscriptions/Subscriptions.ts"
import { makeBalanceWriter } from "./BalanceWriter.ts"
import {
  type BalanceRow,
  EntitlementsRepo,
  type FeatureConfigRow,
  type StoredBalance,
  type UsageEventRow
} from "./EntitlementsRepo.ts"
import { creditsOnlyGrant, type Grant, resolveGrant } from "./grants.ts"
import type { HotCustomer } from "./hotStatements.ts"
import { pricingOf } from "../catalog/pricing.ts"
import { countedState, denial, meteredState, storedState } from "./state.ts"

/** `check` asks; `check_send` and `track` also record what they allow, atomically with the decision. */
export type Mode = "check" | "check_send" | "track"

export interface EntitlementInput {
  readonly customer: string
  readonly feature: string
  readonly value: number
  readonly customerData?:
    | {
        readonly email?: string | undefined
        readonly name?: string | undefined
        readonly metadata?: Record<string, unknown> | undefined
      }
    | undefined
  readonly entity?: string | undefined
  readonly metadata?: Record<string, unknown> | undefined
}

export interface EntitlementsShape {
  readonly evaluate: (
    organizationId: string,
    mode: Mode,
    input: EntitlementInput,
    idempotencyKey?: string
  ) => Effect.Effect<EntitlementState, InvalidInput | Conflict>
}

export class Entitlements extends Context.Tag("Entitlements")<Entitlements, EntitlementsShape>() {}

/**
 * What `run` resolved a request to, and what `counted` and `metered` decide over: the request, the customer it names,
 * the feature, the grant that applies and the customer's override of its terms, the entity, the request's instant,
 * and whether it runs inside an idempotent request's transaction.
 */
interface Resolved {
  readonly org: string
  readonly mode: Mode
  readonly input: EntitlementInput
  readonly customer: HotCustomer
  readonly feature: Feature
  readonly grant: Grant
  readonly config: Option.Option<FeatureConfigRow>
  readonly entityId: string | null
  readonly now: number
  readonly inTransaction: boolean
}

const DAY_MS = 86_400_000
/**
 * Write batches in flight at once, and each idle lane waiting for the draws of the same turn of the event loop
 * (docs/decisions.md, "Performance"). One lane on both databases: SQLite has one connection; on PostgreSQL one lane
 * beat 2, 4 and 8 at peak and at half of it (fewer, bigger batches: fewer round trips and fewer busy backends on a
 * machine whose cores the service shares with the database).
 */
const WRITER = { lanes: 1, gather: true } as const

const canonical = (value: unknown): unknown =>
  Array.isArray(value)
    ? value.map(canonical)
    : value !== null && typeof value === "object"
      ? Object.fromEntries(
          Object.keys(value)
            .sort()
            .map((k) => [k, canonical((value as Record<string, unknown>)[k])])
        )
      : value

const monthStart = (now: number) => {
  const d = new Date(now)
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1)
}

/** A new reset window starts from zero; purchased and bonus credits carry over. */
const rolled = (row: BalanceRow, window: Window | null): BalanceRow =>
  window === null || row.windowStart === window.start
    ? row
    : { ...row, windowStart: window.start, windowEnd: window.end, used: 0n, overage: 0n }

const codeFor = (mode: Mode, d: Draw, credits: boolean): EntitlementCode => {
  if (!d.allowed) return credits ? "insufficient_credits" : "limit_exceeded"
  if (d.overageUnits > 0) return mode === "track" ? "tracked_overage" : "overage_allowed"
  if (d.fromBonus > 0 || d.fromAddon > 0) return "addon_credits_used"
  return mode === "track" ? "tracked" : "access_granted"
}

/** One field's problem as the 400 of a request names it (decisions.md §1: the field and its bound). */
const invalid = (path: string, problem: string) =>
  new InvalidInput({ message: `The request is invalid: ${path}: ${problem}`, issues: [{ path, message: problem }] })

/** A draw that would store a window's usage or overage past its bound: refused, nothing recorded. */
interface PastBound {
  readonly _tag: "PastBound"
  readonly counter: "usage" | "overage"
}
const isPastBound = (u: unknown): u is PastBound => (u as { _tag?: unknown })._tag === "PastBound"

const pastBound = (p: PastBound, unit: string) =>
  invalid(
    "value",
    `would bring the ${p.counter} of this reset window past ${WINDOW_MAX} ${unit} (the most one window counts); ` +
      "nothing was recorded"
  )

const messageFor = (d: Draw, grant: Grant, pastDue: boolean): string => {
  const unit = grant.subject.kind === "credit_system" ? "credits" : (grant.subject.feature.unit ?? "units")
  const base = !d.allowed
    ? d.reason === "overage_cap"
      ? d.cap === "spend_cap"
        ? "The customer's overage spend cap is reached"
        : "The overage limit for this feature is reached"
      : grant.subject.kind === "credit_system"
        ? "Not enough credits"
        : `The limit of ${grant.limit} ${unit} is reached`
    : d.overageUnits > 0
      ? `Beyond the included ${unit}: billed as overage${d.notify ? " (the spend cap is passed; the vendor is notified)" : ""}`
      : d.fromBonus > 0 || d.fromAddon > 0
        ? "Drawn from bonus or purchased credits"
        : "Within the plan's allowance"
  return pastDue ? `${base}. Payment is past due; access continues during the grace period` : base
}

export const EntitlementsLive = Layer.effect(
  Entitlements,
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const repo = yield* EntitlementsRepo
    const catalog = yield* Catalog
    const customers = yield* Customers
    const ids = yield* Ids
    const outbox = yield* Outbox
    const writer = makeBalanceWriter(repo, WRITER)

    /** The plan's overage terms, unless the customer has a per-feature override (which wins whole). */
    const overageTerms = (config: Option.Option<FeatureConfigRow>, grant: Grant) => {
      const terms = grant.terms
      const included = (terms?.usageModel ?? "included") === "included"
      return Option.match(config, {
        onNone: () => ({
          overageAllowed: included && terms?.overage === "charge",
          maxOverageUnits: terms?.maxOverageUnits ?? null
        }),
        onSome: (c) => ({
          overageAllowed: included && c.overage === "charge",
          maxOverageUnits: c.maxOverageUnits === null ? null : fromMicro(c.maxOverageUnits)
        })
      })
    }

    /** Boolean and non-consumable features: nothing to draw, a count to compare. */
    const counted = (resolved: Resolved) =>
      Effect.gen(function* () {
        const { org, mode, customer, feature, grant, config, entityId, input, now } = resolved
        const isBoolean = feature.type === "boolean"
        const count = isBoolean ? 0 : yield* repo.countEntities(org, customer.id, feature.id, now)
        const { maxOverageUnits, overageAllowed } = overageTerms(config, grant)
        // Exact, in micro-units: a count and a limit of up to 1e12 with six decimals are past a double's precision.
        const wanted = BigInt(count) * FACTOR_BIGINT + toMicro(input.value)
        const within = isBoolean || grant.limitMicro === null || wanted <= grant.limitMicro
        const overBy = grant.limitMicro === null ? 0n : wanted - grant.limitMicro
        const allowed =
          within ||
          (overageAllowed &&
            (maxOverageUnits === null || BigDecimal.lessThanOrEqualTo(fromMicro(overBy), toDecimal(maxOverageUnits))))
        const code: EntitlementCode = !allowed
          ? "limit_exceeded"
          : within
            ? mode === "track"
              ? "tracked"
              : "access_granted"
            : mode === "track"
              ? "tracked_overage"
              : "overage_allowed"
        if (allowed && mode !== "check") {
          const value = toMicro(input.value)
          // The event and its rollup bucket commit together.
          yield* sql
            .withTransaction(
              repo.insertEvent({
                organizationId: org,
                id: yield* ids.next("evt"),
                customerId: customer.id,
                featureId: feature.id,
                subjectId: feature.id,
                entityId,
                value,
                cost: 0n,
                fromPlan: 0n,
                fromBonus: 0n,
                fromAddon: 0n,
                overage: 0n,
                billable: 0n,
                planId: null,
                metadata: input.metadata ?? {},
                createdAt: now
              })
            )
            .pipe(Effect.orDie)
        }
        const message = isBoolean
          ? allowed
            ? "The plan includes this feature"
            : "Not included"
          : allowed
            ? `${count} in use${grant.limit === null ? "" : ` of ${grant.limit}`}`
            : `${count} of ${grant.limit} in use: ${input.value} more do not fit`
        return countedState({ allowed, code, message, grant, count })
      })

    /**
     * Consumable features and credit systems: draw from the balance. A recording draw goes through the balance
     * writer (a guarded write, no lock held across round trips); with a spend cap (a second row to keep exact) or
     * inside an idempotent request's transaction, it takes the balance's row lock for the rest of the transaction.
     */
    const metered = (resolved: Resolved, stored: Option.Option<StoredBalance>) =>
      Effect.gen(function* () {
        const { org, mode, customer, feature, grant, config, entityId, input, now, inTransaction } = resolved
        const subject = grant.subject
        const terms = grant.terms
        const usageModel = terms?.usageModel ?? "included"
        const { maxOverageUnits, overageAllowed } = overageTerms(config, grant)
        const costPerUnit = subject.kind === "credit_system" ? subject.costPerUnit : 1
        const cost = toMicro(BigDecimal.multiply(toDecimal(input.value), toDecimal(costPerUnit)))
        if (cost > AMOUNT_MAX_MICRO) {
          // value ≤ 9e9 and creditCost ≤ 1e12, but their product is a quantity of credits too (docs/decisions.md
          // "Numbers"): the most one request may cost is what one balance may hold.
          return yield* invalid(
            "value",
            `costs ${format(fromMicro(cost))} credits (value × creditCost ${costPerUnit}); one request may cost at most ` +
              `${AMOUNT_MAX_TEXT} credits`
          )
        }
        const window = currentWindow(grant.anchor, grant.reset, now)
        const init = { windowStart: window?.start ?? grant.anchor, windowEnd: window?.end ?? null }
        const limit = grant.limitMicro
        // Usage-based pricing bills every unit: the plan "allowance" is then only a cap when one is set.
        const pricing = terms === null ? null : pricingOf(terms)
        const unitPrice =
          pricing === null
            ? toDecimal(0)
            : BigDecimal.unsafeDivide(
                toDecimal(pricing.pricePerUnit ?? pricing.tiers?.[0]?.unitPrice ?? 0),
                toDecimal(pricing.billingUnits ?? 1)
              )
        const spendCap =
          overageAllowed && customer.overageMaxAmount !== null
            ? {
                max: toDecimal(customer.overageMaxAmount),
                onLimitReached: customer.overageOnLimit ?? ("block" as const)
              }
            : null
        const pastDue = grant.sources.some((s) => s.subscription.status === "past_due")

        const decide = (row: BalanceRow, spendSoFar: string) =>
          draw({
            requested: fromMicro(cost),
            planRemaining: limit === null ? null : fromMicro(limit - row.used),
            bonus: fromMicro(row.bonus),
            addon: fromMicro(row.addon),
            overage: {
              allowed: overageAllowed,
              maxOverageUnits,
              overageUsedUnits: fromMicro(row.overage),
              spendCap,
              spendSoFar: toDecimal(spendSoFar),
              pricePerOverageUnit: unitPrice
            }
          })

        const answer = (d: Draw, row: BalanceRow) =>
          meteredState({
            allowed: d.allowed,
            code: codeFor(mode, d, subject.kind === "credit_system"),
            message: messageFor(d, grant, pastDue),
            grant,
            row,
            window
          })

        // From the draw's exact parts: its numbers are the nearest doubles, short of a micro-unit past 2^53 of them.
        const drawn = (row: BalanceRow, d: Draw): BalanceRow => ({
          ...row,
          used: row.used + toMicro(d.exact.fromPlan),
          bonus: row.bonus - toMicro(d.exact.fromBonus),
          addon: row.addon - toMicro(d.exact.fromAddon),
          overage: row.overage + toMicro(d.exact.overageUnits)
        })
        /** Whether a balance after a draw holds a counter past its bound (what grew: usage or overage). */
        const beyond = (after: BalanceRow): PastBound | undefined =>
          after.used > WINDOW_MAX_MICRO
            ? { _tag: "PastBound", counter: "usage" }
            : after.overage > WINDOW_MAX_MICRO
              ? { _tag: "PastBound", counter: "overage" }
              : undefined

        /**
         * The usage alerts a draw from `before` to `after` causes (decisions.md §11): each level of the granted limit it
         * crosses, once per reset window (the dedupe key); written with the draw or not at all.
         */
        const thresholds = (before: BalanceRow, after: BalanceRow, state: EntitlementState) =>
          crossed(limit, before.used, after.used).map((level) =>
            outbox.emit(org, {
              type: "usage.threshold_reached",
              customerId: customer.id,
              dedupeKey: `usage.threshold_reached:${customer.id}:${subject.id}:${after.windowStart}:${level}`,
              data: {
                customer: customer.id,
                feature: feature.slug,
                ...(subject.kind === "credit_system" ? { creditSystem: subject.system.slug } : {}),
                threshold: level,
                usage: state.usage,
                limit: state.limit,
                balance: state.balance,
                resetsAt: state.resetsAt
              }
            })
          )

        /** The spend cap reached (decisions.md §11): once per customer and calendar month, whether it blocks or not. */
        const capReached = (period: number, spent: BigDecimal.BigDecimal) =>
          outbox.emit(org, {
            type: "overage.spend_cap_reached",
            customerId: customer.id,
            dedupeKey: `overage.spend_cap_reached:${customer.id}:${new Date(period).toISOString().slice(0, 7)}`,
            data: {
              customer: customer.id,
              maxOverageAmount: Number(customer.overageMaxAmount),
              spent: Number(format(spent)),
              onLimitReached: spendCap?.onLimitReached ?? "block"
            }
          })

        const empty: BalanceRow = { ...init, used: 0n, overage: 0n, bonus: 0n, addon: 0n }
        const unit = subject.kind === "credit_system" ? "credits" : (subject.feature.unit ?? "units")
        if (mode === "check") {
          const row = rolled(
            Option.getOrElse(stored as Option.Option<BalanceRow>, () => empty),
            window
          )
          // A read without the lock: the spend a concurrent request adds may not be visible; only writes must be exact.
          const d = decide(row, "0")
          // A check answers what the same track would: a draw the window could not count is refused alike.
          const refused = d.allowed ? beyond(drawn(row, d)) : undefined
          if (refused !== undefined) return yield* pastBound(refused, unit)
          return answer(d, row)
        }

        const event = (id: string, d: Draw): UsageEventRow => ({
          organizationId: org,
          id,
          customerId: customer.id,
          featureId: feature.id,
          subjectId: subject.id,
          entityId,
          value: toMicro(input.value),
          cost,
          fromPlan: toMicro(d.exact.fromPlan),
          fromBonus: toMicro(d.exact.fromBonus),
          fromAddon: toMicro(d.exact.fromAddon),
          overage: toMicro(d.exact.overageUnits),
          billable: usageModel === "usage_based" ? cost : toMicro(d.exact.overageUnits),
          planId: grant.sources[0]?.plan.id ?? null,
          metadata: input.metadata ?? {},
          createdAt: now
        })

        if (spendCap === null && !inTransaction) {
          const eventId = yield* ids.next("evt")
          const result = yield* writer.draw<EntitlementState | PastBound>(
            { organizationId: org, customerId: customer.id, subjectId: subject.id },
            Option.getOrNull(stored),
            (current) => {
              const row = rolled(current ?? empty, window)
              const d = decide(row, "0")
              if (!d.allowed) return { answer: answer(d, row), write: null }
              const after = drawn(row, d)
              const refused = beyond(after)
              if (refused !== undefined) return { answer: refused, write: null }
              const state = answer(d, after)
              return {
                answer: state,
                write: { next: after, event: event(eventId, d), notices: thresholds(row, after, state) }
              }
            }
          )
          return isPastBound(result) ? yield* pastBound(result, unit) : result
        }

        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const row = rolled(yield* repo.lockBalance(org, customer.id, subject.id, init, now), window)
            const period = monthStart(now)
            const spent = spendCap === null ? "0" : yield* repo.lockSpend(org, customer.id, period, now)
            const d = decide(row, spent)
            if (!d.allowed) {
              // A block by the cap is reached too: its event commits with this transaction (nothing else does).
              if (d.cap === "spend_cap") yield* capReached(period, toDecimal(spent))
              return answer(d, row)
            }
            const after = drawn(row, d)
            const refused = beyond(after)
            if (refused !== undefined) return yield* pastBound(refused, unit)
            yield* repo.writeBalance(org, customer.id, subject.id, after, now)
            yield* repo.insertEvent(event(yield* ids.next("evt"), d))
            const spentAfter = BigDecimal.sum(toDecimal(spent), d.overageCost)
            if (spendCap !== null && !BigDecimal.isZero(d.overageCost)) {
              yield* repo.writeSpend(org, customer.id, period, format(spentAfter), now)
            }
            if (d.notify) yield* capReached(period, spentAfter)
            const state = answer(d, after)
            yield* Effect.all(thresholds(row, after, state), { discard: true })
            return state
          })
        )
        // Database failures are defects; the refusals above are the request's 400.
      }).pipe(Effect.catchTag("SqlError", Effect.die))

    /**
     * One query reads what the decision needs (docs/decisions.md, "Performance"): the catalog version (a stale cached
     * catalog is reloaded and the read repeated), the customers the reference matches, their live subscriptions,
     * their config of the feature and their balances of it and of its credit systems.
     */
    const run = (org: string, mode: Mode, input: EntitlementInput, inTransaction: boolean, requestedAt: number) =>
      Effect.gen(function* () {
        let { snapshot, version } = yield* catalog.cached(org)
        let created = false
        while (true) {
          const feature = snapshot.features.get(input.feature) ?? snapshot.featuresById.get(input.feature)
          const subjects =
            feature === undefined
              ? []
              : [feature.id, ...(snapshot.creditSystemsByFeature.get(feature.slug) ?? []).map((s) => s.id)]
          const context = yield* repo.context(org, input.customer, feature?.id ?? null, subjects, inTransaction)
          if (context.catalogVersion !== version) {
            // Another sync (in any process) changed the catalog: decide over the current one.
            version = context.catalogVersion
            snapshot = yield* catalog.snapshotAt(org, version)
            continue
          }
          const picked = pickMatch(matchesOf(context.customers, input.customer))
          if (picked === "ambiguous") return denial("customer_ambiguous", ambiguous(input.customer).message)
          if (Option.isNone(picked)) {
            if (input.customerData === undefined || created) {
              return denial("customer_not_found", customerNotFound(input.customer).message)
            }
            const made = yield* Effect.either(
              customers.findOrCreate(org, { ...input.customerData, externalId: input.customer }, requestedAt)
            )
            if (made._tag === "Left") {
              return denial(
                "customer_not_found",
                `Customer '${input.customer}' could not be created: ${made.left.message}`
              )
            }
            // Created (with its autoEnable plans): read its subscriptions and balances like any customer's.
            created = true
            continue
          }
          const customer = picked.value
          // The request's instant: its one reading of the clock, unless the customer it found was created after that
          // reading (by a concurrent request, whose creation this one waited for or read). The request then happens at
          // the creation, so its event falls inside the window and the subscription the creation started.
          const now = Math.max(requestedAt, customer.createdAt)
          if (feature === undefined) return denial("feature_not_found", `No feature '${input.feature}'`)
          let entityId: string | null = null
          if (input.entity !== undefined) {
            const found = yield* repo.findEntity(org, customer.id, input.entity, now)
            if (Option.isNone(found)) return denial("entity_not_found", `The customer has no entity '${input.entity}'`)
            entityId = found.value
          }
          const balanceOf = (subjectId: string): Option.Option<StoredBalance> =>
            Option.fromNullable(context.balances.find((b) => b.customerId === customer.id && b.subjectId === subjectId))
          const config: Option.Option<FeatureConfigRow> = Option.fromNullable(
            context.configs.find((c) => c.customerId === customer.id)
          )
          const granting = grantingOf(
            context.subscriptions.filter((s) => s.customerId === customer.id),
            snapshot,
            now
          )
          const resolution = resolveGrant(snapshot, feature, granting, now)
          let grant: Grant | undefined = resolution._tag === "Granted" ? resolution.grant : undefined
          if (grant === undefined && feature.type === "metered" && feature.meterType === "consumable") {
            // No plan grants it, but purchased or bonus credits of one of its credit systems may.
            for (const system of snapshot.creditSystemsByFeature.get(feature.slug) ?? []) {
              const balance = balanceOf(system.id)
              if (Option.isSome(balance) && balance.value.bonus + balance.value.addon > 0n) {
                grant = creditsOnlyGrant(feature, system, now)
                break
              }
            }
          }
          if (grant === undefined) {
            const code = resolution._tag === "Denied" ? resolution.code : "feature_not_in_plan"
            return denial(
              code,
              code === "no_active_subscription"
                ? "The customer has no active subscription"
                : `No plan of the customer includes '${feature.slug}'`
            )
          }
          const resolved: Resolved = {
            org,
            mode,
            input,
            customer,
            feature,
            grant,
            config,
            entityId,
            now,
            inTransaction
          }
          if (feature.type === "boolean" || feature.meterType === "non_consumable") return yield* counted(resolved)
          return yield* metered(resolved, balanceOf(grant.subject.id))
        }
      })

    const evaluate = (org: string, mode: Mode, input: EntitlementInput, idempotencyKey?: string) =>
      Effect.gen(function* () {
        // The schema refuses these already (src/api/numbers.ts); kept for callers that do not decode one.
        if (!(input.value >= 0) || !fitsMicro(input.value)) {
          return yield* invalid("value", `must be 0 to ${VALUE_MAX} with at most 6 decimal places`)
        }
        // Read once: the customer a request creates, its subscriptions, the event, its rollup and the idempotency
        // record all carry this instant.
        const now = yield* Clock.currentTimeMillis
        if (idempotencyKey === undefined || mode === "check") return yield* run(org, mode, input, false, now)
        const requestHash = sha256Hex(JSON.stringify(canonical({ mode, input })))
        // The claim, the effects and the stored answer commit together: a retry sees all of them or none.
        return yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const claim = yield* repo.claimIdempotencyKey(org, idempotencyKey, requestHash, now, now - DAY_MS)
              if (claim._tag === "Existing") {
                if (claim.requestHash !== requestHash) {
                  return yield* new Conflict({
                    code: "idempotency_conflict",
                    message: "This Idempotency-Key was used with a different request"
                  })
                }
                if (claim.response !== null) return storedState(JSON.parse(claim.response) as EntitlementState)
              }
              const state = yield* run(org, mode, input, true, now)
              yield* repo.saveIdempotentResponse(org, idempotencyKey, JSON.stringify(state))
              return state
            })
          )
          .pipe(Effect.catchTag("SqlError", Effect.die))
      })

    return { evaluate }
  })
)
