/**
 * A prepared batch decided and recorded in one transaction that holds its balances' row locks: the batches a guarded
 * write does not take (./batchCommit.ts). Its new customers written first, its keys claimed in key order, its balances
 * and then its spends locked in one order, its counts and draws decided, everything written in one commit.
 */
import { BigDecimal, Effect, Either, Exit, Option } from "effect"
import type { EntitlementState } from "../api/entitlements.ts"
import { toDecimal } from "../domain/money.ts"
import { CommitExpired, enterAll, leaveAll } from "../platform/commitGate.ts"
import { retryDeadlocks } from "../platform/db/deadlocks.ts"
import { decideDraws, planDraws } from "./batchDraws.ts"
import type { Decisions } from "./decisions.ts"
import type { EngineDeps } from "./engineDeps.ts"
import { DAY_MS, idempotencyConflict } from "./idempotency.ts"
import { writeNewCustomers } from "./newCustomers.ts"
import type { PreparedBatch } from "./preparedBatch.ts"
import type { StoredBalance } from "./records.ts"
import type { Resolution } from "./resolution.ts"
import { storedState } from "./state.ts"

export const makeTransactLocked = ({ sql, repo, writers, guardedBatches }: EngineDeps, { counted }: Decisions) => {
  /**
   * A prepared batch decided and recorded in one transaction that holds its balances' row locks. PostgreSQL may
   * still roll it back to break a deadlock (with a writer's step, whose row order is its statement's): all of it
   * undone, it runs again.
   */
  const transactLocked = (org: string, prepared: PreparedBatch) =>
    Effect.suspend(() => {
      const { items, hashes, resolutions, now } = prepared
      const decided = prepared.decided
      return retryDeadlocks(
        sql.withTransaction(
          Effect.gen(function* () {
            // The customers it creates first: everything else of the batch may be about them.
            yield* writeNewCustomers(writers, org, prepared.created)
            // Each attempt starts from what was decided before the transaction.
            const results = [...decided]
            // Keys first, in key order (two batches never wait on each other's keys in a cycle). A key's request is
            // the one stored, or else its first item's (which claims it); an item with another body is a conflict,
            // and the first with that body answers for every later one. Items of several batches merged into one
            // transaction are thus answered as if the batches had run one after the other.
            const itemsOfKey = new Map<string, Array<number>>()
            for (const [i, item] of items.entries()) {
              const key = item.idempotencyKey
              if (key === undefined || results[i] !== undefined) continue
              const of = itemsOfKey.get(key)
              if (of === undefined) itemsOfKey.set(key, [i])
              else of.push(i)
            }
            const claimed = new Set<number>()
            const repeats: Array<[number, number]> = []
            const claims = yield* repo.claimIdempotencyKeys(
              org,
              [...itemsOfKey].map(([key, [first]]) => ({ key, requestHash: hashes[first!]! })),
              now,
              now - DAY_MS
            )
            for (const [key, of] of itemsOfKey) {
              const claim = claims.get(key)!
              const request = claim._tag === "Existing" ? claim.requestHash : hashes[of[0]!]
              let leader: number | undefined
              for (const i of of) {
                if (hashes[i] !== request) results[i] = Either.left(idempotencyConflict())
                else if (leader !== undefined) repeats.push([i, leader])
                else {
                  leader = i
                  if (claim._tag === "Existing" && claim.response !== null)
                    results[i] = Either.right(storedState(JSON.parse(claim.response) as EntitlementState))
                  else claimed.add(i)
                }
              }
            }
            for (const [i, first] of repeats) if (results[first] !== undefined) results[i] = results[first]
            const repeated = new Set(repeats.map(([i]) => i))

            // Every balance a draw of the batch touches, locked (created first where missing) in one step.
            const { meters, balances } = planDraws(resolutions, prepared.meters, results, repeated)
            const locked = yield* repo.lockBalances(org, [...balances.values()], now)
            const state = new Map<string, StoredBalance>()
            for (const b of locked) state.set(`${b.customerId}\u0000${b.subjectId}`, b)
            const lockedVersion = new Map([...state].map(([k, b]) => [k, b.version]))
            // The month's spend of every capped customer, locked after the balances and in customer order (as the
            // locked path of a single track: balance, then spend).
            const spent = new Map<string, string>()
            const spentBefore = new Map<string, { period: number; spent: string }>()
            const capped = new Map<string, number>()
            for (const [i, meter] of meters) {
              const resolution = resolutions[i]
              if (meter.capped && resolution?._tag === "Resolved") {
                capped.set(resolution.resolved.customer.id, meter.period)
              }
            }
            for (const customerId of [...capped.keys()].sort()) {
              const period = capped.get(customerId)!
              const locked = yield* repo.lockSpend(org, customerId, period, now)
              spent.set(customerId, locked)
              spentBefore.set(customerId, { period, spent: locked })
            }
            // Counts (boolean, non-consumable): their events, in this transaction.
            for (let i = 0; i < items.length; i++) {
              if (results[i] !== undefined || repeated.has(i) || meters.has(i)) continue
              const resolution = resolutions[i]
              if (resolution === undefined || resolution._tag !== "Resolved") continue
              results[i] = yield* Effect.either(counted({ ...resolution.resolved, inTransaction: true }))
            }
            const { events, notices, denialNotices } = decideDraws({
              meters,
              customerOf: (i) => (resolutions[i] as Extract<Resolution, { _tag: "Resolved" }>).resolved.customer.id,
              eventIds: prepared.eventIds,
              state,
              spent,
              results
            })

            // One write of every balance drawn, with its events, rollups and alerts (guards hold: rows locked).
            const commits = [...events.keys()].map((key) => {
              const b = balances.get(key)!
              const next = state.get(key)!
              return {
                organizationId: org,
                customerId: b.customerId,
                subjectId: b.subjectId,
                expectedVersion: lockedVersion.get(key) ?? null,
                next,
                events: events.get(key)!,
                notices: notices.get(key) ?? [],
                now
              }
            })
            if (commits.length > 0) {
              const written = yield* repo.commitBalances(commits, true)
              if (written.some(Option.isNone)) return yield* Effect.dieMessage("A locked balance moved in a batch")
            }
            for (const [customerId, before] of spentBefore) {
              const after = spent.get(customerId)!
              if (!BigDecimal.equals(toDecimal(after), toDecimal(before.spent))) {
                yield* repo.writeSpend(org, customerId, before.period, after, now)
              }
            }
            yield* Effect.all(denialNotices, { discard: true })
            yield* repo.saveIdempotentResponses(
              org,
              [...claimed].flatMap((i) => {
                const result = results[i]
                return result !== undefined && Either.isRight(result)
                  ? [{ key: items[i]!.idempotencyKey!, response: JSON.stringify(result.right) }]
                  : []
              })
            )
            for (const [i, first] of repeats) results[i] ??= results[first]
            // Every balance locked, as this transaction leaves it (a balance written moved one version).
            const left = [...state].map(([key, b]) => {
              const { customerId, subjectId } = balances.get(key)!
              const version = lockedVersion.get(key)!
              return { ...b, customerId, subjectId, version: events.has(key) ? version + 1 : version }
            })
            // Last, just before the commit: no commit once a request of the batch has been answered 503.
            if (!enterAll(prepared.gates)) return yield* new CommitExpired()
            return { results: results.map((r) => r!), left }
          })
        )
      ).pipe(
        Effect.catchTag("SqlError", Effect.die),
        Effect.onExit((exit) => (Exit.isFailure(exit) ? Effect.sync(() => leaveAll(prepared.gates)) : Effect.void)),
        Effect.flatMap(({ results, left }) =>
          Option.isSome(guardedBatches)
            ? Effect.as(guardedBatches.value.learn(org, left), results)
            : Effect.succeed(results)
        )
      )
    })

  return transactLocked
}
