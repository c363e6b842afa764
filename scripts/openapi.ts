/** Prints the service's OpenAPI document (the one `/openapi.json` serves): `bun scripts/openapi.ts > openapi.json`. */
import { OpenApi } from "@effect/platform"
import { BillingApi } from "../src/api/Api.ts"

process.stdout.write(JSON.stringify(OpenApi.fromApi(BillingApi), null, 2) + "\n")
