/**
 * A batch of tracks on its way through the engine: its items as sent, and (below) what its preparation outside the
 * transaction hands to the lane that decides and records it.
 */
import type { EntitlementInput } from "./meter.ts"

export interface BatchItem extends EntitlementInput {
  readonly idempotencyKey?: string | undefined
}
