import { HttpApiClient } from "@effect/platform"
import type { HttpClient } from "@effect/platform"
import type { Effect } from "effect"
import { BillingApi } from "./Api.ts"

/**
 * A typed client of the whole API, derived from the contract. Provide an `HttpClient`
 * (e.g. `FetchHttpClient.layer`) and set the bearer key with `transformClient`.
 */
export const makeClient = (
  baseUrl: string,
  options?: {
    readonly transformClient?: (client: HttpClient.HttpClient) => HttpClient.HttpClient
  }
) => HttpApiClient.make(BillingApi, { baseUrl, ...options })

export type BillingClient = Effect.Effect.Success<ReturnType<typeof makeClient>>
