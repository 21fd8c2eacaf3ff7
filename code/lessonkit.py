"""The small kit every lesson uses to report what it found.

A lesson calls `check`, `skip`, `benchmark`, `table` and `figure` as it goes
and ends with `sys.exit(lesson.finish())`. Run alone with plain `python`, the
kit only prints. Run by `tools/verify.py`, it also writes every result to the
JSON file named by VT_RESULTS (rewritten after each call, so a crash keeps
what was found before it) and saves figures into VT_FIGURES.

Exit codes a lesson ends with:
    0  every check passed and every gating benchmark met its threshold
    1  something failed
    2  this machine cannot run the lesson at all (no GPU and no interpreter)
    3  the lesson declined by design (for example a capability gate)
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from pathlib import Path

EXIT_PASSED, EXIT_FAILED, EXIT_CANNOT_RUN, EXIT_BY_DESIGN = 0, 1, 2, 3


class Lesson:
    def __init__(self, name: str):
        self.name = name
        self.interpret = os.environ.get("TRITON_INTERPRET") == "1"
        self._results_path = os.environ.get("VT_RESULTS")
        main = Path(sys.argv[0]).resolve() if sys.argv and sys.argv[0] else Path.cwd()
        self._figure_dir = Path(os.environ.get("VT_FIGURES") or main.parent / "_output")
        self._data = {
            "lesson": name,
            "mode": "interpreter" if self.interpret else "gpu",
            "checks": [],
            "benchmarks": [],
            "tables": [],
            "figures": [],
            "skipped_parts": [],
            "by_design": None,
            "device": {},
        }
        self._save()

    # -- where the lesson runs -------------------------------------------

    def device(self) -> str:
        """'cpu' under the interpreter, 'cuda' on a GPU; exits 2 when neither."""
        import torch

        self._record_versions(torch)
        if self.interpret:
            print("TRITON_INTERPRET=1: kernels run on the CPU through Triton's interpreter; nothing is timed.")
            return "cpu"
        if not torch.cuda.is_available():
            print(
                f"{self.name}: no CUDA device found. Run it on a GPU, or set TRITON_INTERPRET=1 "
                "to run the correctness half on the CPU:\n"
                f"    TRITON_INTERPRET=1 python {sys.argv[0]}",
                file=sys.stderr,
            )
            sys.exit(EXIT_CANNOT_RUN)
        props = torch.cuda.get_device_properties(0)
        self._data["device"].update(
            name=props.name,
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            memory_gib=round(props.total_memory / 2**30, 1),
            cuda=torch.version.cuda,
        )
        self._save()
        print(f"GPU: {props.name}, compute capability {props.major}.{props.minor}, "
              f"{props.multi_processor_count} SMs, CUDA {torch.version.cuda}")
        return "cuda"

    def require_capability(self, major: int, minor: int, why: str) -> None:
        """Exit by design (code 3) on a GPU older than major.minor."""
        import torch

        if self.interpret:
            return
        have = torch.cuda.get_device_capability(0)
        if have < (major, minor):
            reason = (f"needs compute capability {major}.{minor} or newer ({why}); "
                      f"this GPU is {have[0]}.{have[1]}")
            self.decline(reason)

    def decline(self, reason: str) -> None:
        """Stop here by design: not a failure, and not a verification either."""
        print(f"declined by design: {reason}", file=sys.stderr)
        self._data["by_design"] = reason
        self._save()
        sys.exit(EXIT_BY_DESIGN)

    def not_on_interpreter(self, part: str, reason: str) -> bool:
        """True when `part` must be skipped here; records it for the page."""
        if not self.interpret:
            return False
        print(f"skipped under the interpreter: {part} ({reason})")
        self._data["skipped_parts"].append({"part": part, "reason": reason})
        self._save()
        return True

    # -- results ----------------------------------------------------------

    def check(self, name: str, ok: bool, message: str = "") -> bool:
        status = "pass" if ok else "fail"
        self._data["checks"].append({"name": name, "status": status, "message": message})
        self._save()
        print(f"  check {name}: {status.upper()}" + (f" ({message})" if message else ""),
              file=sys.stdout if ok else sys.stderr)
        return ok

    def skip(self, name: str, reason: str) -> None:
        self._data["checks"].append({"name": name, "status": "skip", "message": reason})
        self._save()
        print(f"  check {name}: SKIP ({reason})")

    def close(self, name: str, got, want, rtol: float, atol: float, why: str = "") -> bool:
        """Check |got - want| <= atol + rtol*|want| everywhere; report the worst element.

        `want` should be computed in higher precision (float64). The relative
        error reported is normalised by max|want|, not element by element:
        a dot product of signed terms lands near zero at some elements, where
        an element-wise ratio measures cancellation, not the kernel.
        """
        import torch

        got64 = got.detach().to("cpu", torch.float64)
        want64 = want.detach().to("cpu", torch.float64)
        if got64.shape != want64.shape:
            return self.check(name, False, f"shape {tuple(got64.shape)} != {tuple(want64.shape)}")
        if not torch.isfinite(got64).all():
            bad = int((~torch.isfinite(got64)).sum())
            return self.check(name, False, f"{bad} non-finite elements")
        diff = (got64 - want64).abs()
        excess = diff - (atol + rtol * want64.abs())
        scale = float(want64.abs().max()) or 1.0
        rel = float(diff.max()) / scale
        bound = f"|got-want| <= {atol:.3g} + {rtol:.3g}*|want|" + (f"; {why}" if why else "")
        if float(excess.max()) > 0:
            worst = tuple(int(i) for i in torch.unravel_index(excess.argmax(), excess.shape))
            return self.check(name, False, f"worst at {worst}: got {float(got64[worst]):.6g}, "
                                           f"want {float(want64[worst]):.6g}; {bound}")
        return self.check(name, True, f"max error / max|want| = {rel:.2e}; {bound}")

    def benchmark(self, name: str, measured: float, baseline: float, unit: str,
                  threshold: float | None = None, baseline_name: str = "",
                  higher_is_better: bool = True, gate: bool = True, note: str = "",
                  stretch: float | None = None) -> bool:
        """Record measured vs baseline. ratio = measured/baseline (inverted when lower is better).

        With a threshold and gate=True, a ratio under the threshold fails the
        lesson. gate=False makes the threshold a goal the page reports as met
        or not, without failing the run. `stretch` is a second, higher goal
        that never gates; the page and the status sentence say if it was missed.
        """
        if higher_is_better:
            ratio = measured / baseline if baseline else math.nan
        else:
            ratio = baseline / measured if measured else math.nan
        met = None if threshold is None else bool(ratio >= threshold)
        stretch_met = None if stretch is None else bool(ratio >= stretch)
        self._data["benchmarks"].append({
            "name": name, "measured": measured, "baseline": baseline,
            "baseline_name": baseline_name, "unit": unit, "ratio": ratio,
            "threshold": threshold, "higher_is_better": higher_is_better,
            "gate": gate, "met": met, "note": note,
            "stretch": stretch, "stretch_met": stretch_met,
        })
        self._save()
        target = "" if threshold is None else f", target >= {threshold:.2f}x: {'met' if met else 'NOT met'}"
        if threshold is not None and not gate:
            target += " (goal, not gating)"
        if stretch is not None:
            target += f", stretch >= {stretch:.2f}x: {'met' if stretch_met else 'not met'}"
        print(f"  bench {name}: {measured:.4g} {unit} vs {baseline_name or 'baseline'} "
              f"{baseline:.4g} {unit} = {ratio:.3f}x{target}")
        return met is not False

    def table(self, name: str, columns: list[str], rows: list[list], caption: str = "") -> None:
        """A small table of results (a sweep, the winning configs) for the page."""
        rows = [[_plain(cell) for cell in row] for row in rows]
        self._data["tables"].append({"name": name, "columns": columns, "rows": rows, "caption": caption})
        self._save()
        widths = [max(len(str(c)), *(len(str(r[i])) for r in rows)) if rows else len(str(c))
                  for i, c in enumerate(columns)]
        print(f"\n  {caption or name}")
        print("  " + "  ".join(str(c).rjust(w) for c, w in zip(columns, widths, strict=True)))
        for row in rows:
            print("  " + "  ".join(str(v).rjust(w) for v, w in zip(row, widths, strict=False)))

    def figure(self, fig, name: str, caption: str = "") -> Path:
        """Save a matplotlib figure as NAME.png where verify collects it."""
        self._figure_dir.mkdir(parents=True, exist_ok=True)
        path = self._figure_dir / f"{name}.png"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        self._data["figures"].append({"name": name, "file": path.name, "caption": caption})
        self._save()
        print(f"  figure {name}: {path.name}")
        return path

    def finish(self) -> int:
        """Print a summary and return the exit code for sys.exit."""
        checks = self._data["checks"]
        failed = [c["name"] for c in checks if c["status"] == "fail"]
        missed = [b["name"] for b in self._data["benchmarks"] if b["gate"] and b["met"] is False]
        passed = sum(c["status"] == "pass" for c in checks)
        skipped = sum(c["status"] == "skip" for c in checks)
        print(f"\n{self.name}: {passed} checks passed, {len(failed)} failed, {skipped} skipped; "
              f"{len(self._data['benchmarks'])} benchmarks, {len(missed)} below target")
        if failed or missed:
            for what in failed:
                print(f"FAILED check: {what}", file=sys.stderr)
            for what in missed:
                print(f"MISSED target: {what}", file=sys.stderr)
            return EXIT_FAILED
        print("PASS")
        return EXIT_PASSED

    # -- plumbing ---------------------------------------------------------

    def _record_versions(self, torch) -> None:
        import triton

        self._data["device"].update(torch=torch.__version__, triton=triton.__version__,
                                    python=platform.python_version())
        self._save()
        print(f"torch {torch.__version__}, triton {triton.__version__}, python {platform.python_version()}")

    def _save(self) -> None:
        if not self._results_path:
            return
        tmp = f"{self._results_path}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self._data, f, indent=1, allow_nan=True)
        os.replace(tmp, self._results_path)


def _plain(value):
    """Table cells as JSON-friendly scalars."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, (int, str)) or value is None:
        return value
    return str(value)


# -- shared numerics --------------------------------------------------------

def scaled_rtol(rtol_table: float, eps: float, terms: int) -> tuple[float, str]:
    """The length-dependent bound from seed 004: rtol_K = max(rtol_table, 4*eps*sqrt(K)).

    A sum of K rounded terms drifts like sqrt(K) roundings, so a flat rtol is
    too tight for long reductions and too loose for short ones.
    """
    scaled = 4.0 * eps * math.sqrt(terms)
    rtol = max(rtol_table, scaled)
    return rtol, f"K={terms}: rtol = max({rtol_table:g}, 4*{eps:g}*sqrt({terms})) = {rtol:.3g}"


def bench_ms(fn, warmup_ms: int = 50, rep_ms: int = 200) -> float:
    """Median milliseconds of fn() from triton.testing.do_bench (CUDA events, L2 flushed)."""
    import triton.testing

    return triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median")


def bench_interleaved(fns: dict, rounds: int = 5, rep_ms: int = 50) -> dict:
    """Median milliseconds of each function, measured in alternating rounds.

    A GPU's clocks drift under sustained load (power and temperature), so
    whichever function is timed first can look faster. Taking turns, round
    after round, exposes the kernel and its baseline to the same drift; the
    median over rounds then compares like with like.
    """
    import statistics

    for fn in fns.values():  # compile and warm up everything before any timing
        bench_ms(fn, warmup_ms=25, rep_ms=10)
    times: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(bench_ms(fn, warmup_ms=5, rep_ms=rep_ms))
    return {name: statistics.median(values) for name, values in times.items()}


def tflops(flop: float, ms: float) -> float:
    return flop / (ms * 1e-3) / 1e12


def gbps(nbytes: float, ms: float) -> float:
    return nbytes / (ms * 1e-3) / 1e9
