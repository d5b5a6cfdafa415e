"""Calls that could crash the interpreter, run in a fresh Python process.

A numba kernel that indexes out of bounds corrupts memory or aborts the process
(without ``NUMBA_BOUNDSCHECK``): such a call, made in pytest's process, would kill
the whole run instead of failing its test. :func:`outcomes_in_subprocess` runs a
list of calls in one subprocess (one start-up for all) and reports what each one
raised; a crash fails the calling test with the process's output.
"""

import json
import os
import subprocess
import sys
import textwrap

RUNNER = """
import json, warnings
warnings.simplefilter("ignore")
{setup}
_outcomes = {{}}
for _name, _code in {cases!r}:
    try:
        exec(_code)
        _outcomes[_name] = "returned"
    except Exception as error:
        _outcomes[_name] = f"{{type(error).__name__}}: {{error}}"
print("OUTCOMES " + json.dumps(_outcomes))
"""


def outcomes_in_subprocess(setup, cases, env=None, timeout=300):
    """Run each ``(name, code)`` of ``cases`` after ``setup`` in one fresh process.

    Returns ``{name: "ExceptionType: message"}``, or ``"returned"`` for a call that
    raised nothing. The environment is this process's (``NUMBA_BOUNDSCHECK`` and
    ``NUMBA_CACHE_DIR`` included), updated with ``env``. Fails with the process's
    output if it does not finish cleanly.
    """
    script = RUNNER.format(setup=textwrap.dedent(setup), cases=list(cases))
    process = subprocess.run([sys.executable, "-c", script], capture_output=True,
                             text=True, timeout=timeout, env={**os.environ, **(env or {})})
    lines = [line for line in process.stdout.splitlines() if line.startswith("OUTCOMES ")]
    assert process.returncode == 0 and lines, (
        f"the subprocess ended with code {process.returncode}:\n"
        f"{process.stdout[-3000:]}\n{process.stderr[-3000:]}")
    return json.loads(lines[-1][len("OUTCOMES "):])
