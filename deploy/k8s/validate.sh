#!/bin/sh
# Validate ecoord's Kubernetes manifests without a cluster (and lint the
# Dockerfile with the same npm toolbox).
#
#   deploy/k8s/validate.sh [--files|--overlays|--docker] [WORKDIR]
#
# --files     every manifest file (base/, examples/; kustomization files and
#             overlay patches are checked through the renderings instead)
#             against the Kubernetes API schemas: validate/validate.mjs; the
#             examples (each complete in itself) with the rules as well; the
#             custom resources (PyTorchJob, PaddleJob, JobSet) structurally
#             and through the pod and Job templates they embed
# --overlays  render every kustomization (base/*, overlays/*) and validate each
#             rendering with the cross-object rules as well (--rules)
# --docker    lint deploy/docker/Dockerfile (dockerfile-utils, the parser
#             behind the Docker language server; warnings count as errors)
# (none)      all three
#
# The validator's npm packages, pinned by validate/package-lock.json, are
# installed once with `npm ci` into WORKDIR (default deploy/k8s/.validate,
# ignored by git).  Rendering needs a kustomize of v4 or later: `kustomize`
# or the one inside `kubectl` (`kubectl kustomize`).
#
# Exit: 0 valid; 1 something is invalid; 77 a prerequisite is missing (node,
# npm, the npm registry, a kustomize), with the reason on stdout.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
mode=all
case "${1:-}" in
--files) mode=files; shift ;;
--overlays) mode=overlays; shift ;;
--docker) mode=docker; shift ;;
--help | -h) sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
esac
work=${1:-$here/.validate}

skip() { echo "SKIP: $*"; exit 77; }

command -v node >/dev/null 2>&1 || skip "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (apt-get install npm)"

# Install (or refresh, when the lock file changed) the pinned validator.
mkdir -p "$work"
cp "$here/validate/package.json" "$here/validate/package-lock.json" "$here/validate/validate.mjs" "$work/"
if ! cmp -s "$work/package-lock.json" "$work/node_modules/.ecoord-lock" 2>/dev/null; then
    echo "installing the validator (npm ci in $work)"
    if ! (cd "$work" && npm ci --no-audit --no-fund --loglevel=error --engine-strict=false >npm.log 2>&1); then
        tail -n 5 "$work/npm.log" | sed 's/^/  npm: /'
        skip "cannot install the validator's npm packages (is the npm registry reachable?)"
    fi
    cp "$work/package-lock.json" "$work/node_modules/.ecoord-lock"
fi

status=0

if [ "$mode" = all ] || [ "$mode" = docker ]; then
    echo "== deploy/docker/Dockerfile"
    if out=$(node "$work/node_modules/dockerfile-utils/bin/dockerfile-utils" lint --json \
        "$here/../docker/Dockerfile") && [ "$out" = "[]" ]; then
        echo "ok   Dockerfile: no problems"
    else
        echo "FAIL Dockerfile: $out"
        status=1
    fi
    [ "$mode" = docker ] && exit "$status"
fi

if [ "$mode" = all ] || [ "$mode" = files ]; then
    echo "== manifest files"
    files=$(find "$here/base" "$here/examples" -name '*.yaml' ! -name kustomization.yaml | sort)
    # shellcheck disable=SC2086
    node "$work/validate.mjs" $files || status=1
    echo "== examples, with the rules"
    for f in $(find "$here/examples" -name '*.yaml' | sort); do
        if out=$(node "$work/validate.mjs" --rules --label "examples/$(basename "$f")" "$f"); then
            printf '%s\n' "$out" | tail -n 1
        else
            printf '%s\n' "$out" | grep -v '^ok '
            status=1
        fi
    done
fi

if [ "$mode" = all ] || [ "$mode" = overlays ]; then
    if command -v kustomize >/dev/null 2>&1; then
        render() { kustomize build "$1"; }
        renderer="kustomize $(kustomize version 2>/dev/null | head -n 1)"
    elif command -v kubectl >/dev/null 2>&1 &&
        kubectl version --client 2>/dev/null | grep -q 'Kustomize Version: v[4-9]'; then
        render() { kubectl kustomize "$1"; }
        renderer="kubectl kustomize ($(kubectl version --client 2>/dev/null | grep Kustomize))"
    else
        [ "$mode" = overlays ] && skip "no kustomize v4+ to render the overlays (neither 'kustomize' nor a 'kubectl' with one)"
        echo "SKIP: overlays not rendered: no kustomize v4+ (neither 'kustomize' nor a 'kubectl' with one)"
        exit "$status"
    fi
    echo "== kustomizations, rendered by $renderer"
    for k in $(find "$here/base" "$here/overlays" -name kustomization.yaml | sort); do
        dir=$(dirname "$k")
        name=${dir#"$here"/}
        if ! out=$(render "$dir" 2>&1); then
            echo "FAIL $name: does not render:"
            echo "$out" | sed 's/^/  /'
            status=1
            continue
        fi
        printf '%s\n' "$out" | node "$work/validate.mjs" --rules --label "$name" - || status=1
    done
fi
exit "$status"
