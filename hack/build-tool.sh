#!/usr/bin/env bash
# build-tool.sh DEST DIR: builds the Go module in DIR (a tool of this repository with a go.mod of
# its own, such as hack/promql-refs) as DEST, unless DEST is newer than every file under DIR. It
# builds beside DEST and renames, so a test running DEST meanwhile never sees half a binary.
set -euo pipefail
dest="$1" dir="$2"
if [[ -x "${dest}" && -z "$(find "${dir}" -newer "${dest}" -print -quit)" ]]; then
  exit 0
fi
echo "[tools] building ${dir} into $(dirname "${dest}")"
mkdir -p "$(dirname "${dest}")"
tmp="$(mktemp -d "$(dirname "${dest}")/.build-tool.XXXXXX")"
trap 'rm -rf "${tmp}"' EXIT
CGO_ENABLED=0 go build -C "${dir}" -trimpath -o "${tmp}/$(basename "${dest}")" .
mv "${tmp}/$(basename "${dest}")" "${dest}"
