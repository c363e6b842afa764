import { Clock, Duration, Effect } from "effect"

/**
 * A real clock that can be moved (tests; the sample-data seed, which places each event at its own instant): `advance` shifts every reading of the application. With `stepping`, every
 * reading is at least 1 ms after the one before: code that reads the clock twice in one request then sees two
 * instants, as it would on a slower machine, instead of the same millisecond by luck.
 */
export const makeShiftedClock = (options: { readonly stepping?: boolean } = {}) => {
  let offset = 0
  let last = 0
  const millis = () => {
    const reading = Date.now() + offset
    if (options.stepping !== true) return reading
    last = Math.max(reading, last + 1)
    return last
  }
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
      last = 0
    },
    now: millis
  }
}
