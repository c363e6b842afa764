import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Cause, Effect, Option } from "effect"
import { BillingApi } from "../api/Api.ts"
import { type ApiError, errorBody, type Issue } from "../api/errors.ts"
import { readableIssues } from "./issues.ts"
import { RequestId } from "./RequestId.ts"

const respond = (tag: ApiError["_tag"], status: number, code: string, message: string, details?: ReadonlyArray<Issue>) =>
  HttpServerResponse.unsafeJson(errorBody(tag, code, message, details), { status })

const isTagged = (u: unknown, tag: string): boolean =>
  typeof u === "object" && u !== null && (u as { _tag?: unknown })._tag === tag

/** Connection-level failures of either database: the request changed nothing, so 503, not 500. */
const isDatabaseUnavailable = (defect: unknown): boolean => {
  if (!isTagged(defect, "SqlError")) return false
  const text = String((defect as { cause?: { code?: unknown; message?: unknown } }).cause?.code ?? "") + " " +
    String((defect as { cause?: { message?: unknown } }).cause?.message ?? "") + " " +
    String((defect as { message?: unknown }).message ?? "")
  return /ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|57P0[123]|08\d\d\d|Connection terminated|timeout exceeded|connect|SQLITE_BUSY|database is locked/i
    .test(text)
}

/** A short description of a defect for the server log: never its stack, SQL text or bound values. */
const describeDefect = (defect: unknown) => {
  const tag = isTagged(defect, "SqlError") ? "SqlError" : defect instanceof Error ? defect.name : typeof defect
  const cause = (defect as { cause?: { code?: unknown } } | null)?.cause
  return { defect: tag, code: cause && typeof cause === "object" && "code" in cause ? String(cause.code) : undefined }
}

/**
 * Every failure leaves as the spec's error body. Typed endpoint errors pass through to HttpApi's own
 * encoder; what HttpApi would otherwise render its own way (validation, unknown routes, malformed JSON,
 * defects) is rendered here.
 */
export const ErrorMiddlewareLive = HttpApiBuilder.middleware(BillingApi, (app) =>
  (app as Effect.Effect<HttpServerResponse.HttpServerResponse, unknown, any>).pipe(
    Effect.catchAllCause((cause) => {
      const failure = Cause.failureOption(cause)
      if (Option.isSome(failure)) {
        const error = failure.value
        if (isTagged(error, "HttpApiDecodeError")) {
          const issues = readableIssues((error as { issues: ReadonlyArray<{ path: ReadonlyArray<PropertyKey>; message: string }> }).issues)
          const message = issues.length === 0
            ? "The request is invalid"
            : `The request is invalid: ${issues.map((i) => (i.path === "" ? i.message : `${i.path}: ${i.message}`)).join("; ")}`
          return Effect.succeed(respond("BadRequest", 400, "invalid_request", message, issues))
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
        if (isDatabaseUnavailable(value)) {
          return Effect.logWarning("database unavailable", describeDefect(value)).pipe(
            Effect.as(respond("Unavailable", 503, "unavailable", "The service is temporarily unavailable; nothing was changed"))
          )
        }
        return Effect.logError("unexpected failure", describeDefect(value)).pipe(
          Effect.as(respond("InternalError", 500, "internal_error", "An unexpected error occurred"))
        )
      }
      return Effect.failCause(cause)
    }),
    (self) =>
      Effect.flatMap(Effect.serviceOption(RequestId), (id) =>
        Option.isSome(id) ? Effect.annotateLogs(self, "requestId", id.value) : self)
  ) as never)
