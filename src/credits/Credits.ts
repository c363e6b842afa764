import { Context, type Effect } from "effect"
import { AMOUNT_MAX_TEXT } from "../domain/bounds.ts"
import { type Conflict, InvalidInput, type NotFound } from "../domain/errors.ts"
import { format } from "../domain/money.ts"
import { fromMicro } from "../domain/quantity.ts"

/*
 * The credits service's interface, apart from its implementation (src/entitlements/Credits.ts), so that features
 * that sell or grant credits (packs, the CLI) depend on the service, not on the entitlements folder.
 */

export type CreditKind = "bonus" | "addon"

export interface CreditBalances {
  readonly customerId: string
  readonly creditSystem: string
  readonly bonusBalance: number
  readonly addonBalance: number
}

/**
 * Credits outside the plan allowance: bonus credits a vendor gives, and purchased (addon) credits from packs.
 * Both carry over reset windows; the engine draws bonus before addon (decisions.md §5).
 */
export interface CreditsShape {
  readonly grant: (
    organizationId: string,
    customer: string,
    creditSystem: string,
    amount: number,
    kind: CreditKind
  ) => Effect.Effect<CreditBalances, NotFound | Conflict | InvalidInput>
  readonly balances: (
    organizationId: string,
    customerId: string,
    systemId: string
  ) => Effect.Effect<{ readonly bonus: bigint; readonly addon: bigint }>
  /**
   * For a known customer and system id, inside the caller's transaction when there is one. A grant that would bring
   * the balance past `upTo` (micro-units; default the bound of a credit balance, 1e12 credits) writes nothing and
   * fails with the 400 naming `amount` and the bound.
   */
  readonly grantById: (
    organizationId: string,
    customerId: string,
    systemId: string,
    amountMicro: bigint,
    kind: CreditKind,
    upTo?: bigint
  ) => Effect.Effect<{ readonly bonus: bigint; readonly addon: bigint }, InvalidInput>
  /**
   * Takes credits back (a refunded purchase): at most what the balance still holds, never below zero, since what was
   * spent stays spent. Inside the caller's transaction when there is one; answers what was taken.
   */
  readonly takeBackById: (
    organizationId: string,
    customerId: string,
    systemId: string,
    amountMicro: bigint,
    kind: CreditKind
  ) => Effect.Effect<{ readonly taken: bigint; readonly bonus: bigint; readonly addon: bigint }>
}

const KIND_NAME: Record<CreditKind, string> = { bonus: "bonus", addon: "purchased" }

/** The 400 of a grant or purchase that would overfill a balance (decisions.md §1). */
export const overfilled = (path: string, kind: CreditKind, systemSlug: string, current: bigint, addedMicro: bigint) => {
  const problem =
    `would bring the ${KIND_NAME[kind]} credits of '${systemSlug}' to ` +
    `${format(fromMicro(current + addedMicro))}, past ${AMOUNT_MAX_TEXT} (the most one balance holds); nothing was added`
  return new InvalidInput({
    message: `The request is invalid: ${path}: ${problem}`,
    issues: [{ path, message: problem }]
  })
}

export class Credits extends Context.Tag("Credits")<Credits, CreditsShape>() {}
