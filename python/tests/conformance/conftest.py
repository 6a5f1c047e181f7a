"""The conformance suite: JAX's own test cases, ported to vtape (no jax import).

Every case is one of three kinds, and the session ends with their counts per JAX test file:
- pass: asserts JAX's expected result;
- deliberate: `@pytest.mark.deliberate("why")`, where vtape differs on purpose; it asserts vtape's
  documented behaviour instead (an error it raises, say);
- unsupported: `@pytest.mark.unsupported("what form")`, a form vtape's Python package lacks; the case
  keeps JAX's code and expected result but is skipped (VTAPE_CONFORMANCE_UNSUPPORTED=run runs them as
  non-strict xfails, to see which now pass).
A defect (a wrong value or gradient, a NaN, a crash) is marked `xfail(strict=True, reason="defect: ...")`
and counted apart.
"""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

_HERE = pathlib.Path(__file__).parent
sys.path.insert(0, str(_HERE))  # _jtu

# The JAX file each module ports.
SOURCES = {
    "test_jax_control_flow.py": "tests/lax_control_flow_test.py",
    "test_jax_linalg.py": "tests/linalg_test.py + tests/eigh_test.py",
    "test_jax_api.py": "tests/api_test.py",
    "test_jax_batching.py": "tests/batching_test.py",
}
KINDS = ("pass", "deliberate", "unsupported", "defect")

_kind: dict[str, tuple[str, str]] = {}  # nodeid -> (source, kind)
_outcome: dict[str, str] = {}  # nodeid -> passed / failed / skipped / xfailed / xpassed


def pytest_configure(config):
    config.addinivalue_line("markers", "deliberate(why): vtape deliberately differs from JAX here (conformance)")
    config.addinivalue_line("markers", "unsupported(form): a JAX form vtape lacks; skipped and counted (conformance)")


def _kind_of(item) -> str:
    if item.get_closest_marker("unsupported") is not None:
        return "unsupported"
    if item.get_closest_marker("deliberate") is not None:
        return "deliberate"
    xfail = item.get_closest_marker("xfail")
    if xfail is not None and str(xfail.kwargs.get("reason", "")).startswith("defect"):
        return "defect"
    return "pass"


def pytest_collection_modifyitems(config, items):
    run_unsupported = os.environ.get("VTAPE_CONFORMANCE_UNSUPPORTED") == "run"
    for item in items:
        path = pathlib.Path(str(item.fspath))
        if path.parent != _HERE:
            continue
        kind = _kind_of(item)
        _kind[item.nodeid] = (SOURCES.get(path.name, path.name), kind)
        if kind == "unsupported":
            form = item.get_closest_marker("unsupported").args
            reason = f"unsupported: {form[0] if form else ''}"
            item.add_marker(pytest.mark.xfail(strict=False, reason=reason) if run_unsupported
                            else pytest.mark.skip(reason=reason))
        if kind == "deliberate" and not item.get_closest_marker("deliberate").args:
            raise pytest.UsageError(f"{item.nodeid}: deliberate() needs its reason")


def pytest_runtest_logreport(report):
    if report.nodeid not in _kind:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        if hasattr(report, "wasxfail"):
            outcome = "xpassed" if report.outcome == "passed" else "xfailed"
        else:
            outcome = report.outcome
        _outcome[report.nodeid] = outcome


def pytest_terminal_summary(terminalreporter):
    if not _kind:
        return
    tr = terminalreporter
    tr.section("vtape conformance (JAX's tests)")
    table: dict[str, dict[str, int]] = {}
    for nodeid, (source, kind) in _kind.items():
        if nodeid not in _outcome:
            continue  # not run (deselected, -x)
        table.setdefault(source, dict.fromkeys(KINDS, 0))[kind] += 1
    width = max(len(s) for s in table) if table else 10
    tr.write_line(f"{'JAX source':<{width}}  " + "  ".join(f"{k:>11}" for k in KINDS) + "  total")
    totals = dict.fromkeys(KINDS, 0)
    for source in sorted(table):
        row = table[source]
        for k in KINDS:
            totals[k] += row[k]
        tr.write_line(f"{source:<{width}}  " + "  ".join(f"{row[k]:>11}" for k in KINDS) + f"  {sum(row.values()):>5}")
    tr.write_line(f"{'all':<{width}}  " + "  ".join(f"{totals[k]:>11}" for k in KINDS) + f"  {sum(totals.values()):>5}")
    wrong = [n for n, (_, kind) in _kind.items()
             if n in _outcome and kind in ("pass", "deliberate") and _outcome[n] != "passed"]
    if wrong:
        tr.write_line(f"{len(wrong)} pass/deliberate cases did not pass: " + ", ".join(wrong[:10]))
