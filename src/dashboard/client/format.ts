// Money as the page shows it (decisions.md §13): minor units in major units by the currency's exponent, exactly.
import { formatMinor } from "../../domain/majorUnits.ts"

export const money = (minor: number | string | null | undefined, currency: string | null | undefined) =>
  minor === null || minor === undefined || currency === null || currency === undefined || currency === ""
    ? "—"
    : formatMinor(minor, currency)
