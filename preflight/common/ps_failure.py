"""What a PS round's failed hosts said, read for its cause: a host that only waited on a peer
(gloo's timeout naming it) or for the round's time to run out, told from one that failed on
its own (an exception in its log)."""

from __future__ import annotations

from preflight.common.paddlelog import EXCEPTION, GLOO_PEER
from preflight.model.measure import PsRound

# What a host's failure says of its cause: gloo's timeout names the peer it waited on
# (paddlelog.GLOO_PEER); a host whose round ran out of time without a Python exception in its
# log only waited.
OUT_OF_TIME = "did not finish within the time limit"


def ran_out_of_time(why: str) -> bool:
    """A host's failure that is its round's time running out while it waited (no exception
    of its own in its log, whatever ended it after)."""
    return why.startswith(OUT_OF_TIME) and not EXCEPTION.search(why)


def hung_without_cause(r: PsRound) -> bool:
    """No trainer finished, and every host that failed ran out of time waiting with no log
    saying why or on whom: a start-up race of Paddle's PS, seen now and then on GEO (a
    trainer left at "create c2c connection done", its server waiting, the other hosts
    stopped with the round), is worth one more run. A cause that holds fails it again."""
    return bool(r.failed) and not r.trainers and all(
        ran_out_of_time(w) and not GLOO_PEER.search(w) for w in r.failed.values())
