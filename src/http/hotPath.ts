import { Effect, Either, Exit, type Fiber, Option, type ParseResult, Redacted, Schema } from "effect"
import { IdempotencyHeaders } from "../api/common.ts"
import { CheckRequest, EntitlementState, TrackRequest } from "../api/entitlements.ts"
import { errorBody, errorStatus } from "../api/errors.ts"
import { Authentication, type Organization } from "../api/security.ts"
import { Entitlements } from "../entitlements/Engine.ts"
import { AppConfig } from "../platform/config.ts"
import { defectAnswer, jsonTextProblem, MAX_JSON_DEPTH } from "./errorMiddleware.ts"
import { type RequestFiberSlot, TIMED_OUT_MESSAGE } from "./RequestFiber.ts"
import { json } from "./server.ts"
import { toApiError } from "./toApiError.ts"

/**
 * `POST /v1/check` and `POST /v1/track` in front of HttpApi (docs/decisions.md, "Performance"): HttpApi and its
 * middleware were about half of the CPU of every check and track. This path runs the same body checks, the same
 * `Authentication`, the same schemas and the same engine, in one fiber per request and nothing else.
 *
 * It answers only what it is sure to answer as HttpApi would: an authenticated, well-formed request, whatever the
 * engine then says (its answer, its refusal, a database failure). A request refused before the engine (a bad key,
 * malformed JSON, a payload the schema rejects) is left to HttpApi, which renders the refusal; so is every request
 * while a rate limit or trace export is configured, both being HttpApi middleware. test/hot-path-http.test.ts holds
 * the two paths to the same answers.
 */
export type HotRoute = "check" | "track"

export interface HotPath {
  readonly routeOf: (method: string, pathname: string) => HotRoute | undefined
  /** The answer, or undefined when HttpApi must answer (nothing has been done then). */
  readonly handle: (
    route: HotRoute,
    request: Request,
    text: string,
    requestId: string | undefined,
    slot: RequestFiberSlot | undefined
  ) => Promise<Response | undefined>
}

type RunFork = <A>(effect: Effect.Effect<A>) => Fiber.RuntimeFiber<A, unknown>

const BEARER = "Bearer ".length

const wireError = (tag: Parameters<typeof errorBody>[0], code: string, message: string) =>
  json(errorStatus[tag][0], errorBody(tag, code, message), {})

export const makeHotPath = (
  runFork: RunFork
): Effect.Effect<Option.Option<HotPath>, never, AppConfig | Authentication | Entitlements> =>
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (config.rateLimitRps > 0 || Option.isSome(config.otlpEndpoint)) return Option.none()
    const authentication = yield* Authentication
    const engine = yield* Entitlements
    const decodeHeaders = Schema.decodeUnknownEither(IdempotencyHeaders)
    const decode = { check: Schema.decodeUnknownEither(CheckRequest), track: Schema.decodeUnknownEither(TrackRequest) }
    const encode = Schema.encodeEither(EntitlementState)

    const program = (
      route: HotRoute,
      token: Redacted.Redacted,
      payload: CheckRequest | TrackRequest,
      idempotencyKey: string | undefined
    ) =>
      Effect.gen(function*() {
        // HttpApi offers a security handler the request's services; ours (src/http/Authentication.ts) uses none.
        const authenticate = authentication.bearerAuth(token) as unknown as Effect.Effect<Organization, unknown>
        const org = yield* Effect.either(authenticate)
        if (Either.isLeft(org)) return undefined
        const mode = route === "track" ? "track" : (payload as CheckRequest).sendEvent === true ? "check_send" : "check"
        const state = yield* Effect.either(
          engine.evaluate(org.right.id, mode, { ...payload, value: payload.value ?? 1 }, idempotencyKey)
        )
        if (Either.isLeft(state)) {
          const wire = toApiError(state.left)
          return json(errorStatus[wire._tag][0], errorBody(wire._tag, wire.code, wire.message, wire.details), {})
        }
        return Either.match(encode(state.right), {
          onLeft: () => wireError("InternalError", "internal_error", "An unexpected error occurred"),
          onRight: (body) => json(200, body, {})
        })
      }).pipe(
        // As the API middleware renders them.
        Effect.catchAllDefect((defect) => {
          const answer = defectAnswer(defect)
          return Effect.as(answer.log, wireError(answer.tag, answer.code, answer.message))
        })
      )

    const handle: HotPath["handle"] = (route, request, text, requestId, slot) => {
      if (jsonTextProblem(text, MAX_JSON_DEPTH) !== undefined) return Promise.resolve(undefined)
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        return Promise.resolve(undefined)
      }
      const payload: Either.Either<CheckRequest | TrackRequest, ParseResult.ParseError> = decode[route](body)
      const key = request.headers.get("idempotency-key")
      const headers = decodeHeaders(key === null ? {} : { "idempotency-key": key })
      if (Either.isLeft(payload) || Either.isLeft(headers)) return Promise.resolve(undefined)
      const token = Redacted.make((request.headers.get("authorization") ?? "").slice(BEARER))
      const run = program(route, token, payload.right, headers.right["idempotency-key"])
      const fiber = runFork(requestId === undefined ? run : Effect.annotateLogs(run, "requestId", requestId))
      if (slot !== undefined) slot.fiber = fiber
      return new Promise((resolve) =>
        fiber.addObserver((exit) =>
          // Never `undefined` once the engine may have run: that would hand the request to HttpApi to run again.
          resolve(
            Exit.isSuccess(exit)
              ? exit.value
              : Exit.isInterrupted(exit)
              // The request timeout: the server has answered already, this answer is never sent.
              ? wireError("Unavailable", "unavailable", TIMED_OUT_MESSAGE)
              : wireError("InternalError", "internal_error", "An unexpected error occurred")
          )
        )
      )
    }

    return Option.some({
      routeOf: (method, pathname) =>
        method !== "POST" ? undefined : pathname === "/v1/check" ? "check" : pathname === "/v1/track" ? "track" : undefined,
      handle
    })
  })
