/**
 * Which write a prepared batch takes: guarded (./guardedBatch.ts: decided over what the service knows of its
 * balances, written only if each is still that state), else the locked transaction (./batchLocked.ts), which a guarded
 * batch over one of its balances then waits for.
 */
import { Effect, Option } from "effect"
import type { CommitExpired } from "../platform/commitGate.ts"
import type { makeTransactLocked } from "./batchLocked.ts"
import { type BatchResult, planDraws } from "./batchDraws.ts"
import type { EngineDeps } from "./engineDeps.ts"
import type { CreationRaced } from "./newCustomers.ts"
import { isGuarded, type PreparedBatch } from "./preparedBatch.ts"

export const makeTransact = ({ guardedBatches }: EngineDeps, transactLocked: ReturnType<typeof makeTransactLocked>) => {
  /**
   * A prepared batch (or several concurrent batches of one organization, concatenated: `mergeBatches`) decided and
   * recorded: guarded (src/entitlements/guardedBatch.ts) unless it needs the locked transaction.
   */
  const transact = (
    org: string,
    prepared: PreparedBatch
  ): Effect.Effect<ReadonlyArray<BatchResult>, CreationRaced | CommitExpired> =>
    Option.isNone(guardedBatches)
      ? transactLocked(org, prepared)
      : Effect.flatMap(
          isGuarded(prepared) ? guardedBatches.value.run(org, prepared) : Effect.succeedNone,
          Option.match({
            // Its balances, as the transaction will lock them: a guarded batch over one that fails its guard waits.
            onNone: () =>
              guardedBatches.value.writingOver(
                org,
                planDraws(prepared.resolutions, prepared.meters, [...prepared.decided], new Set()).balances.keys()
              )(transactLocked(org, prepared)),
            onSome: (results) => Effect.succeed(results)
          })
        )

  return transact
}
