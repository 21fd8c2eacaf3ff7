#!/usr/bin/env bash
# Set up the project's virtual environment, then serve the site or run the tests.
#   bash tools/dev.sh serve    site on http://127.0.0.1:8000, rebuilt when a lesson or its evidence changes
#   bash tools/dev.sh test     ruff, evidence check, fresh interpreter runs, pytest (site build + browser)
set -euo pipefail
cd "$(dirname "$0")/.."
export NO_MKDOCS_2_WARNING=1

setup() {  # $1: the extra to install
    local stamp=".venv/.installed-$1"
    if [ ! -x .venv/bin/python ]; then
        echo "== creating .venv"
        python3 -m venv .venv
    fi
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        echo "== installing .[$1] into .venv"
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$1]"
        touch "$stamp"
    fi
}

# axe-core for the accessibility tests (tests/test_browser.py), pinned by version here and by sha256 in
# tests/reader_metrics.py: unpacked from the npm registry's package into the git-ignored .cache/.
AXE_VERSION=4.14.1
fetch_axe() {
    local dir=.cache/axe-core
    if [ -f "$dir/axe.min.js" ] && grep -q "axe v$AXE_VERSION" "$dir/axe.min.js"; then
        return
    fi
    echo "== unpacking axe-core $AXE_VERSION into $dir"
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "axe-core@$AXE_VERSION" >/dev/null)
    mkdir -p "$dir"
    tar -xzf "$tmp/axe-core-$AXE_VERSION.tgz" -C "$dir" --strip-components=1 package/axe.min.js package/LICENSE
    rm -rf "$tmp"
}

case "${1:-}" in
    serve)
        setup site
        # --dirty: after the first build, re-render only what an edit changed (tools/incremental.py);
        # warnings are shown, not fatal, while writing (the test command builds with --strict).
        exec .venv/bin/mkdocs serve --dirty --no-strict "${@:2}"
        ;;
    test)
        setup dev
        fetch_axe
        echo "== ruff"
        .venv/bin/ruff check .
        echo "== evidence is current for every lesson (tools/verify.py --check)"
        .venv/bin/python tools/verify.py --check
        echo "== fresh interpreter runs agree with the committed evidence (tools/verify.py --compare)"
        .venv/bin/python tools/verify.py --compare
        echo "== pytest"
        .venv/bin/python -m pytest "${@:2}"
        ;;
    *)
        echo "usage: bash tools/dev.sh serve|test" >&2
        exit 2
        ;;
esac
