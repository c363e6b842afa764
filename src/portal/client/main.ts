// The customer portal's script (decisions.md §17), built by the service (src/portal/assets.ts). A vendor's customer
// opens it from a session link; each view is its own URL, whose shell names the view, the vendor and the way back.
// Everything shown comes from `/portal/api/…` as JSON and reaches the page as text (src/web/client/dom.ts).
import {
  ApiFailure,
  type Child,
  confirmButton,
  fill,
  flash,
  h,
  jsonApi,
  link,
  ready,
  section,
  table
} from "../../web/client/dom.ts"
import { creditBalanceText, day, money, num, when } from "../../web/client/format.ts"
import { usageRow } from "../../web/client/usage.ts"
import type {
  ChangeResult,
  CheckoutResult,
  Invoice,
  Overview,
  PaymentMethod,
  Plan,
  PlanFeature,
  PortalSubscription,
  Preview,
  Price,
  Subscription
} from "./types.ts"

const VIEW = document.body.dataset.view ?? "overview"
const VENDOR = (document.body.dataset.vendor ?? "").trim()

/** The vendor's app, when the session named one: only a web address is a link (never `javascript:`). */
const RETURN_URL = ((raw: string | undefined): string | null => {
  if (raw === undefined || raw === "") return null
  try {
    const url = new URL(raw)
    return url.protocol === "https:" || url.protocol === "http:" ? url.href : null
  } catch {
    return null
  }
})(document.body.dataset.returnUrl)

// The session ended (an hour passed, signed out elsewhere): the page that says so, with the way back.
const api = jsonApi("/portal", "/portal/api", () => {
  if (VIEW === "link" || VIEW === "expired") return false
  location.assign("/portal/expired")
  return true
})

const main = () => document.getElementById("main")!

const backLink = (id = "back") =>
  RETURN_URL === null ? null : h("a", { href: RETURN_URL, id, class: "back" }, `← Back to ${VENDOR || "the app"}`)

// ------------------------------------------------------------------------------------------------------ words

const PER: Record<string, string> = {
  daily: "day",
  weekly: "week",
  monthly: "month",
  quarterly: "quarter",
  semi_annual: "half-year",
  yearly: "year",
  hourly: "hour",
  "5min": "5 minutes",
  "15min": "15 minutes",
  "30min": "30 minutes"
}

const priceText = (price: Price | null): string =>
  price === null || price.amount === 0
    ? "Free"
    : `${money(price.amount, price.currency)}${PER[price.interval] ? ` / ${PER[price.interval]}` : ""}`

const STATUS: Record<string, string> = {
  pending: "Awaiting payment",
  trialing: "Trial",
  active: "Active",
  past_due: "Past due",
  canceled: "Canceled",
  expired: "Ended",
  open: "Open",
  paid: "Paid",
  void: "Void",
  uncollectible: "Uncollectible"
}

const badge = (status: string) => h("span", { class: `status ${status}` }, STATUS[status] ?? status)

const isLive = (s: Subscription) => ["pending", "trialing", "active", "past_due"].includes(s.status)

/** `12,000 API calls per month`; no limit: `Unlimited API calls`; an on/off feature: its name. */
const featureText = (f: PlanFeature): string => {
  if (f.limit === null) return f.type === "boolean" ? f.name : f.type === undefined ? f.name : `Unlimited ${f.name}`
  const per = f.reset !== null && PER[f.reset] !== undefined ? ` per ${PER[f.reset]}` : ""
  return `${num(f.limit)} ${f.name}${per}`
}

// ---------------------------------------------------------------------------------------------------- layout

const NAV: ReadonlyArray<readonly [string, string, string]> = [
  ["overview", "/portal", "Overview"],
  ["invoices", "/portal/invoices", "Invoices"],
  ["payment-methods", "/portal/payment-methods", "Payment methods"],
  ["plans", "/portal/plans", "Plans"]
]

const layout = () => {
  const signOut = h("button", { type: "button", class: "link", id: "sign-out" }, "Sign out")
  signOut.addEventListener("click", async () => {
    await api.post("/portal/sign-out").catch(() => undefined)
    location.assign(RETURN_URL ?? "/portal/expired")
  })
  fill(
    document.getElementById("app")!,
    h(
      "header",
      null,
      h(
        "div",
        { class: "bar-top" },
        h("strong", { class: "brand", id: "vendor" }, VENDOR || "Billing"),
        h("span", { class: "muted" }, "Billing"),
        h("span", { class: "grow" }),
        backLink(),
        signOut
      ),
      h(
        "nav",
        null,
        NAV.map(([key, href, label]) =>
          h(
            "a",
            { href, class: key === VIEW ? "active" : undefined, "aria-current": key === VIEW ? "page" : undefined },
            label
          )
        )
      )
    ),
    h("div", { id: "flash", class: "flash", role: "status" }),
    h("main", { id: "main" }, h("p", { class: "muted" }, "Loading…"))
  )
}

// ----------------------------------------------------------------------------------------------------- views

const overview = async () => {
  const [o, catalog] = await Promise.all([
    api.get("/overview") as Promise<Overview>,
    (api.get("/plans") as Promise<{ plans: ReadonlyArray<Plan> }>).catch(() => ({ plans: [] }))
  ])
  const names = new Map(catalog.plans.map((p) => [p.slug, p.name]))
  const live = o.subscriptions.filter(isLive)
  // A change waiting for its payment is paid on its invoice's page: read only when there is one.
  const owed = live.some((s) => s.pendingChange !== undefined)
    ? new Map(((await api.get("/invoices")) as { invoices: ReadonlyArray<Invoice> }).invoices.map((i) => [i.id, i]))
    : new Map<string, Invoice>()
  const who = o.customer.name ?? o.customer.email ?? o.customer.id
  fill(
    main(),
    h("h1", null, "Your plan"),
    h("p", { class: "muted", id: "customer" }, "Signed in as ", h("strong", null, who), ` until ${when(o.expiresAt)}`),
    live.length === 0
      ? section(
          "Plan",
          h("p", { id: "no-plan" }, "You have no plan at the moment."),
          link("/portal/plans", "See the plans")
        )
      : live.map((s) => subscriptionCard(s, names, owed)),
    section(
      "Usage",
      o.features.length === 0
        ? h("p", { class: "muted" }, "Nothing to show yet.")
        : h(
            "div",
            { id: "usage" },
            o.features.map((f) => usageRow(f))
          )
    ),
    section(
      "Credits",
      h(
        "dl",
        { class: "facts" },
        // Bonus and purchased credits by credit system, then the account's money credit (§14).
        o.credits.map((c) => [
          h("dt", null, c.creditSystem.name),
          h("dd", { class: "money", "data-credits": c.creditSystem.slug }, num(c.balance))
        ]),
        h("dt", null, "Account credit"),
        h("dd", { id: "credit-balance" }, creditBalanceText(o.creditBalance))
      ),
      h("p", { class: "muted small" }, "Account credit pays your next invoices before your card is charged.")
    )
  )
}

/** One subscription: plan, price, period and state, with what the customer can do about it. */
const subscriptionCard = (
  s: PortalSubscription,
  names: ReadonlyMap<string, string>,
  invoices: ReadonlyMap<string, Invoice>
) => {
  const nameOf = (slug: string) => names.get(slug) ?? slug
  const facts: Array<readonly [string, Child, string?]> = [
    ["Price", h("span", { class: "money" }, priceText(s.price)), "price"],
    [
      "Current period",
      s.currentPeriodStart === null ? "—" : `${day(s.currentPeriodStart)} – ${day(s.currentPeriodEnd)}`,
      "period"
    ]
  ]
  if (s.status === "trialing" && s.trialEndsAt !== null) facts.push(["Trial ends", day(s.trialEndsAt), "trial"])
  // A renewal that was not paid: where to pay it. A first payment still to make: paid from here (below).
  if (s.status === "past_due")
    facts.push([
      "Payment",
      h("span", null, "The last payment did not go through. ", link("/portal/invoices", "See the invoice to pay")),
      "payment"
    ])
  if (s.status === "pending") facts.push(["Payment", "Waiting for the first payment.", "payment"])
  if (s.cancelAtPeriodEnd) facts.push(["Ends", `on ${day(s.currentPeriodEnd)} (canceled)`, "ends"])
  else if (s.currentPeriodEnd !== null && s.pendingChange === undefined && s.status !== "pending")
    facts.push(["Renews", `on ${day(s.currentPeriodEnd)}`, "renews"])
  if (s.scheduledChange !== undefined)
    facts.push(["Plan change", `to ${nameOf(s.scheduledChange.plan)} on ${day(s.scheduledChange.at)}`, "change"])
  if (s.pendingChange !== undefined) {
    const invoice = invoices.get(s.pendingChange.invoiceId)
    facts.push([
      "Plan change",
      h(
        "span",
        null,
        `to ${nameOf(s.pendingChange.plan)} once its invoice is paid (until ${when(s.pendingChange.expiresAt)}) `,
        invoice === undefined || invoice.status !== "open"
          ? null
          : h(
              "a",
              { href: invoice.hostedUrl, class: "pay-change" },
              `Pay ${money(invoice.amountDue, invoice.currency)}`
            )
      ),
      "change"
    ])
  }

  const id = encodeURIComponent(s.id)
  const undo = async (path: string, done: string) => {
    await api.post(`/subscriptions/${id}/${path}`)
    flash(done)
    await show()
  }
  const actions: Array<Child> = []
  // The first payment: a saved card may settle it at once (the overview is read again), else the provider's page,
  // which brings the customer back here.
  if (s.status === "pending")
    actions.push(
      Object.assign(
        button("Pay now", "pay-now", async () => {
          const r = (await api.post(`/subscriptions/${id}/checkout`)) as CheckoutResult
          if (r.checkoutUrl !== null) return location.assign(r.checkoutUrl)
          flash(r.activatedDirectly ? `Paid: your ${s.planName} plan is active.` : r.message)
          await show()
        }),
        { className: "pay-now" }
      )
    )
  if (s.cancelAtPeriodEnd)
    actions.push(button("Keep my plan", "resume", () => undo("resume", `Your ${s.planName} plan continues.`)))
  if (s.scheduledChange !== undefined || s.pendingChange !== undefined)
    actions.push(
      button(`Keep ${s.planName} instead`, "cancel-change", () =>
        undo("cancel-change", `The plan change is withdrawn.`)
      )
    )
  if (isLive(s)) actions.push(link("/portal/plans", "Change plan"))
  const cancel = isLive(s) && !s.cancelAtPeriodEnd ? cancelStep(s) : null
  return h(
    "section",
    { class: "card subscription", "data-subscription": s.id },
    h("h2", null, h("span", { class: "plan-name" }, s.planName), " ", badge(s.status)),
    h(
      "dl",
      { class: "facts" },
      facts.map(([label, value, key]) => [h("dt", null, label), h("dd", { "data-fact": key }, value)])
    ),
    h("div", { class: "actions" }, actions, cancel?.start),
    cancel?.confirm
  )
}

/** A button that acts once, showing the failure if it fails. */
const button = (label: string, cls: string, action: () => Promise<void>) => {
  const b = h("button", { type: "button", class: `secondary ${cls}` }, label) as HTMLButtonElement
  b.addEventListener("click", async () => {
    b.disabled = true
    try {
      await action()
    } catch (error) {
      flash((error as Error).message, true)
    } finally {
      b.disabled = false
    }
  })
  return b
}

/** Cancel at period end, in two steps: what happens, then the confirmation. */
const cancelStep = (s: PortalSubscription) => {
  const start = h("button", { type: "button", class: "danger cancel" }, "Cancel plan") as HTMLButtonElement
  const keep = h("button", { type: "button", class: "secondary" }, "Keep my plan")
  const confirm = h(
    "div",
    { class: "confirm", hidden: true, role: "alertdialog", "aria-label": "Cancel your plan" },
    h(
      "p",
      null,
      s.currentPeriodEnd === null
        ? `Your ${s.planName} plan ends now.`
        : `Your ${s.planName} plan stays in force until ${day(s.currentPeriodEnd)}, then ends. You can undo this until then.`
    ),
    h(
      "div",
      { class: "actions" },
      button("Confirm cancellation", "danger confirm-cancel", async () => {
        await api.post(`/subscriptions/${encodeURIComponent(s.id)}/cancel`)
        flash(`Canceled: your ${s.planName} plan ends on ${day(s.currentPeriodEnd)}.`)
        await show()
      }),
      keep
    )
  )
  start.addEventListener("click", () => {
    confirm.hidden = false
    start.hidden = true
  })
  keep.addEventListener("click", () => {
    confirm.hidden = true
    start.hidden = false
  })
  return { start, confirm }
}

const invoices = async () => {
  const { invoices: list } = (await api.get("/invoices")) as { invoices: ReadonlyArray<Invoice> }
  fill(
    main(),
    h("h1", null, "Invoices"),
    section(
      "Your invoices",
      table(
        ["Number", "Date", "Status", "Total", "Amount due", "Documents"],
        list.map((i) => [
          h("strong", { class: "number" }, i.number),
          day(i.createdAt),
          badge(i.status),
          h("span", { class: "money total" }, money(i.total, i.currency)),
          h("span", { class: "money due" }, money(i.amountDue, i.currency)),
          h(
            "span",
            { class: "documents" },
            h(
              "a",
              { href: i.hostedUrl, target: "_blank", rel: "noopener" },
              i.status === "open" && i.amountDue > 0 ? "View and pay" : "View"
            ),
            " · ",
            h("a", { href: i.pdfUrl, target: "_blank", rel: "noopener" }, "PDF")
          )
        ]),
        "No invoices yet."
      )
    )
  )
}

const capital = (word: string) => word.charAt(0).toUpperCase() + word.slice(1)

const methodLabel = (m: PaymentMethod) =>
  `${capital(m.brand ?? (m.type === "card" ? "card" : m.type))}${m.last4 !== null ? ` •••• ${m.last4}` : ""}`

const paymentMethods = async () => {
  const list = h("div", { id: "methods" })
  const draw = (methods: ReadonlyArray<PaymentMethod>) =>
    fill(
      list,
      methods.length === 0
        ? h("p", { class: "muted" }, "No payment methods saved.")
        : methods.map((m) =>
            h(
              "div",
              { class: "method", "data-method": m.id },
              h(
                "div",
                null,
                h("strong", null, methodLabel(m)),
                " ",
                m.isDefault ? h("span", { class: "status active default" }, "Default") : null,
                h(
                  "div",
                  { class: "muted" },
                  m.expMonth !== null ? `Expires ${String(m.expMonth).padStart(2, "0")}/${m.expYear}` : m.type
                )
              ),
              h(
                "div",
                { class: "actions" },
                m.isDefault
                  ? null
                  : button("Make default", "make-default", async () => {
                      const answer = await api.post(`/payment-methods/${encodeURIComponent(m.id)}/default`)
                      flash(`${methodLabel(m)} is now your default payment method.`)
                      draw(answer.paymentMethods)
                    }),
                confirmButton("Remove", async () => {
                  const answer = await api.post(`/payment-methods/${encodeURIComponent(m.id)}/remove`)
                  flash(`${methodLabel(m)} removed.`)
                  draw(answer.paymentMethods)
                })
              )
            )
          )
    )
  const { paymentMethods: methods } = (await api.get("/payment-methods")) as {
    paymentMethods: ReadonlyArray<PaymentMethod>
  }
  draw(methods)
  // The provider's own page saves the card, then brings the customer back here.
  const add = button("Add a payment method", "add-method", async () => {
    const { url } = await api.post("/payment-methods/setup")
    location.assign(url)
  })
  add.id = "add-method"
  add.className = "add-method"
  fill(
    main(),
    h("h1", null, "Payment methods"),
    section("Saved payment methods", list, h("div", { class: "actions" }, add))
  )
}

const plans = async () => {
  const grid = h("div", { class: "plans", id: "plans" })
  const panel = h("section", { class: "card", id: "change", hidden: true, "aria-live": "polite" })
  const draw = async () => {
    const { plans: list } = (await api.get("/plans")) as { plans: ReadonlyArray<Plan> }
    fill(
      grid,
      list.length === 0
        ? h("p", { class: "muted" }, "No plans to choose from.")
        : list.map((p) =>
            h(
              "article",
              { class: p.current ? "card plan current" : "card plan", "data-plan": p.slug },
              h("h2", null, p.name),
              h("p", { class: "price money" }, priceText(p.price)),
              h(
                "ul",
                { class: "features" },
                p.features.map((f) => h("li", { "data-feature": f.feature }, featureText(f)))
              ),
              p.current
                ? h("p", { class: "status active current-plan" }, "Your plan")
                : button("Preview change", "preview", () => preview(p))
            )
          )
    )
    return list
  }
  const preview = async (plan: Plan) => {
    const p = (await api.post("/plans/preview", { plan: plan.slug })) as Preview
    const cur = p.currency
    const confirm = button("Confirm change", "confirm-change", async () => {
      const result = (await api.post("/plans/change", { plan: plan.slug })) as ChangeResult
      const list = await draw()
      outcome(plan, result, list)
    })
    confirm.className = "confirm-change"
    const back = h("button", { type: "button", class: "secondary" }, "Back")
    back.addEventListener("click", () => {
      panel.hidden = true
    })
    fill(
      panel,
      h("h2", null, p.previousPlan === null ? `Subscribe to ${plan.name}` : `Change to ${plan.name}`),
      h(
        "p",
        { id: "effective", "data-scheduled": String(p.scheduled) },
        p.scheduled
          ? `Scheduled: takes effect on ${day(p.effectiveAt)}, at the end of your current period. Nothing is charged now.`
          : `Takes effect now (${when(p.effectiveAt)}).`
      ),
      // A scheduled change has no lines: its sentence already says nothing is charged now.
      p.scheduled && p.lines.length === 0
        ? null
        : table(
            ["Description", "Period", "Amount"],
            p.lines.map((l) => [
              l.description,
              `${day(l.periodStart)} – ${day(l.periodEnd)}`,
              h("span", { class: "money" }, money(l.amount, cur))
            ]),
            "No charge now."
          ),
      h(
        "dl",
        { class: "facts totals" },
        total("Subtotal", "subtotal", money(p.subtotal, cur)),
        total("Discount", "discount", money(p.discount === 0 ? 0 : -p.discount, cur)),
        total("Tax", "tax", money(p.tax, cur)),
        total("Total", "total", money(p.total, cur)),
        p.creditApplied > 0 ? total("Paid from account credit", "credit-applied", money(-p.creditApplied, cur)) : null,
        total("Amount due", "amount-due", money(p.amountDue, cur)),
        p.creditBalanceAfter > 0
          ? total("Account credit afterwards", "credit-after", money(p.creditBalanceAfter, cur))
          : null
      ),
      h("div", { class: "actions" }, confirm, back)
    )
    panel.hidden = false
    panel.scrollIntoView({ block: "nearest" })
  }
  const outcome = (plan: Plan, r: ChangeResult, list: ReadonlyArray<Plan>) => {
    const nameOf = (slug: string) => list.find((p) => p.slug === slug)?.name ?? slug
    const s = r.subscription
    const [kind, text, extra]: readonly [string, string, Child] =
      r.checkoutUrl !== null
        ? [
            "checkout",
            r.invoice !== undefined
              ? `To complete the change to ${plan.name}, pay ${money(r.invoice.amountDue, r.invoice.currency)}. Your current plan stays in force until then.`
              : `To complete the change to ${plan.name}, pay on the next page.`,
            h("a", { href: r.checkoutUrl, id: "pay-change", class: "button" }, "Pay now")
          ]
        : s.scheduledChange !== undefined
          ? [
              "scheduled",
              `Scheduled: your plan changes to ${nameOf(s.scheduledChange.plan)} on ${day(s.scheduledChange.at)}.`,
              null
            ]
          : ["changed", `Changed: you are now on ${nameOf(s.plan)}.`, null]
    fill(
      panel,
      h("h2", null, kind === "checkout" ? "One more step" : "Done"),
      h("p", { id: "outcome", "data-outcome": kind }, text),
      extra,
      h("p", null, link("/portal", "Back to your plan"))
    )
  }
  fill(
    main(),
    h("h1", null, "Plans"),
    h("p", { class: "muted" }, "Preview a change to see what it costs before you confirm it."),
    panel,
    grid
  )
  await draw()
}

const total = (label: string, key: string, value: string) => [
  h("dt", null, label),
  h("dd", { "data-total": key, class: "money" }, value)
]

// ------------------------------------------------------------------------------------- the link, the end

/** The vendor's link: redeemed once by a same-origin POST (the cookie comes back), then the overview. */
const redeem = async () => {
  const token = decodeURIComponent(location.pathname.split("/").filter((s) => s !== "")[2] ?? "")
  const message = h("p", { id: "link-status" }, "Opening your billing page…")
  document
    .getElementById("app")!
    .replaceChildren(h("div", { class: "card notice" }, h("h1", null, VENDOR || "Billing"), message))
  try {
    await api.post("/portal/link", { token })
    location.replace("/portal")
  } catch (error) {
    message.textContent =
      error instanceof ApiFailure && error.status === 401
        ? "This link has expired or was already used. Open billing again from the app to get a new one."
        : (error as Error).message
    message.className = "flash error"
  }
}

const expired = () =>
  document
    .getElementById("app")!
    .replaceChildren(
      h(
        "div",
        { class: "card notice", id: "expired" },
        h("h1", null, "Your billing session has ended"),
        h("p", null, "Open billing again from the app you came from to continue."),
        backLink()
      )
    )

// ---------------------------------------------------------------------------------------------------- start

const VIEWS: Record<string, () => Promise<void>> = {
  overview,
  invoices,
  "payment-methods": paymentMethods,
  plans
}

/**
 * Back from the provider's page (its callback adds `status`): what happened there, said once; the address is then
 * tidied so a reload does not say it again.
 */
const returned = () => {
  const params = new URLSearchParams(location.search)
  const status = params.get("status")
  if (status === null) return
  const saved = VIEW === "payment-methods"
  if (status === "success") flash(saved ? "Your payment method is saved." : "Payment received. Thank you.")
  else flash(saved ? "The payment method was not saved." : "The payment did not go through.", true)
  history.replaceState(null, "", location.pathname)
}

const show = async () => {
  try {
    await VIEWS[VIEW]?.()
  } catch (error) {
    if (!(error instanceof ApiFailure && error.status === 401)) flash((error as Error).message, true)
  }
  ready()
}

const start = async () => {
  if (VIEW === "link") return redeem().finally(ready)
  if (VIEW === "expired") return (expired(), ready())
  layout()
  returned()
  await show()
}

void start()
