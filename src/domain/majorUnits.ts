// Money in major units, exactly (decisions.md §13): minor units shifted by the currency's exponent as text, never
// divided in binary floating point. Imports nothing: the dashboard's browser script bundles it, and the server's pages
// (the dashboard's, the simulated provider's hosted checkout) use it alike.

/** ISO 4217 minor-unit exponents, from the platform's own table (NGN, USD 2; JPY 0; KWD 3). */
export const currencyExponent = (currency: string): number => {
  try {
    return new Intl.NumberFormat("en", { style: "currency", currency }).resolvedOptions().maximumFractionDigits ?? 2
  } catch {
    return 2
  }
}

/** A plain decimal text of a JSON number or decimal string: "0.25", "1200", never an exponent. */
export const plainDecimal = (value: number | string): string => {
  let text = typeof value === "number" ? String(value) : value.trim()
  const e = text.search(/e/i)
  if (e !== -1) {
    const exponent = Number(text.slice(e + 1))
    const mantissa = text.slice(0, e)
    const negative = mantissa.startsWith("-")
    const [whole = "0", fraction = ""] = mantissa.replace("-", "").split(".")
    const digits = whole + fraction
    const point = whole.length + exponent
    text =
      point <= 0
        ? `0.${"0".repeat(-point)}${digits}`
        : point >= digits.length
          ? digits + "0".repeat(point - digits.length)
          : `${digits.slice(0, point)}.${digits.slice(point)}`
    if (negative) text = `-${text}`
  }
  return text
}

const group = (digits: string) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",")

/** `500000` NGN → "5,000.00"; `0.25` NGN → "0.0025"; `1500` JPY → "1,500"; `1234` KWD → "1.234": the amount alone. */
export const formatMajor = (minor: number | string, currency: string): string => {
  const exponent = currencyExponent(currency.toUpperCase())
  const text = plainDecimal(minor)
  const negative = text.startsWith("-")
  const [whole = "0", fraction = ""] = text.replace("-", "").split(".")
  const padded = whole.padStart(exponent + 1, "0")
  const major = padded.slice(0, padded.length - exponent).replace(/^0+(?=\d)/, "")
  const decimals = (padded.slice(padded.length - exponent) + fraction).replace(/0+$/, "").padEnd(exponent, "0")
  return `${negative ? "-" : ""}${group(major)}${decimals === "" ? "" : `.${decimals}`}`
}

/** `500000` NGN → "5,000.00 NGN"; `0.25` NGN → "0.0025 NGN"; `1500` JPY → "1,500 JPY"; `1234` KWD → "1.234 KWD". */
export const formatMinor = (minor: number | string, currency: string): string =>
  `${formatMajor(minor, currency)} ${currency.toUpperCase()}`
