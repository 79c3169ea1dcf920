#!/usr/bin/env bash
# install-tool.sh DEST PACKAGE VERSION: `go install`s PACKAGE@VERSION as DEST, unless DEST is
# already that version (recorded in DEST.version). Uses only the Go toolchain and the module proxy.
set -euo pipefail
dest="$1" pkg="$2" version="$3"
if [[ -x "${dest}" && "$(cat "${dest}.version" 2>/dev/null)" == "${pkg}@${version}" ]]; then
  touch "${dest}"
  exit 0
fi
echo "[tools] installing ${pkg}@${version} into $(dirname "${dest}")"
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT
GOBIN="${tmp}" CGO_ENABLED=0 go install "${pkg}@${version}"
mkdir -p "$(dirname "${dest}")"
mv "${tmp}/$(basename "${pkg}")" "${dest}"
echo "${pkg}@${version}" > "${dest}.version"
