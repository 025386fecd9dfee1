"""What every benchmark here shares, in one import (`from . import harness as h`): processes and
PostgreSQL (processes.py), data and request sets (workload.py), the machine and CPU
(machine.py), load loops and windows (load.py), reports (reports.py), paths and bounds (common.py).

A benchmark module describes its runs and calls these; it never leaves a process behind:
every process started here is killed with its whole tree at the end (also on errors and
Ctrl-C), each child gets SIGTERM if the benchmark itself dies, and every request loop is
bounded in time and in count. Only loopback addresses are used.
"""

# The harness is these modules' names together: each benchmark reads them as h.<name>.
from .common import *  # noqa: F401,F403
from .load import *  # noqa: F401,F403
from .machine import *  # noqa: F401,F403
from .processes import *  # noqa: F401,F403
from .reports import *  # noqa: F401,F403
from .workload import *  # noqa: F401,F403
