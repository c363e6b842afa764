/** Tests move the application's clock with the same clock the sample-data seed uses. */
export { makeShiftedClock } from "../../src/platform/shiftedClock.ts"
