"""Verified Triton's tools, one package in five wings; each imports only the wings below it.

    core/    the contract with the lessons (kit), their declarations (lessons), the schema, bounded
             and link-free file access (safefs), limits, numbers for readers, the repository's paths
    judge/   the evidence format (evidence) and the one judgement of it (status)
    record/  what `verify.py` runs: planning, running and capturing lessons, the machine, scrubbing,
             smoke runs, bundles, provenance, benchmark history, what is printed
    site/    what builds pages, notebooks and archives: the MkDocs hooks, the `::` directives, rendering,
             snippets, requirements, glossary, downloads
    author/  the commands on top: verify's command line, new_lesson, prose_lint, bench_scale

core, judge and record keep to the standard library (a GPU machine runs them with its stock python3);
site adds MkDocs, pymdownx and nbformat. The entry scripts (tools/verify.py, ...) are a few lines each.
.importlinter in the repository root holds the layers; the test command checks them.
"""
