#!/usr/bin/env bash
# Installs the deploy tools into ~/.cache/qim/tools (QIM_TOOLS overrides), cached and
# idempotent: helm from the Go module proxy (helm.sh/helm/v4 at a named version), the
# manifest checker tools/deploy/kubecheck (Go, k8s.io/api types; docs/decisions/0109),
# and Debian's mmdebstrap and umoci for the image (`make image`). Each step prints what
# it does; a step already done prints nothing. Non-zero exit with a message on failure.
set -euo pipefail
HELM_VERSION=v4.3.2
TOOLS=${QIM_TOOLS:-$HOME/.cache/qim/tools}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$TOOLS/bin"
want=${1:-all}

if [[ $want == all || $want == helm ]]; then
  # `go install` leaves the patch level out of `helm version`: a stamp file records it
  if [[ ! -x $TOOLS/bin/helm || $(cat "$TOOLS/helm.version" 2>/dev/null) != "$HELM_VERSION" ]]; then
    echo "deploy-tools: building helm $HELM_VERSION from the Go module proxy (a few minutes, once)" >&2
    GOBIN="$TOOLS/bin" GOFLAGS=-buildvcs=false nice "$GO" install "helm.sh/helm/v4/cmd/helm@$HELM_VERSION"
    echo "$HELM_VERSION" > "$TOOLS/helm.version"
  fi
  # kubecheck is rebuilt when its source is newer than the binary
  if [[ ! -x $TOOLS/bin/kubecheck || -n $(find "$here/kubecheck" -newer "$TOOLS/bin/kubecheck" -type f) ]]; then
    echo "deploy-tools: building kubecheck (k8s.io/api types, Go module proxy)" >&2
    (cd "$here/kubecheck" && GOFLAGS=-buildvcs=false nice "$GO" build -o "$TOOLS/bin/kubecheck" .)
  fi
fi

if [[ $want == all || $want == image ]]; then
  apt_pkgs="mmdebstrap umoci"
  if ! dpkg -s $apt_pkgs >/dev/null 2>&1; then
    echo "deploy-tools: installing $apt_pkgs (Debian)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $apt_pkgs
  fi
fi
