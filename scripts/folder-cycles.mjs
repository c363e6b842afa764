#!/usr/bin/env node
// Fails when the folders under src/ import each other in a cycle (a feature must not reach back into one that
// depends on it). Reads static imports only; prints each cycle found as a path of folders.
import { readFileSync } from "node:fs"
import { dirname, relative, resolve } from "node:path"
import { cyclesOf, sourceFiles } from "./graph.mjs"

const root = resolve(process.argv[2] ?? "src")
const files = sourceFiles(root)

const folderOf = (file) => relative(root, dirname(file)).split("/")[0] || "."
const edges = new Map()
for (const file of files) {
  const from = folderOf(file)
  const text = readFileSync(file, "utf8")
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+["'](\.[^"']+)["']/g)) {
    const to = folderOf(resolve(dirname(file), match[1]))
    if (to === from || to.startsWith("..")) continue
    if (!edges.has(from)) edges.set(from, new Map())
    const targets = edges.get(from)
    if (!targets.has(to)) targets.set(to, `${relative(root, file)} -> ${match[1]}`)
  }
}

const cycles = cyclesOf(edges.keys(), (v) => edges.get(v)?.keys() ?? [])

if (cycles.length === 0) {
  console.log(
    `no folder cycles among ${new Set([...edges.keys()]).size} folders of ${relative(process.cwd(), root) || "."}`
  )
  process.exit(0)
}
for (const component of cycles) {
  console.log(`cycle: ${component.join(", ")}`)
  for (const from of component) {
    for (const [to, where] of edges.get(from) ?? [])
      if (component.includes(to)) console.log(`  ${from} -> ${to}   (${where})`)
  }
}
process.exit(1)
