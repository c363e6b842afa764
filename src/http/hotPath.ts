import { Headers, type HttpApiEndpoint, HttpTraceContext } from "@effect/platform"
import { Effect, Either, Exit, type Fiber, Option, Schema } from "effect"
import { BillingApi } from "../api/Api.ts"
import type { CheckRequest, EntitlementState, TrackBatchRequest, TrackRequest } from "../api/entitlements.ts"
import { errorBody, errorStatus } from "../api/errors.ts"
import { answerBatch } from "../entitlements/batchAnswer.ts"
import { Entitlements } from "../entitlements/Engine.ts"
import { AppConfig } from "../platform/config.ts"
import { sampledRootContext, sampleRoot } from "../platform/tracing.ts"
import { Authenticator } from "../organizations/Authenticator.ts"
import { jsonTextProblem, MAX_JSON_DEPTH } from "../boundary/jsonText.ts"
import { defectAnswer } from "./errorMiddleware.ts"
import { RequestCommitGate } from "../platform/commitGate.ts"
import { commitGateOf, type RequestFiberSlot, TIMED_OUT_MESSAGE } from "./RequestFiber.ts"
import { json } from "./server.ts"
import { toApiError } from "../boundary/toApiError.ts"
import { fastBatchRequest } from "./batchDecode.ts"
import { bearerCredential } from "./bearer.ts"

/**
 * `check`, `track` and `track/batch` as direct endpoints, derived from their HttpApi definition (docs/decisions.md,
 * "Performance"): HttpApi's router and middleware were about half of the CPU of every check and track. The route,
 * the payload and header schemas and the success schema are the endpoints' own (`BillingApi`), the authentication is
 * the service's one `Authenticator`, the engine is the one every entry uses, and errors leave with the statuses of
 * `src/api/errors.ts`. The server's gates (request id, size, rate limit, timeout, access log) come before it as
 * before every route, and it opens the same `http.server` span as HttpApi when traces are exported. A batch's body is
 * decoded by ./batchDecode.ts where it can be (the schema's answer at a fraction of its cost per item), else by the
 * schema.
 *
 * It answers only what it is sure to answer as HttpApi would: an authenticated, well-formed request, whatever the
 * engine then says. A request refused before the engine (a bad key, malformed JSON, a payload the schema rejects) is
 * left to HttpApi, which renders the refusal. test/hot-path-http.test.ts holds the two to the same answers.
 */
export type HotRoute = "check" | "track" | "trackBatch"

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

const wireError = (tag: Parameters<typeof errorBody>[0], code: string, message: string) =>
  json(errorStatus[tag][0], errorBody(tag, code, message), {})

/** The endpoint of the HttpApi definition this path serves, and the schemas it declares. */
const endpointOf = (name: HotRoute) => {
  const groups = BillingApi.groups as unknown as Readonly<
    Record<string, { readonly endpoints: Readonly<Record<string, HttpApiEndpoint.HttpApiEndpoint.AnyWithProps>> }>
  >
  const endpoint = groups["entitlements"]?.endpoints[name]
  if (endpoint === undefined || endpoint.method !== "POST") throw new Error(`the API defines no POST ${name} endpoint`)
  return {
    path: endpoint.path as string,
    payload: Schema.decodeUnknownEither(
      Option.getOrThrow(endpoint.payloadSchema) as unknown as Schema.Schema<
        CheckRequest | TrackRequest | TrackBatchRequest,
        unknown
      >
    ),
    headers: Schema.decodeUnknownEither(
      Option.getOrElse(endpoint.headersSchema, () => Schema.Struct({})) as unknown as Schema.Schema<
        { readonly "idempotency-key"?: string },
        unknown
      >
    ),
    success: Schema.encodeEither(endpoint.successSchema as unknown as Schema.Schema<EntitlementState, unknown>)
  }
}

export const makeHotPath = (
  runFork: RunFork
): Effect.Effect<HotPath, never, AppConfig | Authenticator | Entitlements> =>
  Effect.gen(function* () {
    const config = yield* AppConfig
    const { authenticate } = yield* Authenticator
    const engine = yield* Entitlements
    const endpoints = { check: endpointOf("check"), track: endpointOf("track"), trackBatch: endpointOf("trackBatch") }
    const traced = Option.isSome(config.otlpEndpoint)

    /**
     * A batch's answer is its items' states and refusals as the engine made them, sent without the success schema's
     * encoding: that schema transforms nothing (test/hot-path-http.test.ts compares the bytes with HttpApi's, which
     * encodes), and checking 1,000 answers against it cost ~4–6 µs an item.
     */
    const batch = (org: string, payload: TrackBatchRequest) =>
      Effect.map(
        answerBatch(payload, (items) => engine.evaluateBatch(org, items)),
        (answer): Response | undefined => json(200, answer, {})
      )

    const single = (
      route: "check" | "track",
      org: string,
      payload: CheckRequest | TrackRequest,
      idempotencyKey: string | undefined
    ) => {
      const mode = route === "track" ? "track" : (payload as CheckRequest).sendEvent === true ? "check_send" : "check"
      return Effect.match(engine.evaluate(org, mode, { ...payload, value: payload.value ?? 1 }, idempotencyKey), {
        onFailure: (error): Response | undefined => {
          const wire = toApiError(error)
          return json(errorStatus[wire._tag][0], errorBody(wire._tag, wire.code, wire.message, wire.details), {})
        },
        onSuccess: (state) =>
          Either.match(endpoints[route].success(state), {
            onLeft: () => wireError("InternalError", "internal_error", "An unexpected error occurred"),
            onRight: (body) => json(200, body, {})
          })
      })
    }

    const program = (
      route: HotRoute,
      key: string,
      payload: CheckRequest | TrackRequest | TrackBatchRequest,
      idempotencyKey: string | undefined
    ) =>
      // Combinators, not a generator: JavaScriptCore kept recompiling per-request generator bodies
      // (docs/decisions.md, "Performance").
      Effect.matchEffect(authenticate(key), {
        onFailure: () => Effect.succeed(undefined),
        onSuccess: (org) =>
          route === "trackBatch"
            ? batch(org.id, payload as TrackBatchRequest)
            : single(route, org.id, payload as CheckRequest | TrackRequest, idempotencyKey)
      }).pipe(
        // As the API middleware renders them.
        Effect.catchAllDefect((defect) => {
          const answer = defectAnswer(defect)
          return Effect.as(answer.log, wireError(answer.tag, answer.code, answer.message))
        })
      )

    /** HttpApi's request span (HttpMiddleware.tracer): the same name, parent and attributes. */
    const withServerSpan = (
      run: Effect.Effect<Response | undefined>,
      request: Request,
      pathname: string,
      sampledRoot: boolean
    ) =>
      Effect.useSpan(
        `http.server ${request.method}`,
        {
          parent: sampledRoot
            ? undefined
            : Option.getOrUndefined(HttpTraceContext.fromHeaders(Headers.fromInput(request.headers))),
          kind: "server",
          captureStackTrace: false,
          ...(sampledRoot ? { context: sampledRootContext } : {})
        },
        (span) => {
          span.attribute("http.request.method", request.method)
          span.attribute("url.path", pathname)
          return Effect.tap(Effect.withParentSpan(run, span), (response) =>
            Effect.sync(() => {
              if (response !== undefined) span.attribute("http.response.status_code", response.status)
            })
          )
        }
      )

    const handle: HotPath["handle"] = (route, request, text, requestId, slot) => {
      if (jsonTextProblem(text, MAX_JSON_DEPTH) !== undefined) return Promise.resolve(undefined)
      let body: unknown
      try {
        body = JSON.parse(text)
      } catch {
        return Promise.resolve(undefined)
      }
      const endpoint = endpoints[route]
      const fast = route === "trackBatch" ? fastBatchRequest(body) : undefined
      const payload = fast === undefined ? endpoint.payload(body) : Either.right(fast)
      const key = request.headers.get("idempotency-key")
      const headers = endpoint.headers(key === null ? {} : { "idempotency-key": key })
      if (Either.isLeft(payload) || Either.isLeft(headers)) return Promise.resolve(undefined)
      // A header HttpApi's security would refuse is left to it, which says why.
      const bearer = bearerCredential(request.headers.get("authorization"))
      if (bearer === undefined) return Promise.resolve(undefined)
      let run = program(route, bearer, payload.right, headers.right["idempotency-key"])
      if (traced) {
        // A root that is not sampled runs without spans (its children would not be sampled either); a sampled root
        // and a caller's trace (`traceparent`) get HttpApi's server span.
        const parent = request.headers.get("traceparent")
        if (parent === null && !sampleRoot(config.traceSampleRatio)) run = Effect.withTracerEnabled(run, false)
        else run = withServerSpan(run, request, endpoint.path, parent === null)
      }
      if (slot !== undefined) run = Effect.provideService(run, RequestCommitGate, commitGateOf(slot))
      const fiber = runFork(requestId === undefined ? run : Effect.annotateLogs(run, "requestId", requestId))
      if (slot !== undefined) slot.fiber = fiber
      return new Promise((resolve) =>
        fiber.addObserver((exit) =>
          // Never `undefined` once the engine may have run: that would hand the request to HttpApi to run again.
          resolve(
            Exit.isSuccess(exit)
              ? exit.value
              : Exit.isInterrupted(exit)
                ? // The request timeout: the server has answered already, this answer is never sent.
                  wireError("Unavailable", "unavailable", TIMED_OUT_MESSAGE)
                : wireError("InternalError", "internal_error", "An unexpected error occurred")
          )
        )
      )
    }

    return {
      routeOf: (method, pathname) =>
        method !== "POST"
          ? undefined
          : pathname === endpoints.check.path
            ? "check"
            : pathname === endpoints.track.path
              ? "track"
              : pathname === endpoints.trackBatch.path
                ? "trackBatch"
                : undefined,
      handle
    }
  })
