"""The chaos soak: the scenario of ``tests/integration/test_chaos.py`` for as long as asked.

Real ``studio worker`` processes (``--workers``, concurrency 2 each) on a private Redis and a
fresh PostgreSQL database, a real ``studio api``; executions (replay model, pull request on) are
created through the API so that ``--in-flight`` of them are always unfinished, for
``--duration-s``; meanwhile, at seeded random intervals (``--gap-s``), one fault after another: a
worker's process group SIGKILLed (a new worker replaces it), an executor child SIGKILLed, a
PostgreSQL backend of the workers terminated, the private Redis restarted (its queue lost). Then
the faults stop, the executions still running get ``--bound-s`` to end, the workers stop, and
the invariants are checked and printed as a table (the shared code:
``tests/integration/chaos_world.py``).

    nice python bench/soak.py --duration-s 1200 --in-flight 4 --seed 1616   # the documented run
    python bench/soak.py --duration-s 120                                   # a quick one

The exit status is 1 when an invariant is broken (the table says which), else 0.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.integration.chaos_world import (  # noqa: E402
    check_invariants,
    scenario,
    table,
)


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=1200.0,
                        help="how long executions are created and faults injected")
    parser.add_argument("--in-flight", type=int, default=4,
                        help="unfinished executions kept at any time")
    parser.add_argument("--workers", type=int, default=2, help="studio workers (at least 2)")
    parser.add_argument("--commands", type=int, default=3,
                        help="ledger commands per execution")
    parser.add_argument("--gap-s", type=float, nargs=2, default=(2.0, 8.0),
                        metavar=("MIN", "MAX"), help="interval between two faults")
    parser.add_argument("--bound-s", type=float, default=300.0,
                        help="the bound from creation to final status, each execution")
    parser.add_argument("--seed", type=int, default=None, help="the fault generator's seed")
    args = parser.parse_args(argv)
    if args.workers < 2:
        parser.error("--workers: at least 2")
    return args


def soak(args: argparse.Namespace) -> int:
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    print(f"soak: seed {seed}, {args.duration_s:.0f}s, {args.workers} workers, "
          f"{args.in_flight} in flight, fault gap {args.gap_s[0]}-{args.gap_s[1]}s", flush=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="studio-soak-") as tmp, \
            scenario(Path(tmp), seed, args.workers, args.commands) as run:
        run.echo = True
        run.rage(started + args.duration_s, tuple(args.gap_s),
                 between=lambda: run.keep_in_flight(args.in_flight))
        print(f"soak: faults stop; {len(run.ids)} executions created, waiting for them to end",
              flush=True)
        run.wait_final(args.bound_s)
        run.stop()
        invariants = check_invariants(run, args.bound_s)
        elapsed = time.monotonic() - started
        print(f"\nseed {seed}; {elapsed / 60:.1f} min; {len(run.ids)} executions; faults "
              + ", ".join(f"{k} {run.faults[k]}" for k in sorted(run.faults))
              + f"; redis restarts {run.redis_server.restarts}; workers started "
              f"{run.chaos.started}\n")
        print(table(invariants))
        if not all(i.ok for i in invariants):
            print("\n" + "\n".join(run.fault_log))
            return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    return soak(_arguments(argv))


if __name__ == "__main__":
    sys.exit(main())
