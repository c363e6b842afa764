import { Effect } from "effect"
import type { EntitlementContext, HotCustomer, ManyRead } from "./hotStatements.ts"
import { readsOfMany } from "./resolution.ts"

/**
 * What a batch's read gave of one reference: the customers it may name, their live subscriptions and their config of
 * the feature, as of the organization's context version (migration 0019) the read saw or a later one.
 */
interface Entry {
  readonly version: number
  readonly customers: ReadonlyArray<HotCustomer>
  readonly subscriptions: EntitlementContext["subscriptions"]
  readonly configs: EntitlementContext["configs"]
}

/** The organization's two versions, read together: its catalog's, and its customers' context's. */
export interface Versions {
  readonly catalogVersion: number
  readonly contextVersion: number
}

/** Entries kept at most, the oldest filled first out: like the service's other caches, 10,000 (~1 KB each). */
export const CONTEXT_CACHE_ENTRIES = 10_000

/** Each reference's entry, out of a read of those references. */
export const entriesOf = (
  context: EntitlementContext,
  refs: ReadonlyArray<string>,
  version: number
): ReadonlyArray<readonly [string, Entry]> => {
  const reads = readsOfMany(context)
  const configs = new Map(context.configs.map((c) => [c.customerId, c]))
  return refs.map((ref) => {
    const customers = reads.customersOf(ref)
    return [
      ref,
      {
        version,
        customers,
        subscriptions: customers.flatMap((c) => reads.subscriptionsOf(c.id)),
        configs: customers.flatMap((c) => {
          const config = configs.get(c.id)
          return config === undefined ? [] : [config]
        })
      }
    ]
  })
}

/** One context of entries (a customer two references name appears once), as the read of all of them would be. */
export const contextOf = (catalogVersion: number, entries: ReadonlyArray<Entry>): EntitlementContext => {
  const customers = new Map<string, HotCustomer>()
  const subscriptions = new Map<string, EntitlementContext["subscriptions"][number]>()
  const configs = new Map<string, EntitlementContext["configs"][number]>()
  for (const entry of entries) {
    for (const c of entry.customers) customers.set(c.id, c)
    for (const s of entry.subscriptions) subscriptions.set(s.id, s)
    for (const f of entry.configs) configs.set(f.customerId, f)
  }
  return {
    catalogVersion,
    customers: [...customers.values()],
    subscriptions: [...subscriptions.values()],
    configs: [...configs.values()],
    balances: []
  }
}

/**
 * A batch's read of many references, kept per reference while the organization's context version stays put: a batch
 * then reads the two versions (one row) and only the references it has not seen since the version moved. Balances
 * are never kept (every draw moves them): a read that asks for some (a feature with credit systems) is made whole.
 * A version read before the references' read tags what that read returns: a write between the two leaves it tagged
 * older than it is, and it is read again next time (never the reverse).
 */
export const makeContextCache = (options: {
  readonly versions: (org: string) => Effect.Effect<Versions>
  readonly read: (read: ManyRead) => Effect.Effect<EntitlementContext>
  readonly maxEntries?: number
}) => {
  const max = options.maxEntries ?? CONTEXT_CACHE_ENTRIES
  const entries = new Map<string, Entry>()
  const keyOf = (read: ManyRead, ref: string) => `${read.org}\u0000${read.feature}\u0000${ref}`

  const readMany = (read: ManyRead): Effect.Effect<EntitlementContext> =>
    read.subjects.length > 0
      ? options.read(read)
      : Effect.gen(function* () {
          const { catalogVersion, contextVersion } = yield* options.versions(read.org)
          const kept: Array<Entry> = []
          const missing: Array<string> = []
          for (const ref of read.refs) {
            const entry = entries.get(keyOf(read, ref))
            if (entry !== undefined && entry.version === contextVersion) kept.push(entry)
            else missing.push(ref)
          }
          if (missing.length === 0) return contextOf(catalogVersion, kept)
          const context = yield* options.read({ ...read, refs: missing })
          for (const [ref, entry] of entriesOf(context, missing, contextVersion)) {
            const key = keyOf(read, ref)
            entries.delete(key)
            entries.set(key, entry)
            kept.push(entry)
          }
          for (const key of entries.keys()) {
            if (entries.size <= max) break
            entries.delete(key)
          }
          return contextOf(context.catalogVersion, kept)
        })

  return { readMany, size: () => entries.size }
}
