#!/bin/sh
# Assembles the image's /app: the one recipe the Dockerfile RUNs (build stage) and test/container.test.ts runs into
# a temporary directory. Usage: build-image-fs.sh <source checkout> <root> [<uid>:<gid> owning <root>/app/data]
#
# <root>/app holds package.json, the lockfile, src/ and the production dependencies (Bun's binary among them), all
# owned by the building user (root) and read-only to the runtime user; <root>/app/data, the SQLite database and
# generated encryption key's directory, belongs to the runtime user (mode 0700).
#
# Reproducibility: the dependencies are installed from the committed lockfile with `npm install` (`--omit=dev`), not
# `npm ci`: npm records optional dependencies of the building platform only (npm/cli#4828; here the other platforms'
# msgpackr-extract binaries), and `npm ci` then calls this lockfile out of sync. `npm install` keeps every version the
# lockfile pins; `npm ls` then fails the build if any installed package differs from it. Install scripts are off
# except Bun's own (it links the platform's binary).
set -eu
src=$(cd "$1" && pwd)
root=$2
owner=${3:-}
app="$root/app"
mkdir -p "$app"
cp "$src/package.json" "$src/package-lock.json" "$src/.npmrc" "$app/"
cp -R "$src/src" "$app/src"
cd "$app"
npm install --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error
(cd node_modules/bun && node install.js)
npm ls --omit=dev --all >/dev/null
node_modules/.bin/bun --version >/dev/null
# Invoice documents embed two weights of each Noto font (src/billing/documents/fonts.ts); the font packages ship nine
# weights (and italics) and preview pictures: about 55 MB the service never reads.
find node_modules/@expo-google-fonts -type f \( -name '*.png' -o -name '*.ttf' \) \
  ! -name '*_400Regular.ttf' ! -name '*_700Bold.ttf' -delete
mkdir -p "$app/data"
chmod 0700 "$app/data"
if [ -n "$owner" ]; then chown "$owner" "$app/data"; fi
