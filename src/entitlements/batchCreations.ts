import type { CatalogSnapshot } from "../catalog/model.ts"
import type { BatchItem } from "./preparedBatch.ts"
import { answered, type CustomerReads, instantFor, resolveFound, type Resolution } from "./resolution.ts"
import type { CustomerData } from "./newCustomers.ts"
import { denial } from "./state.ts"

/** A customer a batch creates: its reference (the new customer's external id), its data and its first item. */
export interface Creator {
  readonly ref: string
  readonly data: CustomerData
  readonly first: number
}

const emailTaken = (ref: string, email: string) =>
  answered(
    denial(
      "customer_not_found",
      `Customer '${ref}' could not be created: The email '${email}' belongs to another customer`
    )
  )

/**
 * How each reference a batch creates is created, as `findOrCreate` would decide it one after the other (pure): by the
 * batch's own transaction (`created`); or, when its email is an existing customer's without an external id (which
 * that customer then takes: rare), as before, one by one ahead of the transaction (`oneByOne`). A reference whose
 * email an existing customer or an earlier reference of the batch holds under another external id is refused
 * (`refused`: each item of the reference answered so). `ownerOf(email)`: the existing customer holding it, if any.
 */
export const sortCreators = (
  creators: ReadonlyArray<Creator>,
  ownerOf: (email: string) => { readonly externalId: string | null } | undefined
) => {
  const created: Array<Creator> = []
  const oneByOne: Array<Creator> = []
  const refused = new Map<string, Resolution>()
  const claimed = new Set<string>()
  for (const creator of creators) {
    const email = creator.data.email
    if (email === undefined) {
      created.push(creator)
      continue
    }
    const lower = email.toLowerCase()
    const owner = ownerOf(lower)
    if (claimed.has(lower) || (owner !== undefined && owner.externalId !== null)) {
      refused.set(creator.ref, emailTaken(creator.ref, email))
    } else if (owner !== undefined) oneByOne.push(creator)
    else {
      claimed.add(lower)
      created.push(creator)
    }
  }
  return { created, oneByOne, refused }
}

/** Item `i` of a batch, naming a customer the batch creates, resolved over the new customer (pure). */
export const createdResolution = (request: {
  readonly org: string
  readonly item: BatchItem
  readonly snapshot: CatalogSnapshot
  readonly reads: CustomerReads
  readonly requestedAt: number
  readonly timestamp: number | undefined
}): Resolution => {
  const { item, snapshot, reads } = request
  const customer = reads.customersOf(item.customer)[0]!
  const feature = snapshot.features.get(item.feature) ?? snapshot.featuresById.get(item.feature)
  if (feature === undefined) return answered(denial("feature_not_found", `No feature '${item.feature}'`))
  // A new customer has no entity yet.
  if (item.entity !== undefined) {
    return answered(denial("entity_not_found", `The customer has no entity '${item.entity}'`))
  }
  const { idempotencyKey: _, ...input } = item
  return resolveFound({
    org: request.org,
    mode: "track",
    input,
    snapshot,
    feature,
    customer,
    reads,
    entityId: null,
    now: instantFor(customer, request.requestedAt),
    timestamp: request.timestamp,
    inTransaction: false
  })
}
