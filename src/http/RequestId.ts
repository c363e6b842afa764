import { Context } from "effect"

/** The id of the request being served: echoed in `x-request-id` and on every log line it causes. */
export class RequestId extends Context.Tag("RequestId")<RequestId, string>() {}
