/**
 * The stored catalog of one organization, as the rest of the service reads it. Money stays a decimal string
 * (minor units, possibly fractional); quantities are plain numbers as the vendor's catalog gave them.
 */
import type { BillingInterval, ResetInterval } from "../domain/periods.ts"
import type { RatingModel } from "../domain/rating.ts"

export type FeatureType = "metered" | "boolean"
export type MeterType = "consumable" | "non_consumable"
export type UsageModel = "included" | "usage_based" | "prepaid"

export interface Feature {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly type: FeatureType
  readonly meterType: MeterType
  readonly unit: string | null
  readonly createdAt: number
  readonly updatedAt: number
}

export interface CreditSystem {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly description: string | null
  /** Feature slugs and the credits one unit of each costs. */
  readonly features: ReadonlyArray<{ readonly feature: string; readonly creditCost: number }>
  readonly createdAt: number
  readonly updatedAt: number
}

export interface CreditPack {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly description: string | null
  readonly credits: number
  /** Decimal string, minor units. */
  readonly price: string
  readonly currency: string
  readonly creditSystemId: string
  readonly provider: string | null
  readonly metadata: Record<string, unknown>
  readonly isActive: boolean
  readonly createdAt: number
  readonly updatedAt: number
}

export interface PlanTier {
  readonly upTo: number | null
  /** Decimal strings, minor units. */
  readonly unitPrice: string
  readonly flatFee: string
}

/** A plan's grant of one feature or credit system, every default of decisions.md §3 applied. */
export interface PlanFeature {
  /** A feature slug or a credit-system slug. */
  readonly slug: string
  readonly enabled: boolean
  /** `null` = unlimited. */
  readonly limit: number | null
  readonly trialLimit: number | null
  readonly reset: ResetInterval
  readonly usageModel: UsageModel
  readonly ratingModel: RatingModel
  /** Decimal string, minor units; `null` when not priced. */
  readonly pricePerUnit: string | null
  readonly billingUnits: number
  readonly tiers: ReadonlyArray<PlanTier> | null
  readonly overage: "block" | "charge"
  readonly overagePrice: string | null
  readonly maxOverageUnits: number | null
  readonly creditCost: number | null
}

export interface Plan {
  readonly id: string
  readonly slug: string
  readonly name: string
  readonly description: string | null
  /** Decimal string, minor units. */
  readonly price: string
  readonly currency: string | null
  readonly interval: BillingInterval | null
  readonly billingType: "recurring" | "one_time"
  readonly autoEnable: boolean
  readonly isAddon: boolean
  /** A plan the customer portal offers to change to (decisions.md §17). */
  readonly portal: boolean
  readonly planGroup: string | null
  readonly trialDays: number | null
  readonly provider: string | null
  readonly metadata: Record<string, unknown>
  readonly features: ReadonlyArray<PlanFeature>
  readonly createdAt: number
  readonly updatedAt: number
}

/** Everything the engine needs about an organization's catalog, indexed for the hot path. */
export interface CatalogSnapshot {
  readonly features: ReadonlyMap<string, Feature> // by slug
  readonly featuresById: ReadonlyMap<string, Feature>
  readonly creditSystems: ReadonlyMap<string, CreditSystem> // by slug
  readonly creditSystemsById: ReadonlyMap<string, CreditSystem>
  readonly creditPacks: ReadonlyMap<string, CreditPack> // by slug
  readonly plans: ReadonlyMap<string, Plan> // by slug
  readonly plansById: ReadonlyMap<string, Plan>
  /** The credit systems a feature draws from, by feature slug (a feature may belong to several). */
  readonly creditSystemsByFeature: ReadonlyMap<string, ReadonlyArray<CreditSystem>>
}

export const isFree = (plan: Plan): boolean => Number(plan.price) === 0
