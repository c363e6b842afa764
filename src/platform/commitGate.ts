import { Context, Data, Effect, Exit } from "effect"

/**
 * The request timeout's say over a commit (decisions.md §12: a 503 means nothing changed). Work that commits for a
 * request passes its gate synchronously just before the commit is sent: `enter` is false once the request has been
 * answered 503 (the work must roll back instead), and after a `true` the deadline no longer answers 503: it waits
 * for the real answer, since the commit may land. `leave` when no commit happened after all (rolled back, or nothing
 * written): the deadline applies again, at once if it passed meanwhile.
 */
export interface CommitGate {
  readonly enter: () => boolean
  readonly leave: () => void
}

/** Work outside a request (workers, the CLI, tests without a server): no deadline. */
export const openGate: CommitGate = { enter: () => true, leave: () => {} }

export class RequestCommitGate extends Context.Reference<RequestCommitGate>()("RequestCommitGate", {
  defaultValue: (): CommitGate => openGate
}) {}

/**
 * Several requests' gates as one (batches merged into one transaction): entered only if every one enters, else none
 * stays entered.
 */
export const enterAll = (gates: ReadonlyArray<CommitGate>): boolean => {
  for (let i = 0; i < gates.length; i++) {
    if (!gates[i]!.enter()) {
      for (let j = 0; j < i; j++) gates[j]!.leave()
      return false
    }
  }
  return true
}

export const leaveAll = (gates: ReadonlyArray<CommitGate>): void => {
  for (const gate of gates) gate.leave()
}

/** The request was answered 503 before its commit could begin: its work rolled back (or wrote nothing). */
export class CommitExpired extends Data.TaggedError("CommitExpired")<{}> {}

/**
 * `commit` (true when it wrote) behind the gates: not sent once one of them has expired; the gates left again when it
 * wrote nothing or failed.
 */
export const gatedCommit = <E, R>(
  gates: ReadonlyArray<CommitGate>,
  commit: Effect.Effect<boolean, E, R>
): Effect.Effect<boolean, E | CommitExpired, R> =>
  Effect.suspend((): Effect.Effect<boolean, E | CommitExpired, R> =>
    enterAll(gates)
      ? Effect.onExit(commit, (exit) =>
          Effect.sync(() => {
            if (!(Exit.isSuccess(exit) && exit.value)) leaveAll(gates)
          })
        )
      : Effect.fail(new CommitExpired())
  )
