#!/usr/bin/env node
// Fails when the files of one folder import each other in a cycle, type imports included (`import type`,
// `export type … from`, `import("./x.ts")` in a type position): a reader should be able to read a folder's files in
// an order where each one only leans on files already read. Subfolders count as part of the folder; imports that
// leave the folder are ignored (scripts/folder-cycles.mjs checks those). Usage: node scripts/file-cycles.mjs <folder>…
import { existsSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { cyclesOf, sourceFiles } from "./graph.mjs"

const folders = process.argv.slice(2)
if (folders.length === 0) {
  console.error("usage: node scripts/file-cycles.mjs <folder>…")
  process.exit(2)
}

const importsOf = (text) => {
  const found = []
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)[^'"]*?from\s+["'](\.[^"']+)["']/g))
    found.push(match[1])
  for (const match of text.matchAll(/(?:^|\n)\s*import\s+["'](\.[^"']+)["']/g)) found.push(match[1])
  for (const match of text.matchAll(/\bimport\(\s*["'](\.[^"']+)["']\s*\)/g)) found.push(match[1])
  return found
}

const resolveFile = (from, specifier) => {
  const base = resolve(dirname(from), specifier)
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, join(base, "index.ts")])
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate
  return base
}

let failed = false
for (const folder of folders) {
  const root = resolve(folder)
  const files = sourceFiles(root)
  const inFolder = new Set(files)
  const edges = new Map(files.map((file) => [file, new Set()]))
  for (const file of files) {
    for (const specifier of importsOf(readFileSync(file, "utf8"))) {
      const target = resolveFile(file, specifier)
      if (target !== file && inFolder.has(target)) edges.get(file).add(target)
    }
  }

  const cycles = cyclesOf(files, (v) => edges.get(v))

  const name = relative(process.cwd(), root) || "."
  if (cycles.length === 0) {
    console.log(`no file cycles among ${files.length} files of ${name}`)
    continue
  }
  failed = true
  for (const component of cycles) {
    console.log(`cycle in ${name}: ${component.map((file) => relative(root, file)).join(", ")}`)
    for (const from of component)
      for (const to of edges.get(from))
        if (component.includes(to)) console.log(`  ${relative(root, from)} -> ${relative(root, to)}`)
  }
}
process.exit(failed ? 1 : 0)
