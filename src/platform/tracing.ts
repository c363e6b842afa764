import { FetchHttpClient } from "@effect/platform"
import { Effect, Layer, Option } from "effect"
import { AppConfig } from "./config.ts"

/**
 * OpenTelemetry traces over OTLP/HTTP JSON, only when OTEL_EXPORTER_OTLP_ENDPOINT is set; the
 * exporter is imported lazily so a service without it pays nothing at start-up.
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.gen(function*() {
    const config = yield* AppConfig
    if (Option.isNone(config.otlpEndpoint)) return Layer.empty
    const Otlp = yield* Effect.promise(() => import("@effect/opentelemetry/Otlp"))
    return Otlp.layerJson({
      baseUrl: config.otlpEndpoint.value,
      resource: { serviceName: "billing-service", serviceVersion: "0.1.0" }
    }).pipe(Layer.provide(FetchHttpClient.layer))
  })
)
