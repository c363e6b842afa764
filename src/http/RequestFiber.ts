import { Context, type Fiber } from "effect"
import type { CommitGate } from "../platform/commitGate.ts"

/**
 * Where the API middleware leaves the fiber that runs a request, so that the server can stop it at the request
 * timeout (src/http/server.ts) without a fiber of its own per request: one slot per request, filled once.
 */
export interface RequestFiberSlot {
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
  /**
   * The request's commit gate (src/platform/commitGate.ts): `committing` while a commit for it may be landing (the
   * deadline then waits for the answer), `expired` once the deadline has answered 503 (no commit may begin).
   */
  phase?: "open" | "committing" | "expired"
  /** Set by the deadline when it passed while committing: what it would have done, run if the commit did not happen. */
  overdue?: (() => void) | undefined
}

export class RequestFiber extends Context.Tag("RequestFiber")<RequestFiber, RequestFiberSlot>() {}

/** The answer's message when the request timeout stopped a request. */
export const TIMED_OUT_MESSAGE = "The request did not finish in time and was stopped; nothing was changed"

/** The slot's commit gate: the work that commits for the request and its deadline take turns through it. */
export const commitGateOf = (slot: RequestFiberSlot): CommitGate => ({
  enter: () => {
    if (slot.phase === "expired") return false
    slot.phase = "committing"
    return true
  },
  leave: () => {
    if (slot.phase !== "committing") return
    slot.phase = "open"
    const overdue = slot.overdue
    slot.overdue = undefined
    overdue?.()
  }
})
