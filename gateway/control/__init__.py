"""Control, apart from observability: degradation, admission, per-frame options, batch advice, capacity.

`Governor` decides from the stats the monitor hands it; sessions depend on `GovernorLike` alone. Pure policy:
degradation.py (the level and what each level sheds), capacity.py (sessions this replica can hold).
"""

from gateway.control.governor import Governor, GovernorLike

__all__ = ["Governor", "GovernorLike"]
