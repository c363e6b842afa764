// Numbers, money and instants as the service's pages show them.
import { formatMinor } from "../../domain/majorUnits.ts"

/** Minor units in major units by the currency's exponent, exactly (decisions.md §13); nothing known → "—". */
export const money = (minor: number | string | null | undefined, currency: string | null | undefined) =>
  minor === null || minor === undefined || currency === null || currency === undefined || currency === ""
    ? "—"
    : formatMinor(minor, currency)

/** `{ NGN: 123450 }` → "1,234.50 NGN"; several currencies side by side; none → "—" (decisions.md §14). */
export const creditBalanceText = (balance: Record<string, number> | undefined): string => {
  const entries = Object.entries(balance ?? {}).filter(([, minor]) => minor > 0)
  return entries.length === 0 ? "—" : entries.map(([currency, minor]) => money(minor, currency)).join(", ")
}

export const when = (value: string | number | null | undefined): string => {
  if (value === null || value === undefined || value === "") return "—"
  const date = new Date(value)
  return Number.isNaN(date.getTime()) ? String(value) : date.toLocaleString()
}

/** A day in the browser's locale and zone ("Dec 7, 2026"): periods and invoice dates, where the hour is noise. */
export const day = (value: string | number | null | undefined): string => {
  if (value === null || value === undefined || value === "") return "—"
  const date = new Date(value)
  return Number.isNaN(date.getTime())
    ? String(value)
    : date.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" })
}

export const num = (value: number | null | undefined): string =>
  value === null || value === undefined ? "∞" : value.toLocaleString("en", { maximumFractionDigits: 6 })
