import { FetchHttpClient } from "@effect/platform"
import { Context, Effect, Layer, Option, type Tracer } from "effect"
import { AppConfig } from "./config.ts"

/**
 * A span that is not sampled: it carries ids so that its children know they are not sampled either, and is never
 * exported. Cheap on purpose: most requests of a sampled service make only these.
 */
class UnsampledSpan implements Tracer.Span {
  readonly _tag = "Span"
  readonly sampled = false
  readonly spanId = "0000000000000000"
  readonly traceId: string
  status: Tracer.SpanStatus
  readonly attributes = new Map<string, unknown>()
  readonly links: Array<Tracer.SpanLink> = []
  constructor(
    readonly name: string,
    readonly parent: Option.Option<Tracer.AnySpan>,
    readonly context: Tracer.Span["context"],
    readonly kind: Tracer.SpanKind,
    startTime: bigint
  ) {
    this.traceId = Option.isSome(parent) ? parent.value.traceId : "00000000000000000000000000000000"
    this.status = { _tag: "Started", startTime }
  }
  end(endTime: bigint, exit: Parameters<Tracer.Span["end"]>[1]) {
    this.status = { _tag: "Ended", startTime: this.status.startTime, endTime, exit }
  }
  attribute() {}
  event() {}
  addLinks() {}
}

/**
 * A root span the caller already decided to sample (`sampleRoot`): the tracer records it without drawing again. The
 * caller drew because an unsampled request is cheapest with no span at all (`Effect.withTracerEnabled(false)`):
 * even unsampled spans cost the hot path ~45 µs of CPU a track at 10% sampling (bench/track.ts, production).
 */
export class SampledRoot extends Context.Reference<SampledRoot>()("SampledRoot", { defaultValue: () => false }) {}
export const sampledRootContext: Context.Context<never> = Context.make(SampledRoot, true) as Context.Context<never>

/** A root's draw: sampled with probability `ratio` (OpenTelemetry's `traceidratio`, by a random draw). */
export const sampleRoot = (ratio: number, random: () => number = Math.random) => ratio >= 1 || random() < ratio

/**
 * Parent-based ratio sampling over another tracer (OpenTelemetry's `parentbased_traceidratio`): a span with a parent
 * follows its parent's decision (a caller's `traceparent` included); a root span is sampled with probability `ratio`.
 */
export const samplingTracer = (
  inner: Tracer.Tracer,
  ratio: number,
  random: () => number = Math.random
): Tracer.Tracer => ({
  ...inner,
  span: (name, parent, context, links, startTime, kind) => {
    const sampled = Option.isSome(parent)
      ? parent.value.sampled
      : Context.get(context, SampledRoot) || sampleRoot(ratio, random)
    return sampled
      ? inner.span(name, parent, context, links, startTime, kind)
      : new UnsampledSpan(name, parent, context, kind, startTime)
  }
})

/**
 * OpenTelemetry traces over OTLP/HTTP JSON, only when OTEL_EXPORTER_OTLP_ENDPOINT is set (the exporter is imported
 * lazily so a service without it pays nothing at start-up), sampled as OTEL_TRACES_SAMPLER_ARG says (default: all).
 */
export const TracingLive = Layer.unwrapEffect(
  Effect.gen(function* () {
    const config = yield* AppConfig
    if (Option.isNone(config.otlpEndpoint)) return Layer.empty
    const OtlpTracer = yield* Effect.promise(() => import("@effect/opentelemetry/OtlpTracer"))
    const OtlpSerialization = yield* Effect.promise(() => import("@effect/opentelemetry/OtlpSerialization"))
    const base = config.otlpEndpoint.value.replace(/\/+$/, "")
    return Layer.unwrapScoped(
      Effect.map(
        OtlpTracer.make({
          url: `${base}/v1/traces`,
          resource: { serviceName: "billing-service", serviceVersion: "0.1.0" },
          // Batches leave every second (OpenTelemetry's batch processor waits 5 s): traces show up while one looks.
          exportInterval: "1 second"
        }),
        (inner) => Layer.setTracer(samplingTracer(inner, config.traceSampleRatio))
      )
    ).pipe(Layer.provide(OtlpSerialization.layerJson), Layer.provide(FetchHttpClient.layer))
  })
)
