import { Context, Effect } from "effect"
import type {
  CreditPack as WireCreditPack,
  CreditSystem as WireCreditSystem,
  SyncRequest,
  SyncResult
} from "../api/catalog.ts"
import type { InvalidInput } from "../domain/errors.ts"
import type { CatalogSnapshot } from "./model.ts"

export interface SyncOutcome {
  readonly result: SyncResult
  /** Plans that this sync made `autoEnable` (new plans with it, or existing ones switched on). */
  readonly newlyAutoEnabled: ReadonlyArray<string>
}

/** The catalog of each organization: synced from code, read by everything else. */
export interface CatalogShape {
  /** decisions.md §3: upsert by slug in one transaction, never delete; every problem in one InvalidInput. */
  readonly sync: (organizationId: string, request: SyncRequest) => Effect.Effect<SyncOutcome, InvalidInput>
  /**
   * The whole catalog, cached per organization; one cheap query checks the cached one against the organization's
   * `catalog_version`, so a sync by any process is seen at once.
   */
  readonly snapshot: (organizationId: string) => Effect.Effect<CatalogSnapshot>
  /** The catalog at a `catalog_version` the caller read itself (the hot path reads it with the customer). */
  readonly snapshotAt: (organizationId: string, version: number) => Effect.Effect<CatalogSnapshot>
  /** Whatever this process has cached (loaded when nothing is), with its version: to be checked by the caller. */
  readonly cached: (
    organizationId: string
  ) => Effect.Effect<{ readonly version: number; readonly snapshot: CatalogSnapshot }>
  readonly listCreditSystems: (organizationId: string) => Effect.Effect<ReadonlyArray<WireCreditSystem>>
  /** Active packs only. */
  readonly listCreditPacks: (organizationId: string) => Effect.Effect<ReadonlyArray<WireCreditPack>>
}

export class Catalog extends Context.Tag("Catalog")<Catalog, CatalogShape>() {}

/**
 * What happens after a sync made plans `autoEnable` (attach them to existing customers): a hook the subscriptions
 * module fills in, so the catalog does not depend on subscriptions. Called with the plans' ids, only when non-empty.
 */
export class PlansAutoEnabledHook extends Context.Reference<PlansAutoEnabledHook>()("PlansAutoEnabledHook", {
  defaultValue:
    () =>
    (_orgId: string, _planIds: ReadonlyArray<string>): Effect.Effect<void> =>
      Effect.void
}) {}

/**
 * A sync as the API and the CLI run it: `Catalog.sync`, then the hook for the plans it newly auto-enabled.
 * The hook runs after the sync committed; its failure cannot undo the sync.
 */
export const syncCatalog = (organizationId: string, request: SyncRequest) =>
  Effect.gen(function* () {
    const catalog = yield* Catalog
    const outcome = yield* catalog.sync(organizationId, request)
    if (outcome.newlyAutoEnabled.length > 0) {
      const hook = yield* PlansAutoEnabledHook
      yield* hook(organizationId, outcome.newlyAutoEnabled)
    }
    return outcome
  })
