import { HttpApiBuilder, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Option } from "effect"
import { BillingApi } from "../api/Api.ts"
import { type ApiError, errorBody, errorStatus, type Issue } from "../api/errors.ts"
import { invalidRequest } from "../boundary/issues.ts"
import { jsonTextProblem, MAX_JSON_DEPTH } from "../boundary/jsonText.ts"
import { describeDefect } from "../platform/defects.ts"
import { RequestFiber } from "./RequestFiber.ts"
import { RequestId } from "./RequestId.ts"

const respond = (
  tag: ApiError["_tag"],
  status: number,
  code: string,
  message: string,
  details?: ReadonlyArray<Issue>,
  headers?: Record<string, string>
) => HttpServerResponse.unsafeJson(errorBody(tag, code, message, details), { status, ...(headers ? { headers } : {}) })

const isTagged = (u: unknown, tag: string): boolean =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === tag

/**
 * Connection-level failures of either database: the request changed nothing (its transaction, if any, never
 * committed), so 503, not 500. PostgreSQL: refused/reset/timed-out connections, the pool's acquire timeout,
 * server shutdown (57P01–57P03), connection exceptions (08xxx), too many connections (53300).
 */
export const isDatabaseUnavailable = (defect: unknown): boolean => {
  if (!isTagged(defect, "SqlError")) return false
  const text =
    String((defect as { cause?: { code?: unknown; message?: unknown } }).cause?.code ?? "") +
    " " +
    String((defect as { cause?: { message?: unknown } }).cause?.message ?? "") +
    " " +
    String((defect as { message?: unknown }).message ?? "")
  return /ECONNREFUSED|ECONNRESET|ECONNABORTED|ETIMEDOUT|EPIPE|EHOSTUNREACH|ENETUNREACH|ENOTFOUND|57P0[123]|08\d\d\d|53300|Connection terminated|timeout exceeded|connect|SQLITE_BUSY|database is locked/i.test(
    text
  )
}

/**
 * How a defect is answered and logged, by this middleware and by src/http/hotPath.ts alike: a lost database is 503
 * (the request changed nothing), anything else 500; the log line says which defect, never its stack, SQL or values.
 */
export const defectAnswer = (defect: unknown) =>
  isDatabaseUnavailable(defect)
    ? {
        log: Effect.logWarning("database unavailable", describeDefect(defect)),
        tag: "Unavailable" as const,
        code: "unavailable",
        message: "The service is temporarily unavailable; nothing was changed"
      }
    : {
        log: Effect.logError("unexpected failure", describeDefect(defect)),
        tag: "InternalError" as const,
        code: "internal_error",
        message: "An unexpected error occurred"
      }

/**
 * The API-wide middleware, around routing, authentication and every handler (the per-key rate limit comes before
 * it, in the server's pipeline: src/app/App.ts):
 * - JSON bodies nested deeper than {@link MAX_JSON_DEPTH}, or with U+0000 or unpaired surrogates in strings: 400;
 * - the request's fiber is left in its {@link RequestFiber} slot, for the request timeout of src/http/server.ts;
 * - every failure leaves as the spec's error body. Typed endpoint errors pass through to HttpApi's own
 *   encoder; what HttpApi would otherwise render its own way (validation, unknown routes, malformed JSON,
 *   defects) is rendered here.
 */
export const ErrorMiddlewareLive = HttpApiBuilder.middleware(
  BillingApi,
  Effect.gen(function* () {
    const guarded = (app: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>) =>
      Effect.gen(function* () {
        const slot = yield* Effect.serviceOption(RequestFiber)
        if (Option.isSome(slot))
          yield* Effect.withFiberRuntime((fiber) => Effect.sync(() => (slot.value.fiber = fiber)))
        const request = yield* HttpServerRequest.HttpServerRequest
        if (request.method === "POST" && request.url.startsWith("/v1/")) {
          // The text is cached: the payload decoder parses this same string, it is not read twice.
          const text = yield* Effect.orDie(request.text)
          const problem = jsonTextProblem(text, MAX_JSON_DEPTH)
          if (problem !== undefined) return respond("BadRequest", 400, "invalid_request", problem)
        }
        return yield* app
      })

    return (app: Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>) =>
      guarded(app).pipe(
        Effect.catchAllCause((cause) => {
          const failure = Cause.failureOption(cause)
          if (Option.isSome(failure)) {
            const error = failure.value
            if (isTagged(error, "HttpApiDecodeError")) {
              const { message, details } = invalidRequest(
                (error as { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> }).issues
              )
              return Effect.succeed(respond("BadRequest", 400, "invalid_request", message, details))
            }
            if (isTagged(error, "RouteNotFound")) {
              return Effect.succeed(respond("NotFound", 404, "not_found", "No such route"))
            }
            return Effect.failCause(cause)
          }
          const defect = Cause.dieOption(cause)
          if (Option.isSome(defect)) {
            const value = defect.value
            if (isTagged(value, "RequestError") && (value as { reason?: string }).reason === "Decode") {
              return Effect.succeed(respond("BadRequest", 400, "invalid_request", "The request body is not valid JSON"))
            }
            const answer = defectAnswer(value)
            return Effect.as(answer.log, respond(answer.tag, errorStatus[answer.tag][0], answer.code, answer.message))
          }
          return Effect.failCause(cause)
        }),
        (self) =>
          Effect.flatMap(Effect.serviceOption(RequestId), (id) =>
            Option.isSome(id) ? Effect.annotateLogs(self, "requestId", id.value) : self
          )
      ) as never
  })
)
