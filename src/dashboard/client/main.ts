// The dashboard's script: one bundle (with uPlot), built by the service (src/dashboard/assets.ts). Each page is its
// own URL; the script reads the path, fetches JSON from `/dashboard/api/…` and renders it as text.
import { billingProfile } from "./billingProfile.ts"
import { dailyChart } from "./chart.ts"
import { billingDetailsSection, couponsSection, discountSection } from "./discounts.ts"
import {
  ApiFailure,
  confirmButton,
  creditBalanceText,
  customerHref,
  flash,
  get,
  h,
  link,
  num,
  post,
  ready,
  section,
  table,
  usageRow,
  when
} from "./dom.ts"
import { money } from "./format.ts"

const main = () => document.getElementById("main")!

/** A plan change waiting for the period end or for its payment, in words. */
const planChangeText = (s: any): string =>
  s.pendingChange !== undefined
    ? `to ${s.pendingChange.plan} once invoice ${s.pendingChange.invoiceId} is paid (lapses ${when(s.pendingChange.expiresAt)})`
    : s.scheduledChange !== undefined
      ? `to ${s.scheduledChange.plan} at ${when(s.scheduledChange.at)}`
      : "—"

const NAV: ReadonlyArray<readonly [string, string, string]> = [
  ["overview", "/dashboard", "Overview"],
  ["customers", "/dashboard/customers", "Customers"],
  ["catalog", "/dashboard/catalog", "Catalog"],
  ["invoices", "/dashboard/invoices", "Invoices"],
  ["webhooks", "/dashboard/webhooks", "Webhooks"],
  ["keys", "/dashboard/keys", "API keys"],
  ["billing-profile", "/dashboard/billing-profile", "Billing profile"]
]

const layout = (view: string) => {
  const org = document.body.dataset.org ?? ""
  const active = view === "customer" ? "customers" : view
  const signOut = h("button", { type: "button", class: "link" }, "Sign out")
  signOut.addEventListener("click", async () => {
    await post("/dashboard/sign-out").catch(() => undefined)
    location.assign("/dashboard/sign-in")
  })
  document.getElementById("app")!.replaceChildren(
    h(
      "header",
      null,
      h("strong", { class: "brand" }, "Billing"),
      h("span", { class: "org" }, org),
      h(
        "nav",
        null,
        NAV.map(([key, href, label]) => h("a", { href, class: key === active ? "active" : undefined }, label))
      ),
      signOut
    ),
    h("div", { id: "flash", class: "flash", role: "status" }),
    h("main", { id: "main" }, h("p", { class: "muted" }, "Loading…"))
  )
}

// ---------------------------------------------------------------------------------------------------------- views

const overview = async () => {
  const [o, failed] = await Promise.all([get("/overview"), get("/v1/events?type=invoice.payment_failed&limit=20")])
  const chart = h("div", { class: "chart", id: "usage-chart" })
  const empty =
    (o.subscriptions.active ?? 0) + (o.subscriptions.trialing ?? 0) + (o.subscriptions.past_due ?? 0) === 0 &&
    o.usage.records.every((n: number) => n === 0)
  main().replaceChildren(
    h("h1", null, "Overview"),
    empty
      ? h(
          "p",
          { class: "card muted", id: "empty-hint" },
          "Nothing here yet. Sync a catalog and track usage through the API, or fill this sandbox organization with ",
          "sample data: ",
          h("code", null, "npm run cli -- sample-data <org>")
        )
      : "",
    h(
      "div",
      { class: "stats" },
      stat("Active subscriptions", o.subscriptions.active ?? 0, "active"),
      stat("Trialing", o.subscriptions.trialing ?? 0, "trialing"),
      stat("Past due", o.subscriptions.past_due ?? 0, "past-due")
    ),
    section(
      "Recurring revenue (monthly)",
      table(
        ["Currency", "Per month"],
        o.recurringRevenue.map((r: any) => [r.currency, h("span", { class: "money" }, money(r.monthly, r.currency))]),
        "No recurring revenue yet"
      ),
      h("p", { class: "muted" }, "Active and past-due subscriptions in grace; trials excluded.")
    ),
    section("Usage events, last 30 days (UTC)", chart),
    section(
      "Needs attention: past-due subscriptions",
      table(
        ["Customer", "Plan", "Grace ends"],
        o.pastDue.map((p: any) => [
          link(customerHref(p.customerId), p.name ?? p.email ?? p.externalId ?? p.customerId),
          p.plan,
          when(p.graceEndsAt)
        ]),
        "No past-due subscriptions"
      )
    ),
    section(
      "Needs attention: failed payments",
      table(
        ["When", "Customer", "Invoice", "Amount due"],
        failed.data.map((e: any) => [
          when(e.createdAt),
          link(customerHref(e.data.customerId), e.data.customerId),
          e.data.number ?? e.data.id,
          money(e.data.amountDue ?? e.data.total, e.data.currency)
        ]),
        "No failed payments"
      )
    )
  )
  dailyChart(chart, o.usage.days, [{ label: "Usage events", values: o.usage.records }])
}

const stat = (label: string, value: number, id: string) =>
  h("div", { class: "stat", id: `stat-${id}` }, h("div", { class: "value" }, String(value)), h("div", null, label))

const PAGE = 50

const customers = async () => {
  const params = new URLSearchParams(location.search)
  const q = (params.get("q") ?? "").trim()
  const page = Math.max(0, Number(params.get("page") ?? 0) || 0)
  const query = new URLSearchParams({ limit: String(PAGE), offset: String(page * PAGE) })
  if (q !== "") query.set("search", q)
  const [list, exact] = await Promise.all([
    get(`/v1/customers?${query}`),
    // Search by id too: an id (or external id) that names one customer.
    q !== "" && !/\s/.test(q) && page === 0
      ? get(`/v1/customers/${encodeURIComponent(q)}`).catch(() => null)
      : Promise.resolve(null)
  ])
  const rows: Array<any> = [...list.data]
  if (exact !== null && !rows.some((c) => c.id === exact.id)) rows.unshift(exact)
  const total = list.total + (rows.length > list.data.length ? 1 : 0)
  const pageLink = (p: number, label: string) => {
    const next = new URLSearchParams(params)
    next.set("page", String(p))
    return link(`/dashboard/customers?${next}`, label)
  }
  main().replaceChildren(
    h("h1", null, "Customers"),
    h(
      "form",
      { method: "get", action: "/dashboard/customers", class: "search" },
      h("input", {
        name: "q",
        type: "search",
        value: q,
        placeholder: "Id, external id, email or name",
        "aria-label": "Search customers"
      }),
      h("button", { type: "submit" }, "Search")
    ),
    h(
      "p",
      { class: "muted", id: "customer-count" },
      total === 0 ? "No customers" : `${page * PAGE + 1}–${page * PAGE + rows.length} of ${total.toLocaleString("en")}`
    ),
    table(
      ["Name", "Email", "External id", "Id", "Created"],
      rows.map((c) => [
        link(customerHref(c.id), c.name ?? "(no name)"),
        c.email ?? "—",
        c.externalId ?? "—",
        c.id,
        when(c.createdAt)
      ]),
      "No customers match"
    ),
    h(
      "p",
      { class: "pager" },
      page > 0 ? pageLink(page - 1, "← Previous") : null,
      (page + 1) * PAGE < list.total ? pageLink(page + 1, "Next →") : null
    )
  )
}

const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC"

const customer = async () => {
  const ref = decodeURIComponent(location.pathname.split("/").filter((s) => s !== "")[2] ?? "")
  let c: any
  try {
    c = await get(`/v1/customers/${encodeURIComponent(ref)}`)
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 404) {
      main().replaceChildren(h("h1", null, "Customer not found"), h("p", { id: "not-found" }, "No such customer."))
      return
    }
    throw error
  }
  const id = encodeURIComponent(c.id)
  const [subs, balances, invoices, wallet, ents, events, alerts, systems, discount] = await Promise.all([
    get(`/v1/subscriptions?customer=${id}`),
    get(`/customers/${id}/balances`),
    get(`/v1/billing/invoices?customer=${id}`),
    get(`/v1/wallet?customer=${id}`),
    get(`/customers/${id}/entities`),
    get(`/v1/events?customer=${id}&limit=20`),
    get(`/v1/events?customer=${id}&type=usage.threshold_reached&limit=20`),
    get(`/v1/credit-systems`),
    get(`/customers/${id}/discount`)
  ])
  const chart = h("div", { class: "chart", id: "customer-chart" })
  // Every zone the browser knows, the browser's own first (selected); "UTC" is not always in the list.
  const known: Array<string> = (Intl as any).supportedValuesOf?.("timeZone") ?? []
  const zones = [...new Set([browserZone(), "UTC", ...known])]
  const zone = h(
    "select",
    { id: "timezone", "aria-label": "Time zone" },
    zones.map((z) => h("option", { value: z }, z))
  ) as HTMLSelectElement
  zone.value = browserZone()
  const range = h(
    "select",
    { id: "range", "aria-label": "Range" },
    h("option", { value: "7d" }, "Last 7 days"),
    h("option", { value: "30d" }, "Last 30 days"),
    h("option", { value: "90d" }, "Last 90 days")
  ) as HTMLSelectElement
  range.value = "30d"
  const totals = h("p", { class: "muted", id: "usage-totals" })
  let plot: { destroy(): void } | undefined
  const drawUsage = async () => {
    const history = await get(
      `/v1/customers/${id}/usage/history?range=${range.value}&timezone=${encodeURIComponent(zone.value)}&groupBy=feature`
    )
    plot?.destroy()
    const days = history.series.map((b: any) => b.bucket)
    const series =
      history.breakdown.length > 0
        ? history.breakdown.map((b: any) => ({
            label: b.feature.name,
            values: b.series.map((x: any) => x.value)
          }))
        : [{ label: "Usage", values: history.series.map((x: any) => x.value) }]
    plot = dailyChart(chart, days, series)
    totals.textContent = `${history.query.range.from} to ${history.query.range.to} (${history.query.timezone}): ${num(history.totals.records)} usage events`
  }
  zone.addEventListener("change", () => void drawUsage().catch((e) => flash(e.message, true)))
  range.addEventListener("change", () => void drawUsage().catch((e) => flash(e.message, true)))

  const grantSystem = h(
    "select",
    { name: "creditSystem", id: "grant-system", "aria-label": "Credit system" },
    systems.creditSystems?.map((s: any) => h("option", { value: s.slug }, `${s.name} (${s.slug})`)) ?? []
  ) as HTMLSelectElement
  const grantAmount = h("input", {
    name: "amount",
    id: "grant-amount",
    type: "number",
    min: "0",
    step: "any",
    required: true,
    placeholder: "Credits"
  }) as HTMLInputElement
  const grantForm = h(
    "form",
    { class: "inline", id: "grant-form" },
    grantSystem,
    grantAmount,
    h("button", { type: "submit" }, "Grant bonus credits")
  )
  grantForm.addEventListener("submit", async (event) => {
    event.preventDefault()
    try {
      const granted = await post("/credits/grant", {
        customer: c.id,
        creditSystem: grantSystem.value,
        amount: Number(grantAmount.value)
      })
      flash(
        `Granted. ${granted.creditSystem}: bonus ${num(granted.bonusBalance)}, purchased ${num(granted.addonBalance)}`
      )
      grantAmount.value = ""
      await renderBalances()
    } catch (error) {
      flash((error as Error).message, true)
    }
  })

  const balanceBox = h("div", { id: "balances" })
  const renderBalances = async (data?: any) => {
    const b = data ?? (await get(`/customers/${id}/balances`))
    balanceBox.replaceChildren(
      ...(b.balances.length === 0 ? [h("p", { class: "muted" }, "No features")] : b.balances.map(usageRow))
    )
  }
  await renderBalances(balances)

  main().replaceChildren(
    h("p", { class: "crumbs" }, link("/dashboard/customers", "Customers"), " / ", c.id),
    h("h1", { id: "customer-name" }, c.name ?? c.email ?? c.externalId ?? c.id),
    h(
      "dl",
      { class: "facts" },
      h("dt", null, "Email"),
      h("dd", null, c.email ?? "—"),
      h("dt", null, "External id"),
      h("dd", null, c.externalId ?? "—"),
      h("dt", null, "Id"),
      h("dd", null, c.id),
      h("dt", null, "Created"),
      h("dd", null, when(c.createdAt)),
      h("dt", null, "Credit balance"),
      h("dd", { id: "credit-balance" }, creditBalanceText(c.billing?.creditBalance))
    ),
    billingDetailsSection(c),
    discountSection(c.id, discount.discount),
    section(
      "Subscriptions",
      table(
        ["Plan", "Status", "Current period", "Trial ends", "Canceled", "Plan change", ""],
        subs.subscriptions.map((s: any) => [
          s.plan,
          h("span", { class: `status ${s.status}` }, s.status),
          `${when(s.currentPeriodStart)} – ${when(s.currentPeriodEnd)}`,
          when(s.trialEndsAt),
          s.canceledAt !== null ? when(s.canceledAt) : s.cancelAtPeriodEnd ? "at period end" : "—",
          h("span", { class: "plan-change", "data-subscription": s.id }, planChangeText(s)),
          h(
            "span",
            null,
            s.scheduledChange !== undefined || s.pendingChange !== undefined
              ? confirmButton(
                  "Withdraw change",
                  async () => {
                    await post(`/v1/subscriptions/${encodeURIComponent(s.id)}/cancel-change`)
                    flash(`Withdrew the plan change of ${s.plan}`)
                    await render()
                  },
                  "secondary"
                )
              : null,
            ["pending", "trialing", "active", "past_due"].includes(s.status)
              ? confirmButton("Cancel", async () => {
                  await post(`/v1/subscriptions/${encodeURIComponent(s.id)}/cancel`)
                  flash(`Canceled ${s.plan}`)
                  await render()
                })
              : null
          )
        ]),
        "No subscriptions"
      )
    ),
    section("Balances", balanceBox, h("h3", null, "Bonus credits"), grantForm),
    section("Usage history", h("div", { class: "controls" }, range, zone), totals, chart),
    section(
      "Invoices",
      table(
        ["Number", "Status", "Total", "Due", "Created"],
        invoices.invoices.map((i: any) => [
          link(`/dashboard/invoices#${i.id}`, i.number),
          i.status,
          money(i.total, i.currency),
          money(i.amountDue, i.currency),
          when(i.createdAt)
        ]),
        "No invoices"
      )
    ),
    section(
      "Payment methods",
      table(
        ["Provider", "Type", "Card", "Expires", "Default"],
        wallet.paymentMethods.map((m: any) => [
          m.provider,
          m.type,
          `${m.brand ?? ""} ${m.last4 ? `•••• ${m.last4}` : ""}`.trim() || "—",
          m.expMonth ? `${m.expMonth}/${m.expYear}` : "—",
          m.isDefault ? "yes" : ""
        ]),
        "No payment methods"
      )
    ),
    section(
      "Entities",
      table(
        ["Entity", "Feature", "Name", "Email", "Status", "Added"],
        ents.entities.map((e: any) => [
          e.entity,
          e.feature,
          e.name ?? "—",
          e.email ?? "—",
          e.status,
          when(e.createdAt)
        ]),
        "No entities"
      )
    ),
    section(
      "Threshold alerts",
      table(
        ["When", "Feature", "Threshold", "Usage", "Limit"],
        alerts.data.map((e: any) => [
          when(e.createdAt),
          String(e.data.feature?.slug ?? e.data.feature ?? ""),
          `${e.data.threshold}%`,
          num(e.data.usage),
          num(e.data.limit)
        ]),
        "No threshold alerts"
      )
    ),
    section("Recent events", eventsTable(events.data))
  )
  await drawUsage()
}

const eventsTable = (events: ReadonlyArray<any>) =>
  table(
    ["When", "Type", "Id", ""],
    events.map((e) => [
      when(e.createdAt),
      e.type,
      h("code", null, e.id),
      h(
        "button",
        {
          type: "button",
          class: "small",
          onclick: async (event: Event) => {
            const button = event.currentTarget as HTMLButtonElement
            button.disabled = true
            try {
              const resent = await post(`/v1/events/${encodeURIComponent(e.id)}/resend`)
              flash(`Resent ${e.id} to ${(resent.deliveries ?? resent.endpoints ?? []).length} endpoint(s)`)
            } catch (error) {
              flash((error as Error).message, true)
            } finally {
              button.disabled = false
            }
          }
        },
        "Resend"
      )
    ]),
    "No events"
  )

const catalog = async () => {
  const c = await get("/catalog")
  main().replaceChildren(
    h("h1", null, "Catalog"),
    section(
      "Features",
      table(
        ["Name", "Slug", "Type", "Meter", "Unit"],
        c.features.map((f: any) => [
          f.name,
          h("code", null, f.slug),
          f.type,
          f.type === "boolean" ? "—" : f.meterType,
          f.unit ?? "—"
        ]),
        "No features: sync a catalog (POST /v1/sync)"
      )
    ),
    section(
      "Plans",
      c.plans.length === 0
        ? h("p", { class: "muted" }, "No plans")
        : c.plans.map((p: any) =>
            h(
              "div",
              { class: "plan", "data-plan": p.slug },
              h(
                "h3",
                null,
                `${p.name} `,
                h("code", null, p.slug),
                " ",
                h("span", { class: "money" }, Number(p.price) === 0 ? "free" : money(p.price, p.currency)),
                p.interval ? ` / ${p.interval}` : "",
                p.billingType === "one_time" ? " (one time)" : "",
                p.autoEnable ? " · auto-enabled" : "",
                p.trialDays ? ` · ${p.trialDays}-day trial` : ""
              ),
              table(
                ["Feature", "Limit", "Reset", "Model", "Price per unit", "Overage", "Tiers"],
                p.features.map((f: any) => [
                  f.slug,
                  f.enabled === false ? "off" : num(f.limit),
                  f.reset ?? "—",
                  f.usageModel,
                  f.pricePerUnit === null
                    ? "—"
                    : `${money(f.pricePerUnit, p.currency)} / ${f.billingUnits > 1 ? `${f.billingUnits} units` : "unit"}`,
                  f.overage === "charge" ? `charge ${money(f.overagePrice, p.currency)}` : f.overage,
                  f.tiers === null
                    ? "—"
                    : f.tiers
                        .map(
                          (t: any) =>
                            `to ${num(t.upTo ?? t.to ?? null)}: ${money(t.unitPrice ?? 0, p.currency)}${Number(t.flatFee ?? 0) > 0 ? ` + ${money(t.flatFee, p.currency)}` : ""}`
                        )
                        .join("; ")
                ]),
                "No features"
              )
            )
          )
    ),
    section(
      "Credit systems",
      table(
        ["Name", "Slug", "Features (credits per unit)"],
        c.creditSystems.map((s: any) => [
          s.name,
          h("code", null, s.slug),
          s.features.map((f: any) => `${f.feature}: ${num(f.creditCost)}`).join(", ")
        ]),
        "No credit systems"
      )
    ),
    couponsSection(c.coupons ?? []),
    section(
      "Tax rates",
      table(
        ["Name", "Slug", "Percentage", "Kind", "Country", "State"],
        (c.taxRates ?? []).map((t: any) => [
          t.name,
          h("code", null, t.slug),
          `${num(t.percentage)}%`,
          t.inclusive ? "inclusive" : "exclusive",
          t.country,
          t.state ?? "—"
        ]),
        "No tax rates (taxRates in POST /v1/sync)"
      )
    ),
    section(
      "Credit packs",
      table(
        ["Name", "Slug", "Credits", "Price", "Credit system", "Active"],
        c.creditPacks.map((p: any) => [
          p.name,
          h("code", null, p.slug),
          num(p.credits),
          money(p.price, p.currency),
          p.creditSystem ?? "—",
          p.isActive ? "yes" : "no"
        ]),
        "No credit packs"
      )
    )
  )
}

const STATUSES = ["all", "draft", "open", "paid", "void", "uncollectible"]

const invoicesView = async () => {
  const params = new URLSearchParams(location.search)
  const status = STATUSES.includes(params.get("status") ?? "") ? params.get("status")! : "all"
  const list = await get("/v1/billing/invoices")
  const shown = list.invoices.filter((i: any) => status === "all" || i.status === status)
  main().replaceChildren(
    h("h1", null, "Invoices"),
    h(
      "p",
      { class: "filters" },
      STATUSES.map((s) =>
        h("a", { href: `/dashboard/invoices?status=${s}`, class: s === status ? "active" : undefined }, s)
      )
    ),
    shown.length === 0
      ? h("p", { class: "muted" }, "No invoices")
      : h(
          "div",
          { id: "invoice-list" },
          shown.map((i: any) =>
            h(
              "details",
              { class: "invoice card", id: i.id, open: location.hash === `#${i.id}` },
              h(
                "summary",
                null,
                h("strong", null, i.number),
                ` · ${i.status} · `,
                h("span", { class: "money" }, money(i.total, i.currency)),
                ` · due ${money(i.amountDue, i.currency)} · `,
                link(customerHref(i.customerId), i.customerId),
                ` · ${when(i.createdAt)}`
              ),
              table(
                ["Feature", "Description", "Quantity", "Unit price", "Amount", "Discounts", "Taxes", "Period"],
                i.lines.map((l: any) => [
                  l.feature,
                  l.description,
                  num(l.quantity),
                  money(l.unitPrice, i.currency),
                  money(l.amount, i.currency),
                  (l.discounts ?? []).map((d: any) => `${d.coupon} −${money(d.amount, i.currency)}`).join("; ") || "—",
                  (l.taxes ?? [])
                    .map(
                      (t: any) =>
                        `${t.name} ${num(t.percentage)}%${t.inclusive ? " incl." : ""} ${money(t.amount, i.currency)}`
                    )
                    .join("; ") || "—",
                  `${when(l.periodStart)} – ${when(l.periodEnd)}`
                ]),
                "No lines"
              ),
              i.lines
                .filter((l: any) => l.tierBreakdown.length > 0)
                .map((l: any) =>
                  h(
                    "div",
                    { class: "tiers" },
                    h("h4", null, `Tiers of ${l.feature}`),
                    table(
                      ["Tier", "Units", "Unit price", "Flat fee", "Amount"],
                      l.tierBreakdown.map((t: any) => [
                        String(t.tier + 1),
                        num(t.units),
                        money(t.unitPrice, i.currency),
                        money(t.flatFee, i.currency),
                        money(t.amount, i.currency)
                      ])
                    )
                  )
                ),
              h(
                "p",
                { class: "muted" },
                `Subtotal ${money(i.subtotal, i.currency)} · discount ${money(i.discount ?? 0, i.currency)} · tax ${money(i.tax ?? 0, i.currency)} · total ${money(i.total, i.currency)} · paid ${money(i.amountPaid, i.currency)} · refunded ${money(i.amountRefunded, i.currency)}`
              ),
              i.taxNote ? h("p", { class: "muted" }, i.taxNote) : null,
              i.hostedUrl
                ? h(
                    "p",
                    { class: "documents" },
                    h("a", { href: i.hostedUrl, target: "_blank", rel: "noopener noreferrer" }, "Hosted page"),
                    " · ",
                    h("a", { href: `${i.hostedUrl}/pdf`, target: "_blank", rel: "noopener noreferrer" }, "PDF")
                  )
                : null
            )
          )
        )
  )
}

const webhooks = async () => {
  const [endpoints, events] = await Promise.all([get("/v1/webhook-endpoints?limit=100"), get("/v1/events?limit=50")])
  const deliveries = h("div", { id: "deliveries" })
  const showDeliveries = async (endpoint: any) => {
    const list = await get(`/v1/webhook-endpoints/${encodeURIComponent(endpoint.id)}/deliveries?limit=50`)
    deliveries.replaceChildren(
      h("h3", null, `Deliveries to ${endpoint.url}`),
      table(
        ["When", "Event", "Type", "Attempt", "Status", "Response", "Next attempt", ""],
        list.data.map((a: any) => [
          when(a.createdAt),
          h("code", null, a.eventId),
          a.eventType,
          String(a.attempt),
          h("span", { class: `status ${a.status}` }, a.status),
          a.responseStatus === null ? (a.error ?? "no answer") : `${a.responseStatus} (${a.durationMs} ms)`,
          when(a.nextAttemptAt),
          h(
            "button",
            {
              type: "button",
              class: "small",
              onclick: async () => {
                try {
                  await post(`/v1/events/${encodeURIComponent(a.eventId)}/resend`)
                  flash(`Resent ${a.eventId}`)
                } catch (error) {
                  flash((error as Error).message, true)
                }
              }
            },
            "Resend"
          )
        ]),
        "No deliveries yet"
      )
    )
  }
  main().replaceChildren(
    h("h1", null, "Webhooks"),
    section(
      "Endpoints",
      table(
        ["URL", "Events", "Enabled", "Created", ""],
        endpoints.data.map((e: any) => [
          e.url,
          e.events.length > 6 ? `${e.events.length} types` : e.events.join(", "),
          e.enabled ? "yes" : "no",
          when(e.createdAt),
          h(
            "button",
            {
              type: "button",
              class: "small",
              onclick: () => void showDeliveries(e).catch((x) => flash(x.message, true))
            },
            "Deliveries"
          )
        ]),
        "No endpoints: register one with POST /v1/webhook-endpoints"
      ),
      deliveries
    ),
    section("Recent events", eventsTable(events.data))
  )
}

const keys = async () => {
  const shownOnce = h("div", { id: "new-key" })
  const list = h("div", { id: "key-list" })
  const render = async () => {
    const k = await get("/keys")
    list.replaceChildren(
      table(
        ["Id", "Prefix", "Environment", "Created", "Revoked", ""],
        k.keys.map((key: any) => [
          h("code", null, key.id),
          `${key.displayPrefix}…`,
          key.environment,
          when(key.createdAt),
          key.revokedAt === null ? "—" : when(key.revokedAt),
          key.revokedAt === null
            ? h(
                "span",
                null,
                key.id === k.current ? h("span", { class: "muted" }, "this session's key ") : null,
                confirmButton("Revoke", async () => {
                  await post(`/keys/${encodeURIComponent(key.id)}/revoke`)
                  flash(`Revoked ${key.id}`)
                  await render()
                })
              )
            : null
        ])
      )
    )
  }
  const create = h("button", { type: "button", id: "create-key" }, "Create a key")
  create.addEventListener("click", async () => {
    try {
      const created = await post("/keys")
      shownOnce.replaceChildren(
        h("p", null, "Your new key, shown this once. Copy it now:"),
        h("code", { class: "secret", id: "new-key-value" }, created.apiKey)
      )
      await render()
    } catch (error) {
      flash((error as Error).message, true)
    }
  })
  main().replaceChildren(h("h1", null, "API keys"), section("Keys", create, shownOnce, list))
  await render()
}

// ------------------------------------------------------------------------------------------------- signing in

const signIn = () => {
  const key = h("input", {
    type: "password",
    name: "key",
    id: "api-key",
    autocomplete: "off",
    required: true,
    placeholder: "sk_test_…",
    "aria-label": "API key"
  }) as HTMLInputElement
  const message = h("p", { class: "flash", id: "flash", role: "status" })
  const form = h(
    "form",
    { class: "card signin" },
    h("h1", null, "Sign in"),
    h("p", null, "With one of your organization's API keys:"),
    key,
    h("button", { type: "submit" }, "Sign in"),
    message,
    h("p", { class: "muted" }, "Or run ", h("code", null, "npm run cli -- dashboard <org>"), " for a one-time link.")
  )
  form.addEventListener("submit", async (event) => {
    event.preventDefault()
    try {
      await post("/dashboard/sign-in", { key: key.value })
      location.assign("/dashboard")
    } catch (error) {
      message.textContent = (error as Error).message
      message.className = "flash error"
    }
  })
  document.getElementById("app")!.replaceChildren(form)
}

const redeem = () => {
  const token = decodeURIComponent(location.pathname.split("/").filter((s) => s !== "")[2] ?? "")
  const message = h("p", { class: "flash", id: "flash", role: "status" })
  const button = h("button", { type: "button", id: "use-link" }, "Sign in")
  button.addEventListener("click", async () => {
    try {
      await post("/dashboard/link", { token })
      location.assign("/dashboard")
    } catch (error) {
      message.textContent = (error as Error).message
      message.className = "flash error"
    }
  })
  document
    .getElementById("app")!
    .replaceChildren(
      h(
        "div",
        { class: "card signin" },
        h("h1", null, "Sign in with a one-time link"),
        h("p", null, "This link works once, for 10 minutes."),
        button,
        message
      )
    )
}

const VIEWS: Record<string, () => Promise<void>> = {
  overview,
  customers,
  customer,
  catalog,
  invoices: invoicesView,
  webhooks,
  keys,
  "billing-profile": billingProfile
}

const render = async () => {
  const view = document.body.dataset.view ?? "overview"
  try {
    await VIEWS[view]?.()
  } catch (error) {
    if (!(error instanceof ApiFailure && error.status === 401)) flash((error as Error).message, true)
  }
  ready()
}

const start = () => {
  const view = document.body.dataset.view ?? "overview"
  if (view === "sign-in") return (signIn(), ready())
  if (view === "link") return (redeem(), ready())
  layout(view)
  void render()
}

start()
