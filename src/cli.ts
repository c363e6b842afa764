import { main } from "./cli/main.ts"

process.exit(await main())
