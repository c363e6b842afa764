import { Context, type Fiber } from "effect"

/**
 * Where the API middleware leaves the fiber that runs a request, so that the server can stop it at the request
 * timeout (src/http/server.ts) without a fiber of its own per request: one slot per request, filled once.
 */
export interface RequestFiberSlot {
  fiber: Fiber.RuntimeFiber<unknown, unknown> | undefined
}

export class RequestFiber extends Context.Tag("RequestFiber")<RequestFiber, RequestFiberSlot>() {}
