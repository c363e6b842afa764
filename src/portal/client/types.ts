// What the portal's JSON routes answer (docs: /work/wt/PORTAL-CONTRACT.md, decisions.md §17): the fields the page
// reads, as /v1 spells them. Amounts are minor units; instants ISO 8601 strings (createdAt: epoch milliseconds).

export interface Price {
  readonly amount: number
  readonly currency: string
  readonly interval: string
}

/** The /v1/subscriptions shape. */
export interface Subscription {
  readonly id: string
  readonly plan: string
  readonly status: string
  readonly currentPeriodStart: string | null
  readonly currentPeriodEnd: string | null
  readonly trialEndsAt: string | null
  readonly cancelAtPeriodEnd: boolean
  readonly canceledAt: string | null
  readonly scheduledChange?: { readonly plan: string; readonly at: string }
  readonly pendingChange?: { readonly plan: string; readonly invoiceId: string; readonly expiresAt: string }
}

/** As the overview shows it: with its plan's name and price. */
export interface PortalSubscription extends Subscription {
  readonly planName: string
  readonly price: Price | null
}

export interface Overview {
  readonly vendor: { readonly name: string; readonly returnUrl: string | null }
  readonly customer: { readonly id: string; readonly name: string | null; readonly email: string | null }
  readonly expiresAt: string
  readonly subscriptions: ReadonlyArray<PortalSubscription>
  readonly features: ReadonlyArray<{
    readonly feature: {
      readonly slug: string
      readonly name: string
      readonly type: string
      readonly unit: string | null
    }
    readonly state: unknown
  }>
  readonly credits: ReadonlyArray<{
    readonly creditSystem: { readonly slug: string; readonly name: string }
    readonly balance: number
  }>
  readonly creditBalance: Record<string, number>
}

export interface Invoice {
  readonly id: string
  readonly number: string
  readonly status: string
  readonly currency: string
  readonly total: number
  readonly amountDue: number
  readonly createdAt: number
  readonly hostedUrl: string
  readonly pdfUrl: string
}

export interface PaymentMethod {
  readonly id: string
  readonly type: string
  readonly brand: string | null
  readonly last4: string | null
  readonly expMonth: number | null
  readonly expYear: number | null
  readonly isDefault: boolean
}

export interface PlanFeature {
  readonly feature: string
  readonly name: string
  /** Absent until the server says; "boolean" features have no limit. */
  readonly type?: string
  readonly limit: number | null
  readonly reset: string | null
}

export interface Plan {
  readonly slug: string
  readonly name: string
  readonly group: string | null
  readonly price: Price | null
  readonly features: ReadonlyArray<PlanFeature>
  readonly current: boolean
}

export interface PreviewLine {
  readonly description: string
  readonly amount: number
  readonly periodStart: string
  readonly periodEnd: string
}

/** POST /v1/attach/preview's answer (decisions.md §14). */
export interface Preview {
  readonly plan: string
  readonly previousPlan: string | null
  readonly effectiveAt: string
  readonly scheduled: boolean
  readonly currency: string
  readonly lines: ReadonlyArray<PreviewLine>
  readonly subtotal: number
  readonly discount: number
  readonly tax: number
  readonly total: number
  readonly creditApplied: number
  readonly amountDue: number
  readonly creditBalanceAfter: number
}

/** POST /v1/attach's answer. */
export interface ChangeResult {
  readonly subscription: Subscription
  readonly checkoutUrl: string | null
  readonly invoice?: { readonly currency: string; readonly amountDue: number; readonly number: string }
  readonly message: string
}

/** `POST /v1/subscriptions/{id}/checkout`'s answer: a pending subscription's first payment. */
export interface CheckoutResult {
  readonly checkoutUrl: string | null
  readonly activatedDirectly: boolean
  readonly code: "activated" | "checkout_required" | "payment_processing"
  readonly message: string
}
