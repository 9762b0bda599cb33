"""Pre-registered studies: the study document (``schema``) and its lock and deviations log (``lock``).

``lca prereg lock|check|deviate`` (protocols/cli/prereg.py) is the command line; docs/preregistration.md the
guide."""

from protocols.study.lock import (
    DEVIATION_KINDS,
    Deviation,
    LockRecord,
    LockStatus,
    StudyNotLockedError,
    deviations_path,
    file_sha256,
    lock_path,
    lock_status,
    lock_study,
    read_deviations,
    read_lock,
    record_deviation,
    require_locked,
)
from protocols.study.schema import (
    SCHEMA_VERSION,
    ComputedMeasure,
    Hypothesis,
    JudgedMeasure,
    Prediction,
    ProtocolRun,
    RaterPanel,
    Study,
    check_registered,
    load_study,
)

__all__ = [
    "DEVIATION_KINDS",
    "SCHEMA_VERSION",
    "ComputedMeasure",
    "Deviation",
    "Hypothesis",
    "JudgedMeasure",
    "LockRecord",
    "LockStatus",
    "Prediction",
    "ProtocolRun",
    "RaterPanel",
    "Study",
    "StudyNotLockedError",
    "check_registered",
    "deviations_path",
    "file_sha256",
    "load_study",
    "lock_path",
    "lock_status",
    "lock_study",
    "read_deviations",
    "read_lock",
    "record_deviation",
    "require_locked",
]
