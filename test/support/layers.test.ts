import { expect, test } from "bun:test"
import { Cause, Context, Effect, Exit } from "effect"
import { makeTestLayer } from "./layers.ts"

class Greeter extends Context.Tag("Greeter")<
  Greeter,
  {
    readonly hello: (name: string) => Effect.Effect<string>
    readonly bye: (name: string) => Effect.Effect<string>
  }
>() {}

test("a partial test layer serves what it was given and dies, naming the method, on anything else", async () => {
  const layer = makeTestLayer(Greeter)({ hello: (name) => Effect.succeed(`hello ${name}`) })
  expect(await Effect.runPromise(Effect.flatMap(Greeter, (g) => g.hello("ada")).pipe(Effect.provide(layer)))).toBe(
    "hello ada"
  )
  const exit = await Effect.runPromiseExit(Effect.flatMap(Greeter, (g) => g.bye("ada")).pipe(Effect.provide(layer)))
  expect(Exit.isFailure(exit) && Cause.isDie(exit.cause)).toBe(true)
  expect(Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "").toContain("Greeter.bye is not part of this test")
})
