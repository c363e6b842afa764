import { Context, type Fiber } from "effect"

/**
 * Where the API middleware leaves the fiber that runs a request, so that the server can stop it at the request
 * timeout (src/http/server.ts) without a fiber of its own per request: one slot per request, filled once.
 */
export interface RequestFiberSlot {
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
}

export class RequestFiber extends Context.Tag("RequestFiber")<RequestFiber, RequestFiberSlot>() {}

/** The answer's message when the request timeout stopped a request. */
export const TIMED_OUT_MESSAGE = "The request did not finish in time and was stopped; nothing was changed"
