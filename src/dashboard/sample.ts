// Sample data for an organization, made through the public API only (`/v1`, as a vendor's backend would), so the
// dashboard has something to show on a fresh sandbox: the demo organization at first start, the browser tests and
// the browser bench (1,000 customers and 100,000 usage events).

export type Send = (method: "GET" | "POST", path: string, body?: unknown) => Promise<{ status: number; body: any }>

export interface SampleOptions {
  readonly customers: number
  /**
   * Usage events (each one a `/v1/track`), spread over the last `days` days when `clock` can move the service's
   * time (tests, the bench, the CLI's sample data): the customers and their plans are made `days` ago, then each
   * event is sent at its own instant. Without it, everything happens now.
   */
  readonly events: number
  readonly clock?: { readonly set: (epochMs: number) => void }
  readonly days?: number
  /** Every `paidEvery`th customer subscribes to a paid plan (paid through the simulated provider). */
  readonly paidEvery?: number
  /** Invoices generated for this many paid customers. */
  readonly invoices?: number
  /** Tracks in flight at once (each group at one instant); default 8. */
  readonly concurrency?: number
  /** Extra customers with these names (the tests add a hostile one). */
  readonly names?: ReadonlyArray<string>
}

export const SAMPLE_CATALOG = {
  features: [
    { slug: "api-calls", name: "API calls", type: "metered", unit: "calls" },
    { slug: "tokens", name: "Tokens", type: "metered", unit: "tokens" },
    { slug: "images", name: "Images", type: "metered", unit: "images" },
    { slug: "seats", name: "Seats", type: "metered", meterType: "non_consumable", unit: "seats" },
    { slug: "sso", name: "Single sign-on", type: "boolean" }
  ],
  creditSystems: [{ slug: "ai-credits", name: "AI credits", features: [{ feature: "images", creditCost: 5 }] }],
  creditPacks: [
    {
      slug: "credits-1000",
      name: "1,000 AI credits",
      credits: 1000,
      price: 250000,
      currency: "NGN",
      creditSystem: "ai-credits"
    }
  ],
  plans: [
    {
      slug: "free",
      name: "Free",
      autoEnable: true,
      planGroup: "main",
      portal: true,
      currency: "NGN",
      features: [
        { slug: "api-calls", limit: 2000 },
        { slug: "tokens", limit: 200000 },
        { slug: "ai-credits", limit: 1000 },
        { slug: "seats", limit: 1 }
      ]
    },
    {
      slug: "pro",
      name: "Pro",
      price: 500000,
      currency: "NGN",
      interval: "monthly",
      planGroup: "main",
      // Offered in the customer portal with Free (decisions.md §17); Team (another currency) is not.
      portal: true,
      features: [
        { slug: "api-calls", limit: 100000, overage: "charge", overagePrice: 0.5 },
        {
          slug: "tokens",
          usageModel: "usage_based",
          ratingModel: "graduated",
          tiers: [
            { upTo: 20000, unitPrice: 0.25 },
            { upTo: null, unitPrice: 0.125, flatFee: 1000 }
          ]
        },
        { slug: "ai-credits", limit: 2000 },
        { slug: "seats", limit: 10 },
        { slug: "sso" }
      ]
    },
    {
      slug: "team",
      name: "Team",
      price: 49900,
      currency: "USD",
      interval: "yearly",
      planGroup: "main",
      features: [
        { slug: "api-calls", limit: 500000 },
        { slug: "tokens", limit: 5000000 },
        { slug: "ai-credits", limit: 10000 },
        { slug: "seats", limit: 50 },
        { slug: "sso" }
      ]
    }
  ],
  // A coupon per plan, one with a promotion code, so the catalog view and a customer's discount have something to show.
  coupons: [
    { slug: "welcome", name: "Welcome", percentOff: 20, duration: "repeating", durationInCycles: 3, plans: ["pro"] },
    {
      slug: "team-launch",
      name: "Team launch",
      amountOff: 5000,
      currency: "USD",
      duration: "once",
      maxRedemptions: 100,
      plans: ["team"]
    }
  ],
  promotionCodes: [{ code: "WELCOME20", coupon: "welcome", maxRedemptions: 500 }]
}

const FIRST = [
  "Ada",
  "Grace",
  "Alan",
  "Chidi",
  "Amara",
  "Tunde",
  "Ngozi",
  "Kemi",
  "Linus",
  "Barbara",
  "Edsger",
  "Zainab"
]
const LAST = ["Lovelace", "Hopper", "Turing", "Okafor", "Adeyemi", "Bello", "Eze", "Liskov", "Dijkstra", "Musa"]

/** A small deterministic generator (mulberry32), so a seed is the same every time. */
const random = (seed: number) => () => {
  seed = (seed + 0x6d2b79f5) | 0
  let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
  t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
  return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296
}

const pool = async <T>(items: ReadonlyArray<T>, width: number, work: (item: T) => Promise<void>) => {
  let next = 0
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) await work(items[next++]!)
    })
  )
}

const expectOk = (what: string, answer: { status: number; body: any }) => {
  if (answer.status !== 200) throw new Error(`${what}: ${answer.status} ${JSON.stringify(answer.body)}`)
  return answer.body
}

export interface Sampled {
  readonly customers: ReadonlyArray<{ readonly id: string; readonly externalId: string; readonly name: string }>
  readonly paid: ReadonlyArray<string>
  readonly tracked: number
  readonly invoices: ReadonlyArray<string>
}

/** Seeds the organization `send` speaks for. */
export const seedSample = async (send: Send, options: SampleOptions): Promise<Sampled> => {
  const rnd = random(42)
  const days = options.days ?? 30
  const now = Date.now()
  const clock = options.clock
  clock?.set(now - days * 86_400_000)
  expectOk("sync", await send("POST", "/v1/sync", SAMPLE_CATALOG))

  const people = Array.from({ length: options.customers }, (_, i) => {
    const first = FIRST[i % FIRST.length]!
    const last = LAST[Math.floor(i / FIRST.length) % LAST.length]!
    const n = String(i + 1).padStart(4, "0")
    return {
      externalId: `user-${n}`,
      name: `${first} ${last}`,
      email: `${first}.${last}.${n}@example.com`.toLowerCase()
    }
  })
  for (const [i, name] of (options.names ?? []).entries()) {
    people.push({ externalId: `named-${i + 1}`, name, email: `named-${i + 1}@example.com` })
  }
  const customers: Array<{ id: string; externalId: string; name: string }> = []
  await pool(people, 8, async (p) => {
    const created = expectOk("customer", await send("POST", "/v1/customers", { id: p.externalId, ...p }))
    customers.push({ id: created.id, externalId: p.externalId, name: p.name })
  })
  customers.sort((a, b) => a.externalId.localeCompare(b.externalId))

  // Paid plans, paid on the simulated provider's hosted page as a customer would.
  const paidEvery = options.paidEvery ?? 5
  const paid: Array<string> = []
  const payers = customers.filter((_, i) => i % paidEvery === 0)
  await pool(payers, 4, async (c) => {
    const product = paid.length % 4 === 3 ? "team" : "pro"
    const attached = expectOk("attach", await send("POST", "/v1/attach", { customer: c.externalId, product }))
    if (typeof attached.checkoutUrl === "string") {
      const page = new URL(attached.checkoutUrl)
      expectOk("checkout", await send("POST", page.pathname + page.search, {}))
    }
    paid.push(c.externalId)
  })

  // Usage over the last `days` days, oldest first: a few tracks at a time, each group at its own instant.
  const span = days * 86_400_000 - 3_600_000
  const times = Array.from({ length: options.events }, () => now - Math.floor(rnd() * span)).sort((a, b) => a - b)
  const events = times.map((at) => {
    const c = customers[Math.floor(rnd() * customers.length)]!
    const pick = rnd()
    const [feature, value] =
      pick < 0.55
        ? ["api-calls", 1 + Math.floor(rnd() * 5)]
        : pick < 0.9
          ? ["tokens", 50 + Math.floor(rnd() * 400)]
          : ["images", 1]
    return { at, body: { customer: c.externalId, feature, value } }
  })
  let tracked = 0
  const GROUP = options.concurrency ?? 8
  for (let start = 0; start < events.length; start += GROUP) {
    const group = events.slice(start, start + GROUP)
    clock?.set(group[0]!.at)
    await Promise.all(
      group.map(async (e) => {
        const answer = expectOk("track", await send("POST", "/v1/track", e.body))
        if (answer.allowed === true) tracked++
      })
    )
  }
  clock?.set(Date.now())

  const invoices: Array<string> = []
  for (const c of paid.slice(0, options.invoices ?? 3)) {
    const generated = await send("POST", "/v1/billing/invoice", { customer: c })
    if (generated.status === 200) invoices.push(generated.body.invoice.id)
  }
  return { customers, paid, tracked, invoices }
}
