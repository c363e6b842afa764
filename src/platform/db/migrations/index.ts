import type { SqlClient } from "@effect/sql"
import type { Effect } from "effect"
import m0001 from "./0001_organizations_customers.ts"
import m0002 from "./0002_catalog_entitlements.ts"
import m0003 from "./0003_usage_rollups.ts"
import m0004 from "./0004_payments.ts"
import m0005 from "./0005_usage_rollups_by_customer.ts"
import m0006 from "./0006_hot_path.ts"
import m0007 from "./0007_batched_reads.ts"
import m0008 from "./0008_payment_attempts.ts"
import m0010 from "./0010_out_of_range_report.ts"
import m0013 from "./0013_refunds.ts"
import m0014 from "./0014_hot_statements.ts"
import m0015 from "./0015_outbound_events.ts"
import m0016 from "./0016_commit_balances_once_per_item.ts"
import m0018 from "./0018_dashboard.ts"
import m0019 from "./0019_context_versions.ts"
import m0020 from "./0020_leaner_usage_writes.ts"
import m0021 from "./0021_no_customer_index_on_events.ts"
import m0030 from "./0030_retired_webhook_secrets.ts"
import m0031 from "./0031_encryption_key_check.ts"
import m0034 from "./0034_plan_changes.ts"
import m0035 from "./0035_hot_read_scheduled_change.ts"
import m0040 from "./0040_billing_profiles.ts"
import m0041 from "./0041_tax_rates.ts"
import m0042 from "./0042_credit_notes.ts"
import m0050 from "./0050_context_version_once_a_transaction.ts"
import m0051 from "./0051_reset_anchor.ts"
import m0052 from "./0052_coupons.ts"
import m0053 from "./0053_customer_discounts.ts"
import m0054 from "./0054_subscription_discounts.ts"
import m0056 from "./0056_customer_portal.ts"
import m0060 from "./0060_first_payment_invoices.ts"

/**
 * The schema's versions in order, one file each. A migration that has landed is never edited: a change is a new file.
 * Where PostgreSQL and SQLite differ, a migration says so with `sql.onDialectOrElse`. The Migrator skips every id at
 * or below the highest one a database has applied: a new migration takes a number above every landed one.
 */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "0001_organizations_customers": m0001,
  "0002_catalog_entitlements": m0002,
  "0003_usage_rollups": m0003,
  "0004_payments": m0004,
  "0005_usage_rollups_by_customer": m0005,
  "0006_hot_path": m0006,
  "0007_batched_reads": m0007,
  "0008_payment_attempts": m0008,
  "0010_out_of_range_report": m0010,
  "0013_refunds": m0013,
  "0014_hot_statements": m0014,
  "0015_outbound_events": m0015,
  "0016_commit_balances_once_per_item": m0016,
  "0018_dashboard": m0018,
  "0019_context_versions": m0019,
  "0020_leaner_usage_writes": m0020,
  "0021_no_customer_index_on_events": m0021,
  "0030_retired_webhook_secrets": m0030,
  "0031_encryption_key_check": m0031,
  "0034_plan_changes": m0034,
  "0035_hot_read_scheduled_change": m0035,
  "0040_billing_profiles": m0040,
  "0041_tax_rates": m0041,
  "0042_credit_notes": m0042,
  "0050_context_version_once_a_transaction": m0050,
  "0051_reset_anchor": m0051,
  "0052_coupons": m0052,
  "0053_customer_discounts": m0053,
  "0054_subscription_discounts": m0054,
  "0056_customer_portal": m0056,
  "0060_first_payment_invoices": m0060
}
