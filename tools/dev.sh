#!/usr/bin/env bash
# One virtual environment, .venv, in three sizes; each command installs what it needs (pyproject.toml's extras):
#   bash tools/dev.sh serve            the site's: MkDocs, Material, nbformat (no torch); serves
#                                      http://127.0.0.1:8000, rebuilt when a page, lesson or its evidence changes
#   bash tools/dev.sh build [ARGS...]  the site's; builds it strictly (a warning fails it), as CI does, into
#                                      site/ (or -d DIR), quietly, and says where it is
#   bash tools/dev.sh author [CMD...]  the author's: the site's + torch (CPU build), Triton, numpy, matplotlib,
#                                      ruff (no browser); runs CMD with .venv/bin first on PATH, e.g.
#                                      bash tools/dev.sh author python tools/verify.py --lesson row-sum
#   bash tools/dev.sh test             the tests': the author's + pytest, Playwright, nbclient; runs ruff,
#                                      verify --check and --compare, and pytest (site build and browser)
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
        # A page that fails to build shows its error in the browser until the next good build (tools/overlay.py).
        exec .venv/bin/mkdocs serve --dirty --no-strict "${@:2}"
        ;;
    build)
        setup site
        # NO_MKDOCS_2_WARNING (above) hides Material's end-of-life banner; sed the INFO lines (not --quiet:
        # it drops the very warnings --strict counts, so a broken anchor built "strictly").
        .venv/bin/mkdocs build --strict "${@:2}" 2>&1 | sed "/^INFO/d"
        site=site
        args=("${@:2}")
        for i in "${!args[@]}"; do
            case "${args[$i]}" in
                -d|--site-dir) site="${args[$((i + 1))]:-site}" ;;
                --site-dir=*) site="${args[$i]#--site-dir=}" ;;
            esac
        done
        echo "== built strictly: the site is in ${site%/}/ (open ${site%/}/index.html, or serve it: bash tools/dev.sh serve)"
        ;;
    author)
        setup author
        if [ $# -gt 1 ]; then
            PATH="$PWD/.venv/bin:$PATH" exec "${@:2}"
        fi
        .venv/bin/python - <<'EOF'
import mkdocs, torch, triton
print(f"== the author's environment is .venv: torch {torch.__version__}, Triton {triton.__version__}, "
      f"MkDocs {mkdocs.__version__}")
EOF
        cat <<'EOF'
   .venv/bin/python tools/new_lesson.py NAME --part "PART"   a new lesson, at the end of its part
   .venv/bin/python tools/verify.py --lesson NAME            its interpreter run, recorded under evidence/
   bash tools/dev.sh serve                                   the site, with its badge
   bash tools/dev.sh build                                   the strict build CI runs, before a commit
   the rest: docs/writing-a-lesson.md
EOF
        ;;
    test)
        setup dev
        fetch_axe
        echo "== ruff"
        .venv/bin/ruff check .
        echo "== the wings of tools/verified_triton (import-linter, pyproject.toml's [tool.importlinter])"
        PYTHONPATH=tools .venv/bin/lint-imports --no-cache | sed -n '/^Contracts:/p;/BROKEN/,$p'
        echo "== evidence is current for every lesson (tools/verify.py --check)"
        .venv/bin/python tools/verify.py --check
        echo "== fresh interpreter runs agree with the committed evidence (tools/verify.py --compare)"
        .venv/bin/python tools/verify.py --compare
        echo "== pytest"
        .venv/bin/python -m pytest "${@:2}"
        ;;
    *)
        echo "usage: bash tools/dev.sh serve | build [MKDOCS ARGS...] | author [CMD...] | test [PYTEST ARGS...]" >&2
        echo "  serve, build: the site (no torch); author: + torch, Triton (run and verify lessons); test: + the tests" >&2
        exit 2
        ;;
esac
