import { describe, expect, test } from "bun:test"
import { Context, Effect, Option, Tracer } from "effect"
import { sampledRootContext, samplingTracer } from "./tracing.ts"

/** An inner tracer that records the names of the spans it was asked for (the sampled ones). */
const recording = () => {
  const names: Array<string> = []
  const inner = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      names.push(name)
      return {
        _tag: "Span",
        name,
        spanId: "1111111111111111",
        traceId: "22222222222222222222222222222222",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes: new Map(),
        links,
        sampled: true,
        kind,
        end: () => {},
        attribute: () => {},
        event: () => {},
        addLinks: () => {}
      }
    },
    context: (f) => f()
  })
  return { names, inner }
}

const span = (tracer: Tracer.Tracer, name: string, parent: Option.Option<Tracer.AnySpan>, context = Context.empty()) =>
  tracer.span(name, parent, context as Context.Context<never>, [], 0n, "internal")

describe("parent-based ratio sampling", () => {
  test("a root is sampled when the draw is under the ratio; a child follows its parent", () => {
    const { names, inner } = recording()
    const draws = [0.05, 0.5]
    const tracer = samplingTracer(inner, 0.1, () => draws.shift()!)
    const kept = span(tracer, "kept", Option.none())
    const dropped = span(tracer, "dropped", Option.none())
    expect([kept.sampled, dropped.sampled]).toEqual([true, false])
    expect(span(tracer, "child of kept", Option.some(kept)).sampled).toBe(true)
    expect(span(tracer, "child of dropped", Option.some(dropped)).sampled).toBe(false)
    expect(names).toEqual(["kept", "child of kept"])
  })

  test("a root the caller already drew for is sampled without a second draw", () => {
    const { names, inner } = recording()
    let draws = 0
    const tracer = samplingTracer(inner, 0.1, () => {
      draws++
      return 0.99
    })
    expect(span(tracer, "decided", Option.none(), sampledRootContext).sampled).toBe(true)
    expect(draws).toBe(0)
    expect(names).toEqual(["decided"])
  })

  test("with the tracer disabled, an effect's spans reach no tracer", async () => {
    const { names, inner } = recording()
    await Effect.runPromise(
      Effect.withSpan(Effect.void, "untraced").pipe(Effect.withTracerEnabled(false), Effect.withTracer(inner))
    )
    await Effect.runPromise(Effect.withSpan(Effect.void, "traced").pipe(Effect.withTracer(inner)))
    expect(names).toEqual(["traced"])
  })
})
