import { SqlClient } from "@effect/sql"
import { BigDecimal, Clock, Context, Effect, Layer, Option } from "effect"
import type { EntitlementCode, EntitlementState } from "../api/entitlements.ts"
import { Catalog } from "../catalog/Catalog.ts"
import { ambiguous, Customers, pickMatch } from "../customers/Customers.ts"
import { matchesOf } from "../customers/CustomersRepo.ts"
import { Conflict, customerNotFound, InvalidInput } from "../domain/errors.ts"
import { toDecimal } from "../domain/money.ts"
import { fitsMicro, FACTOR_BIGINT, fromMicro, toMicro } from "../domain/quantity.ts"
import { VALUE_MAX } from "../domain/bounds.ts"
import { Outbox } from "../events/Outbox.ts"
import { sha256Hex } from "../platform/crypto.ts"
import { Ids } from "../platform/ids.ts"
import { grantingOf } from "../subscriptions/Subscriptions.ts"
import { makeBalanceWriter } from "./BalanceWriter.ts"
import { EntitlementsRepo, type FeatureConfigRow, type StoredBalance } from "./EntitlementsRepo.ts"
import { creditsOnlyGrant, type Grant, resolveGrant } from "./grants.ts"
import {
  type EntitlementInput,
  invalid,
  isPastBound,
  makeMeter,
  type Meter,
  type Mode,
  overageTerms,
  type PastBound,
  pastBound,
  type Resolved
} from "./meter.ts"
import { countedState, denial, storedState } from "./state.ts"

const isMeter = (m: Meter | InvalidInput): m is Meter => !(m instanceof InvalidInput)

export type { EntitlementInput, Mode } from "./meter.ts"

export interface EntitlementsShape {
  readonly evaluate: (
    organizationId: string,
    mode: Mode,
    input: EntitlementInput,
    idempotencyKey?: string
  ) => Effect.Effect<EntitlementState, InvalidInput | Conflict>
}

export class Entitlements extends Context.Tag("Entitlements")<Entitlements, EntitlementsShape>() {}

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
                createdAt: input.timestamp ?? now
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
     * Consumable features and credit systems: draw from the balance (./meter.ts decides). A recording draw goes through
     * the balance writer (a guarded write, no lock held across round trips); with a spend cap (a second row to keep
     * exact) or inside an idempotent request's transaction, it takes the balance's row lock for the rest of the
     * transaction.
     */
    const metered = (resolved: Resolved, stored: Option.Option<StoredBalance>) =>
      Effect.gen(function* () {
        const { org, mode, customer, inTransaction, now } = resolved
        const meter = makeMeter(resolved, outbox)
        if (!isMeter(meter)) return yield* meter
        const settled = (answer: EntitlementState | PastBound) =>
          isPastBound(answer) ? pastBound(answer, meter.unit) : Effect.succeed(answer)
        if (mode === "check") return yield* settled(meter.check(Option.getOrNull(stored)))

        if (!meter.capped && !inTransaction) {
          const eventId = yield* ids.next("evt")
          const result = yield* writer.draw<EntitlementState | PastBound>(
            { organizationId: org, customerId: customer.id, subjectId: meter.subjectId },
            Option.getOrNull(stored),
            (current) => {
              const outcome = meter.over(current, "0", eventId)
              return { answer: outcome.answer, write: outcome.write }
            }
          )
          return yield* settled(result)
        }

        return yield* sql.withTransaction(
          Effect.gen(function* () {
            const row = yield* repo.lockBalance(org, customer.id, meter.subjectId, meter.init, now)
            const spent = meter.capped ? yield* repo.lockSpend(org, customer.id, meter.period, now) : "0"
            const outcome = meter.over(row, spent, yield* ids.next("evt"))
            // A block by the cap is reached too: its event commits with this transaction (nothing else does).
            yield* Effect.all(outcome.denialNotices, { discard: true })
            const write = outcome.write
            if (write !== null) {
              yield* repo.writeBalance(org, customer.id, meter.subjectId, write.next, now)
              yield* repo.insertEvent(write.event)
              if (write.spentAfter !== null && !BigDecimal.equals(toDecimal(write.spentAfter), toDecimal(spent))) {
                yield* repo.writeSpend(org, customer.id, meter.period, write.spentAfter, now)
              }
              yield* Effect.all(write.notices, { discard: true })
            }
            return yield* settled(outcome.answer)
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
