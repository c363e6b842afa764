import { type Context, Effect, Layer } from "effect"

/**
 * A partial service for a unit test: the methods the test gives, and every other one dying loudly with its name,
 * so a test never passes by calling something it did not mean to (the pattern of Effect's http-server example).
 */
export const makeTestLayer =
  <I, S extends object>(tag: Context.Tag<I, S>) =>
  (service: Partial<S>): Layer.Layer<I> =>
    Layer.succeed(
      tag,
      new Proxy(service as S, {
        get: (target, property) => {
          if (property in target) return (target as Record<PropertyKey, unknown>)[property]
          const name = `${tag.key}.${String(property)}`
          // Methods are called and effects yielded: die either way, naming what was missing.
          const missing = (..._args: Array<unknown>) => Effect.die(new Error(`${name} is not part of this test`))
          return Object.assign(missing, Effect.die(new Error(`${name} is not part of this test`)))
        }
      })
    )
