"""The repository's folders, computed in one place.

Every module that needs the repository root, the lessons, the evidence, the
pages or the generated notebooks takes it from here; the package sits at
tools/verified_triton/, two folders below the root.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
CODE_DIR = ROOT / "code"
EVIDENCE_DIR = ROOT / "evidence"
DOCS_DIR = ROOT / "docs"
NOTEBOOKS_DIR = ROOT / "notebooks"
KIT_PATH = CODE_DIR / "lessonkit.py"
MKDOCS_YML = ROOT / "mkdocs.yml"
