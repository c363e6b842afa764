import { Context, type Effect } from "effect"
import type { CreditPack as WireCreditPack, CreditSystem as WireCreditSystem, SyncRequest, SyncResult } from "../api/catalog.ts"
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
  /** The whole catalog, cached per organization and refreshed after a sync. */
  readonly snapshot: (organizationId: string) => Effect.Effect<CatalogSnapshot>
  readonly listCreditSystems: (organizationId: string) => Effect.Effect<ReadonlyArray<WireCreditSystem>>
  /** Active packs only. */
  readonly listCreditPacks: (organizationId: string) => Effect.Effect<ReadonlyArray<WireCreditPack>>
}

export class Catalog extends Context.Tag("Catalog")<Catalog, CatalogShape>() {}
