import { Clock, Effect, Layer } from "effect"
import type {
  CreditPack as WireCreditPack,
  CreditSystem as WireCreditSystem,
  SyncCreditPack,
  SyncCreditSystem,
  SyncFeature,
  SyncPlan,
  SyncPlanFeature,
  SyncRequest,
  SyncResult
} from "../api/catalog.ts"
import {
  AMOUNT_MAX,
  COUNT_MAX,
  storedInteger,
  storedMoney,
  storedNullableQuantity,
  storedQuantity,
  TRIAL_DAYS_MAX
} from "../domain/bounds.ts"
import { InvalidInput } from "../domain/errors.ts"
import { format, toNumber, unsafeDecimal } from "../domain/money.ts"
import { normalizeReset } from "../domain/periods.ts"
import { validatePricing } from "../domain/rating.ts"
import { type IdPrefix, Ids } from "../platform/ids.ts"
import { Catalog } from "./Catalog.ts"
import { CatalogRepo, type StoredCatalog, type WriteMode } from "./CatalogRepo.ts"
import type { CatalogSnapshot, CreditPack, CreditSystem, Feature, MeterType, Plan, PlanFeature } from "./model.ts"
import { TaxRates, validateTaxRates } from "./taxRates.ts"
import { Coupons, validateCoupons } from "./coupons.ts"

/**
 * Catalog sync (decisions.md §3 and docs/decisions.md "Catalog sync"): validate the whole request against itself
 * and the store, report every problem at once, then upsert by slug in one transaction and never delete.
 */

export interface Issue {
  readonly path: string
  readonly message: string
}

type Stamped = { readonly id: string; readonly slug: string; readonly createdAt: number; readonly updatedAt: number }
/** What sync compares: a stored item minus its identity and timestamps. */
type Content<T extends Stamped> = Omit<T, "id" | "createdAt" | "updatedAt">

/** Canonical decimal string of minor units: 100, 100.0 and 1e2 are all "100". */
const money = (value: number): string => format(unsafeDecimal(value))

/** The one currency the request's plans and packs agree on, for packs that name none. */
const inferredCurrency = (request: SyncRequest): string | undefined => {
  const currencies = new Set(
    [...request.plans, ...request.creditPacks].flatMap((x) =>
      x.currency === undefined ? [] : [x.currency.toUpperCase()]
    )
  )
  return currencies.size === 1 ? [...currencies][0] : undefined
}

const meterTypes = (request: SyncRequest, stored: StoredCatalog): Map<string, MeterType> => {
  const map = new Map<string, MeterType>(stored.features.map((f) => [f.slug, f.meterType]))
  for (const f of request.features) map.set(f.slug, f.meterType)
  return map
}

/** Every hard problem (400) and soft one (warning) of a sync request, given what the store already holds. */
export const validateSync = (
  request: SyncRequest,
  stored: StoredCatalog
): { readonly problems: ReadonlyArray<Issue>; readonly warnings: ReadonlyArray<string> } => {
  const problems: Array<Issue> = []
  const warnings: Array<string> = []
  const problem = (path: string, message: string) => problems.push({ path, message })

  const duplicates = (kind: string, slugs: ReadonlyArray<string>) => {
    const first = new Map<string, number>()
    slugs.forEach((slug, i) => {
      const at = first.get(slug)
      if (at === undefined) first.set(slug, i)
      else problem(`${kind}[${i}].slug`, `duplicate slug '${slug}' (also ${kind}[${at}])`)
    })
  }
  duplicates(
    "features",
    request.features.map((f) => f.slug)
  )
  duplicates(
    "creditSystems",
    request.creditSystems.map((s) => s.slug)
  )
  duplicates(
    "creditPacks",
    request.creditPacks.map((p) => p.slug)
  )
  duplicates(
    "plans",
    request.plans.map((p) => p.slug)
  )

  const features = meterTypes(request, stored)
  const requestSystems = new Set(request.creditSystems.map((s) => s.slug))
  const systems = new Set([...stored.creditSystems.map((s) => s.slug), ...requestSystems])

  // A plan feature names a feature or a credit system by slug, so the two must not share one.
  request.features.forEach((f, i) => {
    if (systems.has(f.slug) && !requestSystems.has(f.slug)) {
      problem(`features[${i}].slug`, `'${f.slug}' is already the slug of a credit system`)
    }
  })
  request.creditSystems.forEach((s, i) => {
    if (features.has(s.slug)) problem(`creditSystems[${i}].slug`, `'${s.slug}' is also the slug of a feature`)
    const seen = new Set<string>()
    s.features.forEach((f, j) => {
      const at = `creditSystems[${i}].features[${j}].feature`
      if (!features.has(f.feature)) problem(at, `unknown feature '${f.feature}'`)
      if (seen.has(f.feature)) problem(at, `feature '${f.feature}' is listed twice`)
      seen.add(f.feature)
    })
  })

  const currency = inferredCurrency(request)
  request.creditPacks.forEach((p, i) => {
    if (!systems.has(p.creditSystem))
      problem(`creditPacks[${i}].creditSystem`, `unknown credit system '${p.creditSystem}'`)
    if (p.currency === undefined && currency === undefined) {
      problem(
        `creditPacks[${i}].currency`,
        "is required: the catalog's plans and packs do not use one single currency it could be inferred from"
      )
    }
  })

  request.plans.forEach((plan, i) => {
    const at = `plans[${i}]`
    if (plan.price > 0 && plan.currency === undefined) problem(`${at}.currency`, "is required for a plan with a price")
    // Usage priced by a plan is invoiced in the plan's currency, so a free plan that prices usage needs one too.
    // A warning for now (invoices fall back to NGN): existing catalogs and test fixtures rely on it; to reject such
    // catalogs, make this a `problem(`${at}.currency`, …)`.
    const pricesUsage = plan.features.some(
      (pf) =>
        (pf.pricePerUnit ?? 0) > 0 ||
        (pf.overagePrice ?? 0) > 0 ||
        (pf.tiers ?? []).some((t) => t.unitPrice > 0 || t.flatFee > 0)
    )
    if (!(plan.price > 0) && plan.currency === undefined && pricesUsage) {
      warnings.push(
        `plan '${plan.slug}' prices usage but names no currency (${at}.currency); its usage will be invoiced in NGN`
      )
    }
    if (plan.price > 0 && plan.billingType === "recurring" && plan.interval === undefined) {
      problem(`${at}.interval`, "is required for a recurring plan with a price")
    }
    const seen = new Set<string>()
    plan.features.forEach((pf, j) => {
      const fat = `${at}.features[${j}]`
      if (seen.has(pf.slug)) problem(`${fat}.slug`, `'${pf.slug}' is listed twice in this plan`)
      seen.add(pf.slug)
      if (!features.has(pf.slug) && !systems.has(pf.slug)) {
        warnings.push(
          `plan '${plan.slug}' names '${pf.slug}' (${fat}.slug), which is neither a feature nor a credit system; it was kept as given`
        )
      }
      const tiers = pf.tiers !== undefined && pf.tiers.length > 0 ? pf.tiers : undefined
      for (const text of validatePricing({
        ratingModel: pf.ratingModel,
        pricePerUnit: pf.pricePerUnit,
        billingUnits: pf.billingUnits,
        tiers
      })) {
        const sep = text.indexOf(": ")
        problem(`${fat}.${text.slice(0, sep)}`, text.slice(sep + 2))
      }
      if (
        (pf.usageModel === "usage_based" || pf.usageModel === "prepaid") &&
        pf.pricePerUnit === undefined &&
        tiers === undefined
      ) {
        problem(`${fat}.pricePerUnit`, `is required (or tiers) when usageModel is ${pf.usageModel}`)
      }
    })
  })

  const absent = (
    kind: string,
    storedSlugs: ReadonlyArray<string>,
    input: ReadonlyArray<{ readonly slug: string }>
  ) => {
    const given = new Set(input.map((x) => x.slug))
    for (const slug of storedSlugs) {
      if (!given.has(slug)) warnings.push(`${kind} '${slug}' exists in the store but not in this sync; it was kept`)
    }
  }
  absent(
    "feature",
    stored.features.map((f) => f.slug),
    request.features
  )
  absent(
    "credit system",
    stored.creditSystems.map((s) => s.slug),
    request.creditSystems
  )
  absent(
    "credit pack",
    stored.creditPacks.map((p) => p.slug),
    request.creditPacks
  )
  absent(
    "plan",
    stored.plans.map((p) => p.slug),
    request.plans
  )

  return { problems, warnings }
}

// ---- normalisation: the input as it would be stored, every default applied ----

const featureContent = (f: SyncFeature): Content<Feature> => ({
  slug: f.slug,
  name: f.name,
  type: f.type,
  meterType: f.meterType,
  unit: f.unit ?? null
})

const creditSystemContent = (s: SyncCreditSystem): Content<CreditSystem> => ({
  slug: s.slug,
  name: s.name,
  description: s.description ?? null,
  features: s.features.map((f) => ({ feature: f.feature, creditCost: f.creditCost }))
})

const creditPackContent = (
  p: SyncCreditPack,
  creditSystemId: string,
  currency: string,
  defaultProvider: string | undefined
): Content<CreditPack> => ({
  slug: p.slug,
  name: p.name,
  description: p.description ?? null,
  credits: p.credits,
  price: money(p.price),
  currency: (p.currency ?? currency).toUpperCase(),
  creditSystemId,
  provider: p.provider ?? defaultProvider ?? null,
  metadata: p.metadata ?? {},
  isActive: p.isActive
})

/** `non_consumable` features never reset (decisions.md §3): their reset is stored as `none` whatever was given. */
export const planFeatureContent = (pf: SyncPlanFeature, meterType: MeterType | undefined): PlanFeature => ({
  slug: pf.slug,
  enabled: pf.enabled,
  limit: pf.limit ?? null,
  trialLimit: pf.trialLimit ?? null,
  reset: meterType === "non_consumable" ? "none" : (normalizeReset(pf.reset) ?? "monthly"),
  usageModel: pf.usageModel,
  ratingModel: pf.ratingModel,
  pricePerUnit: pf.pricePerUnit === undefined ? null : money(pf.pricePerUnit),
  billingUnits: pf.billingUnits,
  tiers:
    pf.tiers === undefined || pf.tiers.length === 0
      ? null
      : pf.tiers.map((t) => ({ upTo: t.upTo, unitPrice: money(t.unitPrice), flatFee: money(t.flatFee) })),
  overage: pf.overage,
  overagePrice: pf.overagePrice === undefined ? null : money(pf.overagePrice),
  maxOverageUnits: pf.maxOverageUnits ?? null,
  creditCost: pf.creditCost ?? null
})

const planContent = (
  p: SyncPlan,
  meters: ReadonlyMap<string, MeterType>,
  defaultProvider: string | undefined
): Content<Plan> => ({
  slug: p.slug,
  name: p.name,
  description: p.description ?? null,
  price: money(p.price),
  currency: p.currency === undefined ? null : p.currency.toUpperCase(),
  interval: p.interval ?? null,
  billingType: p.billingType,
  autoEnable: p.autoEnable,
  isAddon: p.isAddon,
  portal: p.portal,
  planGroup: p.planGroup ?? null,
  trialDays: p.trialDays ?? null,
  provider: p.provider ?? defaultProvider ?? null,
  metadata: p.metadata ?? {},
  features: p.features.map((pf) => planFeatureContent(pf, meters.get(pf.slug)))
})

/** JSON with object keys sorted, so equal content compares equal whatever order its keys were written in. */
const canonical = (value: unknown): string =>
  JSON.stringify(value, (_key, v) =>
    v !== null && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v
  )

const contentOf = <T extends Stamped>(item: T): Content<T> => {
  const { createdAt: _c, id: _i, updatedAt: _u, ...rest } = item
  return rest
}

interface Reconciled<T> {
  readonly records: ReadonlyArray<{ readonly record: T; readonly mode: WriteMode | undefined }>
  readonly changes: { created: Array<string>; updated: Array<string>; unchanged: Array<string> }
}

// ---- the snapshot and the wire shapes ----

const bySlug = <T extends { readonly slug: string }>(items: ReadonlyArray<T>) => new Map(items.map((x) => [x.slug, x]))
const byId = <T extends { readonly id: string }>(items: ReadonlyArray<T>) => new Map(items.map((x) => [x.id, x]))

// ---- reading what was stored before the bounds (docs/decisions.md "Numbers") ----

const quantity = (value: number) => storedQuantity(value, AMOUNT_MAX)
const nullableQuantity = (value: number | null) => storedNullableQuantity(value, AMOUNT_MAX)
const price = (value: string | null) => (value === null ? null : storedMoney(value))

/**
 * A plan feature as the engine may compute with it: every number in its bounds. A value stored before the bounds
 * (a limit of 1e100, a price of 1e30) is read as the bound; migration 0010 reports such rows. A sync rewrites them,
 * since sync compares with the rows as stored, not as read here.
 */
export const boundedPlanFeature = (pf: PlanFeature): PlanFeature => ({
  ...pf,
  limit: nullableQuantity(pf.limit),
  trialLimit: nullableQuantity(pf.trialLimit),
  pricePerUnit: price(pf.pricePerUnit),
  billingUnits: pf.billingUnits > 0 ? quantity(pf.billingUnits) : 1,
  tiers:
    pf.tiers === null
      ? null
      : pf.tiers.map((t) => ({
          upTo: nullableQuantity(t.upTo),
          unitPrice: storedMoney(t.unitPrice),
          flatFee: storedMoney(t.flatFee)
        })),
  overagePrice: price(pf.overagePrice),
  maxOverageUnits: storedNullableQuantity(pf.maxOverageUnits, COUNT_MAX),
  creditCost: nullableQuantity(pf.creditCost)
})

const boundedPlan = (p: Plan): Plan => ({
  ...p,
  price: storedMoney(p.price),
  trialDays: p.trialDays === null ? null : storedInteger(p.trialDays, TRIAL_DAYS_MAX),
  features: p.features.map(boundedPlanFeature)
})

const boundedCreditSystem = (s: CreditSystem): CreditSystem => ({
  ...s,
  features: s.features.map((f) => ({ feature: f.feature, creditCost: quantity(f.creditCost) }))
})

const boundedCreditPack = (p: CreditPack): CreditPack => ({
  ...p,
  credits: quantity(p.credits),
  price: storedMoney(p.price)
})

export const buildSnapshot = (stored: StoredCatalog): CatalogSnapshot => {
  const catalog: StoredCatalog = {
    features: stored.features,
    creditSystems: stored.creditSystems.map(boundedCreditSystem),
    creditPacks: stored.creditPacks.map(boundedCreditPack),
    plans: stored.plans.map(boundedPlan)
  }
  const creditSystemsByFeature = new Map<string, Array<CreditSystem>>()
  for (const system of catalog.creditSystems) {
    for (const { feature } of system.features) {
      const list = creditSystemsByFeature.get(feature) ?? []
      if (!list.includes(system)) list.push(system)
      creditSystemsByFeature.set(feature, list)
    }
  }
  return {
    features: bySlug(catalog.features),
    featuresById: byId(catalog.features),
    creditSystems: bySlug(catalog.creditSystems),
    creditSystemsById: byId(catalog.creditSystems),
    creditPacks: bySlug(catalog.creditPacks),
    plans: bySlug(catalog.plans),
    plansById: byId(catalog.plans),
    creditSystemsByFeature
  }
}

/** Spec 2.5. */
export const toWireCreditSystem = (s: CreditSystem): WireCreditSystem => ({
  slug: s.slug,
  name: s.name,
  description: s.description ?? "",
  features: s.features.map((f) => ({ feature: f.feature, creditCost: f.creditCost }))
})

/** Spec 2.4. */
export const toWireCreditPack = (p: CreditPack, snapshot: CatalogSnapshot): WireCreditPack => ({
  id: p.id,
  slug: p.slug,
  name: p.name,
  description: p.description ?? "",
  credits: p.credits,
  price: toNumber(unsafeDecimal(p.price)),
  currency: p.currency,
  creditSystemId: p.creditSystemId,
  creditSystem: snapshot.creditSystemsById.get(p.creditSystemId)?.slug ?? "",
  provider: p.provider ?? "",
  metadata: p.metadata,
  isActive: p.isActive,
  createdAt: p.createdAt,
  updatedAt: p.updatedAt
})

const problemsMessage = (n: number) => `The catalog is invalid: ${n} ${n === 1 ? "problem" : "problems"}`

export const CatalogLive = Layer.effect(
  Catalog,
  Effect.gen(function* () {
    const repo = yield* CatalogRepo
    const taxRates = yield* TaxRates
    const coupons = yield* Coupons
    const ids = yield* Ids

    // Per-process cache of snapshots, each labelled with the organization's `catalog_version` read *before* it was
    // loaded (so a snapshot is never older than its label). A sync in any process bumps the version; readers compare
    // it, so no process serves a catalog that another process's sync replaced.
    const cache = new Map<string, { readonly version: number; readonly snapshot: CatalogSnapshot }>()
    const MAX_CACHED = 10_000

    const load = (organizationId: string, version: number): Effect.Effect<CatalogSnapshot> =>
      repo.load(organizationId).pipe(
        Effect.map(buildSnapshot),
        Effect.tap((built) =>
          Effect.sync(() => {
            const current = cache.get(organizationId)
            if (current === undefined || current.version <= version) {
              cache.delete(organizationId)
              if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value!)
              cache.set(organizationId, { version, snapshot: built })
            }
          })
        )
      )

    const snapshotAt = (organizationId: string, version: number): Effect.Effect<CatalogSnapshot> =>
      Effect.suspend(() => {
        const hit = cache.get(organizationId)
        return hit !== undefined && hit.version === version
          ? Effect.succeed(hit.snapshot)
          : load(organizationId, version)
      })

    const snapshot = (organizationId: string): Effect.Effect<CatalogSnapshot> =>
      Effect.flatMap(repo.version(organizationId), (version) => snapshotAt(organizationId, version))

    const cached = (organizationId: string) =>
      Effect.suspend(() => {
        const hit = cache.get(organizationId)
        return hit !== undefined
          ? Effect.succeed(hit)
          : Effect.flatMap(repo.version(organizationId), (version) =>
              Effect.map(load(organizationId, version), (snapshot) => ({ version, snapshot }))
            )
      })

    /** Matches each input to the stored item of its slug: created, updated (id and createdAt kept) or unchanged. */
    const reconcile = <T extends Stamped>(
      contents: ReadonlyArray<Content<T>>,
      stored: ReadonlyArray<T>,
      prefix: IdPrefix,
      now: number
    ): Effect.Effect<Reconciled<T>> =>
      Effect.gen(function* () {
        const existing = bySlug(stored)
        const changes = { created: [] as Array<string>, updated: [] as Array<string>, unchanged: [] as Array<string> }
        const records: Array<{ record: T; mode: WriteMode | undefined }> = []
        for (const content of contents) {
          const current = existing.get(content.slug)
          if (current === undefined) {
            const record = { ...content, id: yield* ids.next(prefix), createdAt: now, updatedAt: now } as unknown as T
            records.push({ record, mode: "insert" })
            changes.created.push(content.slug)
          } else if (canonical(contentOf(current)) === canonical(content)) {
            records.push({ record: current, mode: undefined })
            changes.unchanged.push(content.slug)
          } else {
            const record = { ...content, id: current.id, createdAt: current.createdAt, updatedAt: now } as unknown as T
            records.push({ record, mode: "update" })
            changes.updated.push(content.slug)
          }
        }
        return { records, changes }
      })

    const sync = (organizationId: string, request: SyncRequest) =>
      Effect.gen(function* () {
        const outcome = yield* repo.transaction(
          organizationId,
          Effect.gen(function* () {
            const stored = yield* repo.load(organizationId)
            const validated = validateSync(request, stored)
            const planSlugs = new Set([...stored.plans.map((p) => p.slug), ...request.plans.map((p) => p.slug)])
            const problems = [
              ...validated.problems,
              ...validateTaxRates(request.taxRates),
              ...validateCoupons(request.coupons, request.promotionCodes, planSlugs)
            ]
            if (problems.length > 0) {
              return yield* new InvalidInput({ message: problemsMessage(problems.length), issues: problems })
            }
            const now = yield* Clock.currentTimeMillis
            const meters = meterTypes(request, stored)

            const features = yield* reconcile<Feature>(
              request.features.map(featureContent),
              stored.features,
              "feat",
              now
            )
            const systems = yield* reconcile<CreditSystem>(
              request.creditSystems.map(creditSystemContent),
              stored.creditSystems,
              "crs",
              now
            )
            const systemIds = new Map([
              ...stored.creditSystems.map((s) => [s.slug, s.id] as const),
              ...systems.records.map(({ record }) => [record.slug, record.id] as const)
            ])
            const currency = inferredCurrency(request) ?? ""
            const packs = yield* reconcile<CreditPack>(
              request.creditPacks.map((p) =>
                creditPackContent(p, systemIds.get(p.creditSystem)!, currency, request.defaultProvider)
              ),
              stored.creditPacks,
              "pack",
              now
            )
            const plans = yield* reconcile<Plan>(
              request.plans.map((p) => planContent(p, meters, request.defaultProvider)),
              stored.plans,
              "plan",
              now
            )

            const write = <T>(
              records: Reconciled<T>["records"],
              writer: (organizationId: string, record: T, mode: WriteMode) => Effect.Effect<void>
            ) =>
              Effect.forEach(
                records,
                ({ mode, record }) => (mode === undefined ? Effect.void : writer(organizationId, record, mode)),
                {
                  discard: true
                }
              )
            yield* write(features.records, repo.writeFeature)
            yield* write(systems.records, repo.writeCreditSystem)
            yield* write(packs.records, repo.writeCreditPack)
            yield* write(plans.records, repo.writePlan)
            const changed = [features, systems, packs, plans].some((r) =>
              r.records.some(({ mode }) => mode !== undefined)
            )
            if (changed) yield* repo.bumpVersion(organizationId)
            // Tax rates are read by invoices when they are finalized, not by the cached snapshot: no version bump.
            const taxes = yield* taxRates.reconcile(organizationId, request.taxRates, now)
            // Coupons too are read when they are redeemed and when invoices are built, not from the snapshot.
            const discounts = yield* coupons.reconcile(organizationId, request.coupons, request.promotionCodes, now)
            const warnings = [...validated.warnings, ...taxes.warnings, ...discounts.warnings]

            const wasAutoEnabled = new Set(stored.plans.filter((p) => p.autoEnable).map((p) => p.slug))
            const newlyAutoEnabled = plans.records
              .filter(({ record }) => record.autoEnable && !wasAutoEnabled.has(record.slug))
              .map(({ record }) => record.id)
            const result: SyncResult = {
              success: true,
              features: features.changes,
              creditSystems: systems.changes,
              creditPacks: packs.changes,
              plans: plans.changes,
              taxRates: taxes.changes,
              coupons: discounts.coupons,
              promotionCodes: discounts.promotionCodes,
              warnings
            }
            return { result, newlyAutoEnabled }
          })
        )
        yield* Effect.sync(() => cache.delete(organizationId))
        return outcome
      })

    return {
      sync,
      snapshot,
      snapshotAt,
      cached,
      listCreditSystems: (organizationId) =>
        Effect.map(snapshot(organizationId), (s) => Array.from(s.creditSystems.values(), toWireCreditSystem)),
      listCreditPacks: (organizationId) =>
        Effect.map(snapshot(organizationId), (s) =>
          Array.from(s.creditPacks.values())
            .filter((p) => p.isActive)
            .map((p) => toWireCreditPack(p, s))
        )
    }
  })
)
