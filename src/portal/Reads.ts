import { Effect } from "effect"
import { BillingProfiles } from "../billing/profile/BillingProfiles.ts"
import { Catalog } from "../catalog/Catalog.ts"
import type { CatalogSnapshot, Plan } from "../catalog/model.ts"
import { Credits } from "../credits/Credits.ts"
import { format } from "../domain/money.ts"
import { fromMicro } from "../domain/quantity.ts"
import type { PortalSession } from "./Sessions.ts"

// What the portal shows that no single `/v1` answer carries: the vendor's name, plans as the customer chooses among
// them, credit balances by system. Reads only, every one scoped by the session's organization and customer.

/** The vendor as its customers know it: the billing profile's legal name, else the organization's name. */
export const vendorName = (session: PortalSession) =>
  Effect.flatMap(BillingProfiles, (profiles) => profiles.get(session.organization.id)).pipe(
    Effect.map((profile) => profile.legalName ?? session.organization.name)
  )

export const snapshotOf = (session: PortalSession) =>
  Effect.flatMap(Catalog, (c) => c.snapshot(session.organization.id))

/** A plan's price as the portal shows it (minor units); null for a plan without a currency (free). */
export const priceOf = (plan: Plan) =>
  plan.currency === null
    ? null
    : { amount: Number(plan.price), currency: plan.currency, interval: plan.interval ?? plan.billingType }

/**
 * The plans a customer may choose among (the organization's `portal: true` plans, decisions.md §17), plus the ones
 * they are on (marked current even when not offered), in the catalog's order.
 */
export const portalPlans = (snapshot: CatalogSnapshot, currentSlugs: ReadonlySet<string>) =>
  [...snapshot.plans.values()]
    .filter((p) => p.portal || currentSlugs.has(p.slug))
    .map((p) => ({
      slug: p.slug,
      name: p.name,
      group: p.planGroup,
      price: priceOf(p),
      features: p.features
        .filter((f) => f.enabled)
        .map((f) => ({
          feature: f.slug,
          name: snapshot.features.get(f.slug)?.name ?? snapshot.creditSystems.get(f.slug)?.name ?? f.slug,
          // A credit system's allowance counts like a metered feature's; only a boolean feature is on/off.
          type: snapshot.features.get(f.slug)?.type ?? "metered",
          limit: f.limit,
          reset: f.limit === null || f.reset === "none" ? null : f.reset
        })),
      current: currentSlugs.has(p.slug)
    }))

/** Bonus and purchased credits of every credit system, as the customer holds them now. */
export const creditBalances = (session: PortalSession, snapshot: CatalogSnapshot) =>
  Effect.flatMap(Credits, (credits) =>
    Effect.forEach([...snapshot.creditSystems.values()], (system) =>
      Effect.map(credits.balances(session.organization.id, session.customerId, system.id), (b) => ({
        creditSystem: { slug: system.slug, name: system.name },
        balance: Number(format(fromMicro(b.bonus + b.addon)))
      }))
    )
  )
