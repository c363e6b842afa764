import type { ProviderName } from "./PaymentProvider.ts"

/**
 * Paystack has no setup mode: a card is saved through the smallest charge the currency allows, refunded once the
 * card is saved. Paystack's documented transaction minimums ("Supported currency" in its API reference), in minor
 * units: ₦50.00, ₵0.10, R1.00, Ksh. 3.00, $2.00.
 */
export const PAYSTACK_MINIMUMS: Readonly<Record<string, number>> = {
  NGN: 5_000,
  GHS: 10,
  ZAR: 100,
  KES: 300,
  USD: 200
}

const DEFAULT_CURRENCY: Record<ProviderName, string> = { paystack: "NGN", stripe: "USD", simulated: "NGN" }

/** What saving a method costs on this provider, in the currency asked for (else the provider's usual one). */
export const setupCharge = (
  provider: ProviderName,
  currency: string | null
): { readonly amount: number; readonly currency: string } => {
  const code = (currency ?? DEFAULT_CURRENCY[provider]).toUpperCase()
  if (provider !== "paystack") return { amount: 0, currency: code }
  const minimum = PAYSTACK_MINIMUMS[code]
  return minimum === undefined
    ? { amount: PAYSTACK_MINIMUMS.NGN!, currency: "NGN" }
    : { amount: minimum, currency: code }
}
