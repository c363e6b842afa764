import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import type { HttpApi, HttpApiEndpoint, HttpApiGroup, HttpClientError } from "@effect/platform"
import { Cause, Effect, Either, Exit, Option, ParseResult, Schema } from "effect"
import type { Simplify } from "effect/Types"
import { BillingApi } from "./Api.ts"
import { errorStatus } from "./errors.ts"

/**
 * Typed clients of the whole API, derived from the contract and importing nothing of the server (`billing-service/
 * client`). A request takes what the wire takes: a body's defaulted fields are optional (request bodies with defaults
 * are declared as their wire form, `wireBody`), and so are `headers`, `urlParams` and `payload` when every field of
 * them is.
 */

/** `{ k: T }` made `{ k?: T }` when every field of `T` is optional. */
type Relax<R> = Simplify<
  { readonly [K in keyof R as {} extends R[K] ? never : K]: R[K] } & {
    readonly [K in keyof R as {} extends R[K] ? K : never]?: R[K]
  }
>

type Request<Path, UrlParams, Payload, Headers> = Relax<
  ([Path] extends [void] ? {} : { readonly path: Path }) &
    ([UrlParams] extends [never] ? {} : { readonly urlParams: UrlParams }) &
    ([Headers] extends [never] ? {} : { readonly headers: Headers }) &
    ([Payload] extends [never] ? {} : { readonly payload: Payload })
>

type Args<Req> = keyof Req extends never ? [request?: Req] : {} extends Req ? [request?: Req] : [request: Req]

type Method<Endpoint, Out, MoreErrors> =
  Endpoint extends HttpApiEndpoint.HttpApiEndpoint<
    infer _Name,
    infer _Method,
    infer Path,
    infer UrlParams,
    infer Payload,
    infer Headers,
    infer Success,
    infer Error,
    infer _R,
    infer _RE
  >
    ? (
        ...args: Args<Request<Path, UrlParams, Payload, Headers>>
      ) => Out extends "effect" ? Effect.Effect<Success, Error | MoreErrors | ApiClientFailure> : Promise<Success>
    : never

type ClientOf<Api, Out> =
  Api extends HttpApi.HttpApi<infer _Id, infer Groups, infer ApiError, infer _R>
    ? {
        readonly [Group in Groups as HttpApiGroup.HttpApiGroup.Name<Group>]: Group extends HttpApiGroup.HttpApiGroup<
          infer _Name,
          infer Endpoints,
          infer GroupError,
          infer _GR,
          infer _TopLevel
        >
          ? {
              readonly [E in Endpoints as HttpApiEndpoint.HttpApiEndpoint.Name<E>]: Method<
                E,
                Out,
                GroupError | ApiError
              >
            }
          : never
      }
    : never

/** What every call may fail with besides the contract's errors: no answer, or one the contract does not describe. */
export type ApiClientFailure = HttpClientError.HttpClientError | ParseResult.ParseError

/** The Effect client: `client.customers.create({ payload })`, failing with the contract's error classes. */
export type BillingClient = ClientOf<typeof BillingApi, "effect">
/** The Promise client: resolves to the answer's body, rejects with `BillingApiError`. */
export type BillingPromiseClient = ClientOf<typeof BillingApi, "promise">

/** Every method of every group of `client`, its request completed with what may be left out. */
const relax = (client: Record<string, Record<string, (request: any) => unknown>>) =>
  Object.fromEntries(
    Object.entries(client).map(([group, methods]) => [
      group,
      Object.fromEntries(
        Object.entries(methods).map(([name, fn]) => [
          name,
          (request?: Record<string, unknown>) =>
            fn({ headers: {}, urlParams: {}, payload: {}, ...request, withResponse: false })
        ])
      )
    ])
  )

/**
 * The Effect client. Provide an `HttpClient` (e.g. `FetchHttpClient.layer`); set the key with `apiKey` or
 * `transformClient`.
 */
export const makeClient = (
  baseUrl: string,
  options?: {
    readonly apiKey?: string
    readonly transformClient?: (client: HttpClient.HttpClient) => HttpClient.HttpClient
  }
): Effect.Effect<BillingClient, never, HttpClient.HttpClient> => {
  const key = options?.apiKey
  const transformClient = (client: HttpClient.HttpClient) => {
    const keyed = key === undefined ? client : HttpClient.mapRequest(client, HttpClientRequest.bearerToken(key))
    return options?.transformClient === undefined ? keyed : options.transformClient(keyed)
  }
  return Effect.map(
    HttpApiClient.make(BillingApi, { baseUrl, transformClient }),
    (client) => relax(client as never) as unknown as BillingClient
  )
}

/** A refused or failed call of the Promise client: the service's error body, or `network_error` when none came. */
export class BillingApiError extends Error {
  override readonly name = "BillingApiError"
  constructor(
    /** The HTTP status; 0 when no answer came. */
    readonly status: number,
    /** The machine code of decisions.md §10 (`invalid_request`, `customer_not_found`…). */
    readonly code: string,
    message: string,
    /** On 400s, every invalid field with its path. */
    readonly details?: ReadonlyArray<{ readonly path: string; readonly message: string }>
  ) {
    super(message)
  }
}

/** `features[0].slug`, as the service's `details` name paths. */
const pathOf = (path: ReadonlyArray<PropertyKey>) =>
  path.map((key, i) => (typeof key === "number" ? `[${key}]` : i === 0 ? String(key) : `.${String(key)}`)).join("")

const invalidRequest = (issues: ReadonlyArray<ParseResult.ArrayFormatterIssue>) => {
  const details = issues.map((issue) => ({ path: pathOf(issue.path), message: issue.message }))
  return new BillingApiError(
    0,
    "invalid_request",
    `The request is invalid: ${details.map((d) => (d.path === "" ? d.message : `${d.path}: ${d.message}`)).join("; ")}`,
    details
  )
}

const toBillingApiError = (failure: unknown): BillingApiError => {
  const error = failure as { _tag?: string; code?: unknown; message?: unknown; details?: unknown; response?: any }
  const tag = error?._tag
  if (tag !== undefined && tag in errorStatus && typeof error.code === "string") {
    const details = error.details as BillingApiError["details"]
    return new BillingApiError(
      errorStatus[tag as keyof typeof errorStatus][0],
      error.code,
      String(error.message),
      ...(details === undefined ? [] : [details])
    )
  }
  const status = typeof error?.response?.status === "number" ? (error.response.status as number) : 0
  if (tag === "ResponseError" || tag === "ParseError")
    return new BillingApiError(status, "unexpected_response", String(error?.message ?? failure))
  return new BillingApiError(status, "network_error", String(error?.message ?? failure))
}

/**
 * The client for code outside Effect: every method returns a Promise of the answer's body and rejects with a
 * `BillingApiError` carrying `status`, `code`, `message` (and `details` on 400s).
 *
 * ```ts
 * const billing = createBillingClient({ baseUrl: "http://localhost:3000", apiKey: process.env.BILLING_KEY! })
 * const { allowed } = await billing.entitlements.check({ payload: { customer: "user-42", feature: "tokens" } })
 * ```
 */
export const createBillingClient = (options: {
  readonly baseUrl: string
  readonly apiKey?: string
  /** Another `fetch` (a test double, a proxy-aware one). */
  readonly fetch?: typeof globalThis.fetch
}): BillingPromiseClient => {
  const client = Effect.runSync(
    makeClient(options.baseUrl, options.apiKey === undefined ? {} : { apiKey: options.apiKey }).pipe(
      Effect.provide(FetchHttpClient.layer),
      (effect) =>
        options.fetch === undefined ? effect : Effect.provideService(effect, FetchHttpClient.Fetch, options.fetch)
    )
  ) as unknown as Record<string, Record<string, (request?: unknown) => Effect.Effect<unknown, unknown>>>
  const groups = BillingApi.groups as unknown as Record<string, HttpApiGroup.HttpApiGroup.AnyWithProps>
  return Object.fromEntries(
    Object.entries(client).map(([group, methods]) => [
      group,
      Object.fromEntries(
        Object.entries(methods).map(([name, fn]) => {
          const payload = Option.getOrUndefined(groups[group]?.endpoints[name]?.payloadSchema ?? Option.none())
          // A body the contract refuses is refused here as the service would (its issues as `details`), before
          // anything is sent: status 0.
          const check =
            payload === undefined
              ? undefined
              : Schema.decodeUnknownEither(payload as Schema.Schema<unknown>, { errors: "all" })
          return [
            name,
            async (request?: { readonly payload?: unknown }) => {
              const checked = check?.(request?.payload ?? {})
              if (checked !== undefined && Either.isLeft(checked))
                throw invalidRequest(ParseResult.ArrayFormatter.formatErrorSync(checked.left))
              const exit = await Effect.runPromiseExit(fn(request))
              if (Exit.isSuccess(exit)) return exit.value
              const failure = Cause.failureOption(exit.cause)
              throw toBillingApiError(Option.isSome(failure) ? failure.value : Cause.squash(exit.cause))
            }
          ]
        })
      )
    ])
  ) as unknown as BillingPromiseClient
}
