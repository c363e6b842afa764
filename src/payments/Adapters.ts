import { Context, Effect, Layer } from "effect"
import { AppConfig } from "../platform/config.ts"
import type { PaymentAdapter, ProviderName } from "./PaymentProvider.ts"
import { makeSimulatedAdapter } from "./simulated/SimulatedAdapter.ts"

/** The adapter of each provider this build supports. */
export interface AdaptersShape {
  readonly get: (provider: ProviderName) => PaymentAdapter | undefined
}

export class Adapters extends Context.Tag("Adapters")<Adapters, AdaptersShape>() {}

export const makeAdaptersLayer = <R>(extra: ReadonlyArray<Effect.Effect<PaymentAdapter, never, R>>) =>
  Layer.effect(
    Adapters,
    Effect.gen(function* () {
      const config = yield* AppConfig
      const adapters = new Map<ProviderName, PaymentAdapter>()
      for (const make of extra) {
        const adapter = yield* make
        adapters.set(adapter.name, adapter)
      }
      if (config.appEnv === "sandbox") adapters.set("simulated", makeSimulatedAdapter(config.publicUrl))
      return { get: (provider) => adapters.get(provider) }
    })
  )
