import {
  type HttpApi,
  HttpApiBuilder,
  HttpApiError,
  HttpApiSchema,
  HttpApiSecurity,
  HttpApp,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { type Context, Effect, Option, ParseResult, type Runtime, Schema } from "effect"
import { BillingApi } from "../api/Api.ts"
import { Authentication, CurrentOrganization } from "../api/security.ts"
import { Entitlements } from "../entitlements/Engine.ts"
import { entitlementHandlers } from "../entitlements/Http.ts"

/**
 * `POST /v1/check` and `POST /v1/track` without HttpApi's router (docs/decisions.md, "Performance").
 *
 * Every request is handled as HttpApi handles it, by the same parts in the same order, only without the router and
 * its generic per-route machinery: the same web-handler runtime (request conversion, client-abort interruption, the
 * `http.server` span, the response conversion), every API-level middleware registered with
 * `HttpApiBuilder.middleware` (rate limit, body checks, timeout, error rendering: retrieved, not copied), the API's
 * error encoding (`HttpApiBuilder.buildMiddleware`), the group's bearer security with the same `Authentication`
 * implementation, the endpoint's own payload, headers and success schemas, and the same handler functions
 * (`entitlementHandlers`). test/fast-path.test.ts holds both paths to the same answers.
 *
 * What it does not do is decide that a request is one of the two: only an exact `POST` to one of the two paths takes
 * it; anything else (a trailing slash, another method) goes to HttpApi.
 */
export type WebHandler = (request: Request, context?: Context.Context<never> | undefined) => Promise<Response>

export const fastPathOf = (request: Request): "check" | "track" | undefined => {
  if (request.method !== "POST") return undefined
  const url = request.url
  // The path of an absolute URL: after "scheme://host", up to "?" or "#".
  const start = url.indexOf("/", url.indexOf("//") + 2)
  if (start < 0) return undefined
  let end = url.length
  const query = url.indexOf("?", start)
  if (query >= 0) end = query
  const hash = url.indexOf("#", start)
  if (hash >= 0 && hash < end) end = hash
  const path = url.slice(start, end)
  return path === "/v1/check" ? "check" : path === "/v1/track" ? "track" : undefined
}

/**
 * The two handlers, over the runtime of the web handler's layer (which must hold HttpApi's middleware registry, the
 * `Authentication` implementation and the `Entitlements` engine).
 */
export const makeFastPath = <R>(runtime: Runtime.Runtime<R>) =>
  Effect.gen(function*() {
    const apiMiddleware = yield* Effect.flatMap(HttpApiBuilder.Middleware, (m) => m.retrieve)
    const encodeErrors = yield* HttpApiBuilder.buildMiddleware(BillingApi)
    const authentication = yield* Authentication
    const handlers = entitlementHandlers(yield* Entitlements)
    // The group's security middleware: the bearer credential decoded as HttpApi decodes it, then the implementation.
    const security = Effect.flatMap(HttpApiBuilder.securityDecode(HttpApiSecurity.bearer), authentication.bearerAuth)

    const route = <Name extends "check" | "track">(name: Name) => {
      const endpoint = (BillingApi as unknown as HttpApi.HttpApi.AnyWithProps).groups["entitlements"]!.endpoints[name]!
      type AnySchema = Schema.Schema<any, any, never>
      const decodePayload = Schema.decodeUnknown(Option.getOrThrow(endpoint.payloadSchema) as AnySchema)
      const decodeHeaders = Schema.decodeUnknown(Option.getOrThrow(endpoint.headersSchema) as AnySchema)
      const successSchema = endpoint.successSchema as AnySchema
      const encodeSuccess = Schema.encode(successSchema)
      const status = HttpApiSchema.getStatusSuccessAST(successSchema.ast)
      const contentType = HttpApiSchema.getEncoding(successSchema.ast).contentType
      const handler = handlers[name] as (request: { headers: any; payload: any }) => Effect.Effect<
        unknown,
        unknown,
        CurrentOrganization
      >
      const app = Effect.gen(function*() {
        const request = yield* HttpServerRequest.HttpServerRequest
        const payload = yield* Effect.flatMap(Effect.orDie(request.json), decodePayload)
        const headers = yield* decodeHeaders(request.headers)
        const encoded = yield* encodeSuccess(yield* handler({ payload, headers }))
        return yield* Effect.mapError(
          HttpServerResponse.json(encoded, { status, contentType }),
          (error) => new ParseResult.ParseError({ issue: new ParseResult.Type(successSchema.ast, error, "Could not encode to JSON") })
        )
      }).pipe(
        Effect.provideServiceEffect(CurrentOrganization, security),
        Effect.catchIf(ParseResult.isParseError, HttpApiError.HttpApiDecodeError.refailParseError)
      )
      const handled = encodeErrors(apiMiddleware(app as any) as any) as any
      return HttpApp.toWebHandlerRuntime(runtime as Runtime.Runtime<any>)(handled) as WebHandler
    }

    return { check: route("check"), track: route("track") }
  })
