import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { BillingApi } from "../../api/Api.ts"
import { CurrentOrganization } from "../../api/security.ts"
import { mapDomainErrors } from "../../boundary/toApiError.ts"
import { InvoiceDocuments } from "./InvoiceDocuments.ts"

export const DocumentsHttp = HttpApiBuilder.group(BillingApi, "documents", (handlers) =>
  Effect.gen(function* () {
    const documents = yield* InvoiceDocuments
    return handlers.handle("invoicePdf", ({ path }) =>
      Effect.flatMap(CurrentOrganization, (org) => documents.pdf(org.id, path.id)).pipe(mapDomainErrors)
    )
  })
)
