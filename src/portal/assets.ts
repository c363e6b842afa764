import type { Asset } from "../web/assets.ts"

// Placeholder on the portal-server branch only: portal-client owns this file (PORTAL-CONTRACT.md) and replaces it with
// the build of src/portal/client/. Until then the server serves no portal asset (404), which its tests do not need.
export const portalAssets = (): Promise<ReadonlyMap<string, Asset>> => Promise.resolve(new Map())
