#!/usr/bin/env bash
# One virtual environment, .venv, in three sizes; each command installs what it needs (pyproject.toml's extras):
#   bash tools/dev.sh serve            the site's: MkDocs, Material, nbformat (no torch); serves
#                                      http://127.0.0.1:8000, rebuilt when a page, lesson or its evidence changes
#   bash tools/dev.sh build [ARGS...]  the site's; builds it strictly (a warning fails it), as CI does, into
#                                      site/ (or -d DIR), quietly, and says where it is
#   bash tools/dev.sh author [CMD...]  the author's: the site's + torch (CPU build), Triton, numpy, matplotlib,
#                                      ruff (no browser); runs CMD with .venv/bin first on PATH, e.g.
#                                      bash tools/dev.sh author python tools/verify.py --lesson row-sum
#   bash tools/dev.sh test             the tests': the author's + pytest, pytest-xdist, Playwright, nbclient;
#                                      runs ruff, import-linter, verify --check, then pytest over every tier in
#                                      parallel (unit, integration, e2e: tests/tiers.py): the site built once,
#                                      every lesson's zip run and compared with its record (verify --compare's
#                                      check), notebooks, smoke runs, Chromium. README's and CI's run
#   bash tools/dev.sh test fast [ARGS] the same checks, then the unit and integration tiers in parallel: no
#                                      browser, no notebook kernel, no lesson run whole, no npm (the daily loop)
#   bash tools/dev.sh test ARGS...     pytest with ARGS alone, none of the checks before it, e.g.
#                                      bash tools/dev.sh test tests/test_kit.py -k finish   (add -n auto for xdist)
# Before the commands: python3 >= 3.11 with venv; npm and Chromium for the full test run (README.md).
# Without an NVIDIA GPU, the author's and tests' installs take torch's CPU build (PIP_EXTRA_INDEX_URL, below).
set -euo pipefail
cd "$(dirname "$0")/.."
export NO_MKDOCS_2_WARNING=1

# What each extra brings, said while it installs (the first install takes minutes, and pip is quiet).
what() {
    case "$1" in
        site) echo "MkDocs, Material, pymdown-extensions, nbformat (no torch); about a minute" ;;
        author) echo "the site's + torch, Triton, numpy, matplotlib, ruff; about 2.5 GB, a few minutes" ;;
        dev) echo "the author's + pytest, pytest-xdist, Playwright, nbclient; a few minutes more" ;;
    esac
}

has_nvidia_gpu() {
    command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q "^GPU "
}

# On a machine without an NVIDIA GPU, pip would still take torch's multi-GB CUDA build from PyPI: point it at
# torch's CPU index, the build CI uses (2.13.0+cpu satisfies ==2.13.0), unless the user chose an index.
cpu_torch() {
    if [ -n "${PIP_EXTRA_INDEX_URL+set}" ] || [ -n "${PIP_INDEX_URL+set}" ] || has_nvidia_gpu; then
        return
    fi
    local index=https://download.pytorch.org/whl/cpu
    # A machine that cannot reach the index (a mirror or wheels on disk, as in CI) would have pip retry it for
    # every package, minutes in all: ask once, for five seconds, and leave pip's own configuration alone.
    if ! index_answers "$index/torch/"; then
        echo "== no NVIDIA GPU here, and torch's CPU index ($index) does not answer: pip's own configuration" \
             "chooses torch (set PIP_EXTRA_INDEX_URL to choose)"
        return
    fi
    export PIP_EXTRA_INDEX_URL=$index
    echo "== no NVIDIA GPU here: torch's CPU build (PIP_EXTRA_INDEX_URL=$PIP_EXTRA_INDEX_URL; set it to choose another)"
}

index_answers() {  # $1: a URL; true when it answers within five seconds
    python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=5)' "$1" >/dev/null 2>&1
}

setup() {  # $1: the extra to install
    local stamp=".venv/.installed-$1"
    if [ ! -x .venv/bin/python ]; then
        if ! python3 -c 'import sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "dev.sh: needs python3 >= 3.11 with its venv module (Debian/Ubuntu: apt-get install python3-venv);" \
                 "found: $(python3 --version 2>&1 || echo 'no python3')" >&2
            exit 1
        fi
        echo "== creating .venv"
        python3 -m venv .venv
    fi
    if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
        if [ "$1" != site ]; then
            cpu_torch
        fi
        echo "== installing .[$1] into .venv: $(what "$1")"
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[$1]"
        touch "$stamp"
    fi
}

# axe-core for the accessibility tests (tests/test_browser.py), pinned by version here and by sha256 in
# tests/reader_metrics.py: unpacked from the npm registry's package into the git-ignored .cache/.
AXE_VERSION=4.14.1
AXE_DIR=.cache/axe-core
have_axe() {
    [ -f "$AXE_DIR/axe.min.js" ] && grep -q "axe v$AXE_VERSION" "$AXE_DIR/axe.min.js"
}
fetch_axe() {
    if have_axe; then
        return
    fi
    echo "== unpacking axe-core $AXE_VERSION into $AXE_DIR"
    local tmp
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "axe-core@$AXE_VERSION" >/dev/null)
    mkdir -p "$AXE_DIR"
    tar -xzf "$tmp/axe-core-$AXE_VERSION.tgz" -C "$AXE_DIR" --strip-components=1 package/axe.min.js package/LICENSE
    rm -rf "$tmp"
}
# The full test run needs npm for axe-core (unless it is unpacked already): said before anything is installed.
need_npm() {
    if have_axe || command -v npm >/dev/null 2>&1; then
        return
    fi
    echo "dev.sh test: npm is not installed. The accessibility tests need axe-core $AXE_VERSION, which npm" \
         "unpacks into $AXE_DIR. Install npm (Debian/Ubuntu: apt-get install npm; or Node.js from" \
         "https://nodejs.org), or run the tests that need no browser: bash tools/dev.sh test fast" >&2
    exit 1
}

case "${1:-}" in
    serve)
        setup site
        # --dirty: after the first build, re-render only what an edit changed (tools/incremental.py);
        # warnings are shown, not fatal, while writing (the test command builds with --strict).
        # A page that fails to build shows its error in the browser until the next good build (tools/overlay.py).
        # The first build is minutes of silence from MkDocs: say what it is doing first.
        pages=$(find docs -name "*.md" -not -path "docs/includes/*" | wc -l)
        lessons=$(find code -mindepth 2 -maxdepth 2 -name lesson.toml | wc -l)
        echo "== building the site: $((pages)) pages, $((lessons)) of them lessons, each with its sources, zip and"
        echo "   notebook; the first build takes a few minutes, then http://127.0.0.1:8000 serves it and an"
        echo "   edit shows in seconds"
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
        # Which run: `test` the full one (README and CI), `test fast` the daily loop, `test ARGS...` pytest
        # with those arguments alone (e.g. one file), none of the checks before it.
        run=args
        if [ $# -eq 1 ]; then run=full; elif [ "$2" = fast ]; then run=fast; fi
        if [ "$run" = full ]; then need_npm; fi
        setup dev
        if [ "$run" = args ]; then
            if ! have_axe && command -v npm >/dev/null 2>&1; then fetch_axe; fi  # for a browser test asked by name
            exec .venv/bin/python -m pytest "${@:2}"
        fi
        echo "== ruff"
        .venv/bin/ruff check .
        echo "== the wings of tools/verified_triton (import-linter, pyproject.toml's [tool.importlinter])"
        PYTHONPATH=tools .venv/bin/lint-imports --no-cache | sed -n '/^Contracts:/p;/BROKEN/,$p'
        echo "== evidence is current for every lesson (tools/verify.py --check)"
        .venv/bin/python tools/verify.py --check
        if [ "$run" = fast ]; then
            echo "== pytest: the unit and integration tiers, in parallel (no browser, no notebook, no lesson run whole)"
            exec .venv/bin/python -m pytest -n auto -m "not e2e" "${@:3}"
        fi
        fetch_axe
        echo "== pytest: every tier, in parallel (e2e: every lesson's zip run fresh and compared with its record, as"
        echo "   verify --compare does, its notebook and smoke run, and the pages in Chromium)"
        exec .venv/bin/python -m pytest -n auto --durations=15
        ;;
    *)
        echo "usage: bash tools/dev.sh serve | build [MKDOCS ARGS...] | author [CMD...] | test [fast | PYTEST ARGS...]" >&2
        echo "  serve, build: the site (no torch); author: + torch, Triton (run and verify lessons); test: + the tests" >&2
        exit 2
        ;;
esac
