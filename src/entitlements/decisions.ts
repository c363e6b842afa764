/**
 * A single check or track decided and recorded: a count for boolean and non-consumable features, a draw from the
 * balance otherwise (./meter.ts decides it, the balance writer or a locked transaction records it); with an
 * Idempotency-Key, the claim, the effects and the stored answer in one transaction. `counted` serves batches too.
 */
import { BigDecimal, Clock, Effect, Option } from "effect"
import type { EntitlementCode, EntitlementState } from "../api/entitlements.ts"
import type { Feature } from "../catalog/model.ts"
import { VALUE_MAX } from "../domain/bounds.ts"
import { type Conflict, InvalidInput } from "../domain/errors.ts"
import { toDecimal } from "../domain/money.ts"
import { FACTOR_BIGINT, fitsMicro, fromMicro, toMicro } from "../domain/quantity.ts"
import { sha256Hex } from "../platform/crypto.ts"
import type { EngineDeps } from "./engineDeps.ts"
import { canonical, DAY_MS, idempotencyConflict } from "./idempotency.ts"
import {
  type EntitlementInput,
  eventTime,
  invalid,
  isMeter,
  isPastBound,
  makeMeter,
  type Mode,
  overageTerms,
  type PastBound,
  pastBound,
  type Resolved
} from "./meter.ts"
import type { Reads } from "./reads.ts"
import type { StoredBalance } from "./records.ts"
import type { Resolution } from "./resolution.ts"
import { countedState, storedState } from "./state.ts"

/** Boolean and non-consumable features: a count to compare, no balance to draw from. */
export const isCount = (feature: Feature) => feature.type === "boolean" || feature.meterType === "non_consumable"

export const makeDecisions = ({ sql, repo, ids, outbox, writer }: EngineDeps, { resolve }: Reads) => {
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
              createdAt: resolved.at
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
  const metered = (
    resolved: Resolved,
    stored: Option.Option<StoredBalance>
  ): Effect.Effect<EntitlementState, InvalidInput> => {
    const { org, mode, customer, inTransaction, now } = resolved
    const meter = makeMeter(resolved, outbox)
    if (!isMeter(meter)) return Effect.fail(meter)
    const settled = (answer: EntitlementState | PastBound) =>
      isPastBound(answer) ? pastBound(answer, meter.unit) : Effect.succeed(answer)
    if (mode === "check") return settled(meter.check(Option.getOrNull(stored)))

    // The common case, every plain track and check with sendEvent: combinators (see `evaluate`).
    if (!meter.capped && !inTransaction) {
      return Effect.flatMap(ids.next("evt"), (eventId) =>
        Effect.flatMap(
          writer.draw<EntitlementState | PastBound>(
            { organizationId: org, customerId: customer.id, subjectId: meter.subjectId },
            Option.getOrNull(stored),
            (current) => {
              const outcome = meter.over(current, "0", eventId)
              return { answer: outcome.answer, write: outcome.write }
            }
          ),
          settled
        )
      )
    }

    return (
      sql
        .withTransaction(
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
        .pipe(Effect.catchTag("SqlError", Effect.die))
    )
  }

  /** A resolved request decided and recorded: a count for boolean and non-consumable features, a draw otherwise. */
  const decideResolved = (resolution: Resolution) =>
    resolution._tag === "Answered"
      ? Effect.succeed(resolution.state)
      : isCount(resolution.resolved.feature)
        ? counted(resolution.resolved)
        : metered(resolution.resolved, resolution.stored)

  // Every check and track: combinators around the generators of the rarer paths (docs/decisions.md, "Performance":
  // JavaScriptCore kept recompiling the per-request generator bodies).
  const evaluate = (
    org: string,
    mode: Mode,
    input: EntitlementInput,
    idempotencyKey?: string
  ): Effect.Effect<EntitlementState, InvalidInput | Conflict> => {
    // The schema refuses these already (src/api/numbers.ts); kept for callers that do not decode one.
    if (!(input.value >= 0) || !fitsMicro(input.value)) {
      return Effect.fail(invalid("value", `must be 0 to ${VALUE_MAX} with at most 6 decimal places`))
    }
    // Read once: the customer a request creates, its subscriptions, the event, its rollup and the idempotency
    // record all carry this instant.
    return Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const at = eventTime(mode, input.timestamp, now)
      if (at instanceof InvalidInput) return Effect.fail(at)
      const timestamp = input.timestamp === undefined ? undefined : at
      if (idempotencyKey === undefined || mode === "check") {
        return Effect.flatMap(resolve(org, mode, input, false, now, timestamp), decideResolved)
      }
      const requestHash = sha256Hex(JSON.stringify(canonical({ mode, input })))
      // The claim, the effects and the stored answer commit together: a retry sees all of them or none.
      return sql
        .withTransaction(
          Effect.gen(function* () {
            const claim = yield* repo.claimIdempotencyKey(org, idempotencyKey, requestHash, now, now - DAY_MS)
            if (claim._tag === "Existing") {
              if (claim.requestHash !== requestHash) return yield* idempotencyConflict()
              if (claim.response !== null) return storedState(JSON.parse(claim.response) as EntitlementState)
            }
            const state = yield* Effect.flatMap(resolve(org, mode, input, true, now, timestamp), decideResolved)
            yield* repo.saveIdempotentResponse(org, idempotencyKey, JSON.stringify(state))
            return state
          })
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))
    })
  }

  return { counted, evaluate }
}

export type Decisions = ReturnType<typeof makeDecisions>
