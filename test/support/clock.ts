import { Clock, Duration, Effect } from "effect"

/** A real clock that tests can move forward: `advance` shifts every reading of the application. */
export const makeShiftedClock = () => {
  let offset = 0
  const millis = () => Date.now() + offset
  const clock: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: millis,
    currentTimeMillis: Effect.sync(millis),
    unsafeCurrentTimeNanos: () => BigInt(millis()) * 1_000_000n,
    currentTimeNanos: Effect.sync(() => BigInt(millis()) * 1_000_000n),
    // Real waiting: only the reading of time is shifted.
    sleep: (duration) =>
      Effect.async<void>((resume) => {
        const timer = setTimeout(() => resume(Effect.void), Duration.toMillis(duration))
        return Effect.sync(() => clearTimeout(timer))
      })
  }
  return {
    clock,
    advance: (ms: number) => {
      offset += ms
    },
    /** Sets the absolute time (epoch ms); time keeps running from there. */
    set: (ms: number) => {
      offset = ms - Date.now()
    },
    now: millis
  }
}
