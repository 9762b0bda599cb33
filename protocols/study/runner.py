"""``lca run STUDY.yaml``: a pre-registered study, run as its document says, into one run directory.

The document fixes the design (conditions, models, protocols, limits, seeds, measures), so the command line
cannot change it; only where data and results live and how progress shows. A study that is not locked (or was
edited since its lock) is refused unless the run is marked exploratory, and then the console, ``run.json``
and every eval log say so. Everything is checked before anything runs: the document, its lock, every task's
arguments (``protocols.harness.planning.plan_tasks``, the same checks as ``lca run PROTOCOL``), the models and the
data. A benchmark file that is missing is replaced by the protocol's fixture only with a ``data_missing``
deviation, never silently. Judged measures are rated after their protocol ran: blind raters (``rater_*``
roles, each with its own prompt and decoding settings) rate the measure's calibration set first (its
pre-registered file of reference codes, else a draw of the study's answers), and the study's answers are coded
only when the gate passes (``protocols.analysis.gate``: distinct raters, alpha among them and each rater's
agreement with the reference codes at the pre-registered thresholds); otherwise the refusal and its reason are
written beside the ratings, with every input of the gate.

Layout (the report reads it; docs/preregistration.md, "Running a study")::

    <out>/<study_id>/<run_id>/run.json              the manifest (protocols.study.manifest)
    <out>/<study_id>/<run_id>/logs/<protocol>/      inspect .eval logs, one per condition task
    <out>/<study_id>/<run_id>/ratings/<measure>.csv and <measure>.agreement.json
    <out>/<study_id>/LATEST                         the latest run id
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lca.errors import LCAError
from lca.provenance import code_version
from protocols.evals import protocol_metadata, protocol_task
from protocols.evals.data_paths import REPO, find_data_file
from protocols.harness.planning import RUN_ROLES, plan_tasks, task_parameter_types, task_summary
from protocols.providers.models import is_local, local_generator, resolve_model, text_generator
from protocols.study import manifest as mf
from protocols.study.judging import rate_judged, write_ratings
from protocols.study.lock import Deviation, lock_signature, read_deviations, record_deviation, require_locked
from protocols.study.panel import analysis_panel, load_calibration_set
from protocols.study.rubrics import judged_items
from protocols.study.schema import JudgedMeasure, ProtocolRun, Study, load_study

if TYPE_CHECKING:
    from inspect_ai.util import DisplayType  # inspect_ai is imported where a run starts: it is slow to load

STUDY_SUFFIXES = (".yaml", ".yml")
DEFAULT_OUT = "results/studies"
RUNNER = "lca run"
RaterFactory = Callable[[str, str], Any]  # (role, model string) -> a TextGenerator


def is_study_path(value: str) -> bool:
    return Path(value).suffix.lower() in STUDY_SUFFIXES


@dataclass(frozen=True)
class DataChoice:
    """The file a protocol reads through its data parameter; ``deviation`` says why a fixture stands in."""

    parameter: str
    path: Path
    fixture: bool
    deviation: str | None = None


@dataclass(frozen=True)
class ProtocolPlan:
    run: ProtocolRun
    conditions: tuple[str, ...]
    task_fn: Any
    planned: tuple[Any, ...]  # protocols.harness.planning.PlannedTask, every argument checked
    data: DataChoice
    task_args: tuple[str, ...]


@dataclass(frozen=True)
class StudyRunResult:
    run_id: str
    run_dir: Path
    ok: bool
    manifest: Mapping[str, Any]


def _in_repo(value: str) -> Path:
    """A relative data path as given, or under the repository when it is not there (studies name files
    repository-relative, and ``lca run`` may start elsewhere)."""
    path = Path(value).expanduser()
    if path.is_absolute() or path.exists():
        return path.resolve()
    return REPO / path if (REPO / path).exists() else path


def shown_path(path: Path) -> str:
    """A file inside the repository by its repository-relative path (the same on every checkout), any
    other absolute."""
    try:
        return Path(path).resolve().relative_to(REPO).as_posix()
    except ValueError:
        return str(Path(path).resolve())


def choose_data(run: ProtocolRun, meta, explicit: str | None) -> DataChoice:
    """The protocol's data file: the study's own argument; else, for a protocol that needs downloaded data,
    the benchmark file found like its dataset finds it (``--data``, ``$LCA_DATA``, ``../shared/data``) or
    the protocol's fixture with a deviation; else the protocol's default."""
    param = meta.data_parameter
    if param in run.args:
        path = _in_repo(str(run.args[param]))
        if not path.exists():
            raise LCAError(f"protocol '{run.name}': {param}={run.args[param]} does not exist")
        return DataChoice(param, path, fixture=_same(path, REPO / meta.fixture))
    if not run.requires_data:
        default = str(meta.config.get(param) or "")
        path = _in_repo(default) if default else REPO / meta.datasets[0].file
        return DataChoice(param, path, fixture=_same(path, REPO / meta.fixture))
    declared = declared_dataset(run, meta)
    try:
        found = find_data_file(declared.name, explicit)
    except FileNotFoundError:
        found = None
    if found is not None:
        return DataChoice(param, Path(found), fixture=False)
    where = f"--data {explicit}" if explicit else "--data, $LCA_DATA or ../shared/data"
    what = f"{meta.title}: file {declared.file} not found ({where}); ran the project fixture {meta.fixture}"
    return DataChoice(param, REPO / meta.fixture, fixture=True, deviation=what)


def declared_dataset(run: ProtocolRun, meta):
    """The dataset the run reads: with a ``split`` argument, the one named ``<protocol>_<split>`` (LongMemEval's
    ``s_dev`` or ``oracle``); else the protocol's first declared dataset."""
    split = run.args.get("split")
    if split is None:
        return meta.datasets[0]
    wanted = f"{meta.name}_{split}"
    for dataset in meta.datasets:
        if dataset.name == wanted:
            return dataset
    known = ", ".join(d.name for d in meta.datasets)
    raise LCAError(f"protocol '{run.name}': split={split} names no declared dataset {wanted} (declared: {known})")


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _arg_text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def plan_protocol(study: Study, run: ProtocolRun, explicit_data: str | None) -> ProtocolPlan:
    """One protocol's tasks, checked as ``lca run PROTOCOL`` checks them (``plan_tasks``): its conditions, the
    study's arguments, the data file and the study's first seed where the task takes a seed."""
    task_fn = protocol_task(run.name)
    meta = protocol_metadata(run.name)
    data = choose_data(run, meta, explicit_data)
    args = {name: _arg_text(value) for name, value in run.args.items()}
    args[data.parameter] = str(data.path)
    if "seed" in task_parameter_types(task_fn) and "seed" not in args:
        args["seed"] = str(study.seeds[0])
    task_args = tuple(f"{name}={value}" for name, value in args.items())
    conditions = study.protocol_conditions(run.name)
    planned = plan_tasks(task_fn, list(conditions), task_args=task_args)
    return ProtocolPlan(run, tuple(conditions), task_fn, tuple(planned), data, task_args)


def agent_roles(study: Study) -> dict[str, str]:
    """The roles the conditions use (summarizer, reviewer, grader); rater roles never reach a task."""
    return {role: model for role, model in study.models.roles.items() if role in RUN_ROLES}


def default_rater_factory() -> RaterFactory:
    """Rater generators by model string: one in-process llama.cpp runtime per local model (shared by the
    roles that name it), an inspect model on a private loop for any other."""
    made: dict[str, Any] = {}

    def factory(role: str, model: str):
        if is_local(model):
            if model not in made:
                made[model] = local_generator(model)
            return made[model]
        made[f"{role}:{model}"] = generator = text_generator(model, role=role)
        return generator

    factory.made = made  # type: ignore[attr-defined]  # run.json's served_models reads the raters' served names
    return factory


class StudyRunner:
    """One run of a study: ``prepare`` checks everything, ``run`` executes and writes the run directory.
    ``model_factory`` (tests only) turns the study's model strings into what ``eval_set`` is given; by
    default the strings themselves."""

    model_factory: Callable[[str], Any] | None = None

    def __init__(
        self,
        path: str | Path,
        *,
        exploratory: bool = False,
        data: str | None = None,
        out: str | Path = DEFAULT_OUT,
        display: DisplayType = "rich",
        retry_attempts: int = 0,
        rater_factory: RaterFactory | None = None,
        model_factory: Callable[[str], Any] | None = None,
        echo: Callable[[str], None] = print,
    ) -> None:
        if model_factory is not None:
            self.model_factory = model_factory
        self.path = Path(path)
        self.exploratory = exploratory
        self.data = data
        self.out = Path(out)
        self.display = display
        self.retry_attempts = retry_attempts
        self.rater_factory = rater_factory
        self.echo = echo

    # ---- checks before anything runs ----------------------------------------------------------------
    def prepare(self) -> None:
        if self.data and Path(self.data).is_file():
            raise LCAError(f"--data {self.data}: a study's --data is a folder holding the benchmark files")
        self.study = load_study(self.path)
        self.status = require_locked(self.path, self.exploratory)
        self.signature = lock_signature(self.path)  # a lock signature that does not hold is refused here
        self.plans = [plan_protocol(self.study, run, self.data) for run in self.study.protocols]
        self.roles = agent_roles(self.study)
        for model in dict.fromkeys([self.study.models.agent, *self.study.models.roles.values()]):
            resolve_model(model)
        # read (and checked against its sha256) once more: the file may have changed since the document loaded
        self.calibration_sets = {m.id: load_calibration_set(m) for m in self.study.judged_measures()}

    # ---- the run ------------------------------------------------------------------------------------
    def run(self) -> StudyRunResult:
        self.prepare()
        study = self.study
        started = mf.utc_now()
        clock = time.monotonic()
        study_root = self.out / study.id
        run_id, run_dir = mf.new_run_dir(study_root, started, self.exploratory)
        label = "EXPLORATORY" if self.exploratory else "confirmatory"
        self.echo(f"[{study.id}] {label} run {run_id}: {self.status.detail}; lock {self.signature.short()}")
        if self.exploratory:
            self.echo(f"[{study.id}] EXPLORATORY: every log, run.json and report of this run says so")
        deviations = self._deviations()
        manifest = self._manifest(run_id, started, deviations)
        mf.write_json(run_dir / mf.RUN_FILE, manifest)

        entries, logs = [], {}
        for plan in self.plans:
            entry, locations = self._run_protocol(plan, run_dir, run_id)
            entries.append(entry)
            logs[plan.run.name] = locations
            manifest["protocols"] = entries + [self._protocol_entry(p, run_dir) for p in self.plans[len(entries) :]]
            mf.write_json(run_dir / mf.RUN_FILE, manifest)

        manifest["ratings"] = [
            self._rate(measure, logs.get(measure.protocol) or [], entries, run_dir)
            for measure in study.judged_measures()
        ]
        finished = mf.utc_now()
        ok = all(entry["status"] == "success" for entry in entries)
        manifest.update(
            served_models=mf.served_models(entries, getattr(self.rater_factory, "made", {})),
            finished_at=mf.iso(finished),
            wall_seconds=round(time.monotonic() - clock, 2),
            status="success" if ok else "error",
        )
        mf.write_json(run_dir / mf.RUN_FILE, manifest)
        mf.write_latest(study_root, run_id)
        self.echo(f"[{study.id}] {label} run {run_id} finished in {manifest['wall_seconds']:.1f} s: {run_dir}")
        return StudyRunResult(run_id, run_dir, ok, manifest)

    def _deviations(self) -> list[dict[str, Any]]:
        """The study's deviations log as it stands, plus this run's own (a fixture standing in for missing
        data). A confirmatory run appends its deviations to the study's log (once: one already there is not
        repeated); an exploratory run keeps them in its run.json only, so it cannot alter the study's record."""
        logged = read_deviations(self.path)
        out = [{**d.to_dict(), "source": "log"} for d in logged]
        seen = {(d.kind, d.what) for d in logged}
        why = (
            "the benchmark file is absent on this machine; the fixture keeps every step running, so the "
            "predictions on this protocol are a pipeline check, not a test"
        )
        for plan in self.plans:
            what = plan.data.deviation
            if what is None:
                continue
            self.echo(f"[{self.study.id}] DEVIATION (data_missing): {what}")
            if (("data_missing", what)) in seen:
                continue
            if self.exploratory:
                deviation = Deviation(mf.iso(mf.utc_now()), what, why, RUNNER, "data_missing")
            else:
                deviation = record_deviation(self.path, what, why, by=RUNNER, kind="data_missing")
            seen.add(("data_missing", what))
            out.append({**deviation.to_dict(), "source": "run"})
        return out

    def _manifest(self, run_id: str, started, deviations: list[dict[str, Any]]) -> dict[str, Any]:
        study, status = self.study, self.status
        models = [study.models.agent, *study.models.roles.values()]
        self.model_files = mf.model_files(models, self.out / mf.GGUF_CACHE_FILE)
        return {
            "study_id": study.id,
            "study_path": str(self.path),
            "study_title": study.title,
            "study_version": study.version,
            "run_id": run_id,
            "study_sha256": status.sha256,
            "lock": status.lock.to_dict() if status.lock else None,
            "lock_state": status.state,
            "lock_detail": status.detail,
            "lock_signature": self.signature.to_dict(),
            "exploratory": self.exploratory,
            "code_revision": code_version(),
            "started_at": mf.iso(started),
            "finished_at": None,
            "wall_seconds": None,
            "status": "running",
            "seeds": list(study.seeds),
            "seed_used": study.seeds[0],
            "models": {"agent": study.models.agent, "roles": dict(study.models.roles)},
            "model_files": self.model_files,
            "served_models": {},  # at the end: per model string, the model names its API answered with
            "embedder": study.embedder,
            "embedder_id": mf.embedder_id(study.embedder),
            "packages": mf.package_versions(),
            "datasets": [
                {
                    "protocol": plan.run.name,
                    "file": shown_path(plan.data.path),
                    "sha256": mf.sha256_of(plan.data.path) if plan.data.path.is_file() else None,
                    "fixture": plan.data.fixture,
                }
                for plan in self.plans
            ],
            "protocols": [self._protocol_entry(plan, None) for plan in self.plans],
            "calibration_sets": [
                {"measure": measure, **calibration.summary()}
                for measure, calibration in self.calibration_sets.items()
                if calibration is not None
            ],
            "deviations": deviations,
            "ratings": [],
            "platform": mf.platform_info(),
        }

    def _sample_shuffle(self, plan: ProtocolPlan) -> int | None:
        """inspect's ``sample_shuffle`` seed for a shuffled protocol: the study's first seed plus one, since
        inspect reads 0 as "do not shuffle"."""
        return self.study.seeds[0] + 1 if plan.run.shuffle else None

    def _protocol_entry(self, plan: ProtocolPlan, run_dir: Path | None) -> dict[str, Any]:
        return {
            "name": plan.run.name,
            "conditions": list(plan.conditions),
            "limit": plan.run.limit,
            "sample_shuffle": self._sample_shuffle(plan),
            "args": dict(plan.run.args),
            "task_args": list(plan.task_args),
            "data": {"file": shown_path(plan.data.path), "fixture": plan.data.fixture},
            "log_dir": str(run_dir / "logs" / plan.run.name) if run_dir else None,
            "status": "pending",
            "wall_seconds": None,
            "skipped_reason": None,
            "error": None,
            "tasks": [],
            "shortfalls": {},
        }

    def _run_protocol(self, plan: ProtocolPlan, run_dir: Path, run_id: str) -> tuple[dict[str, Any], list[str]]:
        entry = self._protocol_entry(plan, run_dir)
        return self.evaluate(plan, run_id, run_dir / "logs" / plan.run.name, entry, plan.planned, plan.run.limit)

    def evaluate(
        self,
        plan: ProtocolPlan,
        run_id: str,
        log_dir: Path,
        entry: dict[str, Any],
        planned: Sequence[Any],
        limit: int | tuple[int, int] | None,
        label: str | None = None,
    ) -> tuple[dict[str, Any], list[str]]:
        """One eval_set over ``planned`` (a protocol's tasks, or one of them for a work unit) with ``limit`` (the
        study's count, or a unit's ``(start, stop)`` slice of the same shuffled order), into ``log_dir``; fills
        ``entry`` (status, tasks, shortfalls, error, wall time). The single-process run and every work unit of a
        sharded run (protocols/study/units.py) run through here."""
        from inspect_ai import eval_set  # inspect is slow to load: `lca run` checks a study without it

        name = label or plan.run.name
        shown = plan.run.limit if plan.run.limit is not None else "all"
        shown = f"{shown}, slice {limit[0]}:{limit[1]}" if isinstance(limit, tuple) else shown
        conditions = ", ".join(task.label for task in planned)
        self.echo(f"[{self.study.id}] {name}: start ({conditions}; limit {shown})")
        clock = time.monotonic()
        locations: list[str] = []
        try:
            mf.use_embedder(self.study.embedder)  # a work unit's process too: its stores are built with the study's
            tasks = [task.build(plan.task_fn) for task in planned]
            as_model = self.model_factory or (lambda model: model)
            ok, logs = eval_set(
                tasks,
                log_dir=str(log_dir),
                model=as_model(self.study.models.agent),
                model_roles={role: as_model(model) for role, model in self.roles.items()} or None,
                limit=limit,
                sample_shuffle=self._sample_shuffle(plan),
                display=self.display,
                retry_attempts=self.retry_attempts,
                metadata=self._log_metadata(run_id),
                tags=[f"study:{self.study.id}", "exploratory" if self.exploratory else "confirmatory"],
            )
        except Exception as exc:  # one failed protocol is recorded, and the others still run
            entry.update(status="error", error=f"{type(exc).__name__}: {exc}")
        else:
            entry["tasks"] = [task_summary(log) for log in logs]
            locations = [log.location for log in logs if log.location]
            for task in entry["tasks"]:
                for kind, count in task["shortfalls"].items():
                    entry["shortfalls"][kind] = entry["shortfalls"].get(kind, 0) + count
            failed = [log for log in logs if log.status != "success"]
            entry["status"] = "success" if ok and not failed else "error"
            if failed or not ok:
                first = next((log.error.message for log in failed if log.error), "eval_set reported failure")
                names = ", ".join(log.eval.task for log in failed) or "the eval set"
                entry["error"] = f"not successful: {names}: {first}"
        entry["wall_seconds"] = round(time.monotonic() - clock, 2)
        self.echo(f"[{self.study.id}] {name}: {entry['status']} in {entry['wall_seconds']:.1f} s")
        if entry["error"]:
            self.echo(f"[{self.study.id}] {name}: {entry['error']}")
        return entry, locations

    def _log_metadata(self, run_id: str) -> dict[str, Any]:
        return {
            "study_id": self.study.id,
            "study_run_id": run_id,
            "study_sha256": self.status.sha256,
            "lock_state": self.status.state,
            "exploratory": self.exploratory,
        }

    # ---- judged measures ----------------------------------------------------------------------------
    def _rate(self, measure: JudgedMeasure, locations: Sequence[str], entries, run_dir: Path) -> dict[str, Any]:
        ratings_dir = run_dir / "ratings"
        ratings_dir.mkdir(exist_ok=True)
        csv_path = ratings_dir / f"{measure.id}.csv"
        json_path = ratings_dir / f"{measure.id}.agreement.json"
        status = next((e for e in entries if e["name"] == measure.protocol), None)
        if status is None or status["status"] != "success":
            reason = f"not rated: protocol '{measure.protocol}' did not finish ({(status or {}).get('error')})"
            return self._refuse(measure, json_path, None, reason, calibration=0, coded=0)
        seed = self.study.seeds[0]
        note = self._panel_note(measure)
        if note:
            self.echo(f"[{self.study.id}] {measure.id}: NOTE: {note}")
        calibration_set = self.calibration_sets.get(measure.id)
        items, samples = judged_items(measure, locations)  # a registered rubric's views, else probe and answer
        result = rate_judged(
            measure,
            items,
            self._rater_generators(measure),
            seed=seed,
            resamples=self.study.analysis.bootstrap.resamples,
            identities=self._identities(measure),
            calibration_set=calibration_set,
        )
        codes = calibration_set.codes() if calibration_set is not None else None
        write_ratings(csv_path, result.frame, items, samples, measure.protocol, seed, codes)
        for check in result.gate.checks if result.gate is not None else ():
            mark = "ok" if check.passes else "FAILS"
            self.echo(f"[{self.study.id}] {measure.id}: gate {check.name}: {mark}: {check.detail}")
        if result.refused:
            assert result.reason is not None  # a refused coding always says why (rate_judged)
            return self._refuse(measure, json_path, result, result.reason, len(result.calibration), len(result.coded))
        mf.write_json(
            json_path, self._agreement_data(measure, result, None, len(result.calibration), len(result.coded))
        )
        alpha, (low, high) = result.report.alpha, result.report.alpha_ci
        self.echo(
            f"[{self.study.id}] {measure.id}: the gate passes (alpha among the raters {alpha:.3f}, 95% CI {low:.3f} "
            f"to {high:.3f}, threshold {measure.agreement_threshold:g}); coded {len(result.coded)} study item(s)"
        )
        return {
            "measure": measure.id,
            "csv": str(csv_path),
            "agreement": str(json_path),
            "refused": False,
            "reason": None,
        }

    def _rater_generators(self, measure: JudgedMeasure) -> dict[str, Any]:
        if self.rater_factory is None:
            self.rater_factory = default_rater_factory()
        factory = self.rater_factory
        roles = self.study.models.roles
        return {role: factory(role, roles[role]) for role in measure.rater_panel.raters}

    def _identities(self, measure: JudgedMeasure) -> dict[str, Any]:
        """Each rater's identity: its model (with the GGUF's sha256 for a local one), prompt and settings."""
        from protocols.analysis.gate import model_identities  # pandas, krippendorff: loaded when rating starts

        models = {role: self.study.models.roles.get(role) for role in measure.rater_panel.raters}
        files = getattr(self, "model_files", None) or {}
        return model_identities(analysis_panel(measure), models, self.study.seeds[0], files)

    def _panel_note(self, measure: JudgedMeasure) -> str | None:
        """Raters of one model with different prompts or settings are distinct raters, but not independent
        minds: the report says so beside their agreement. (Raters of one model with one prompt and one setting
        are one rater, and the gate refuses them.)"""
        from protocols.analysis.gate import same_identity

        identities = self._identities(measure)
        models = [identity.model_sha256 or identity.model for identity in identities.values()]
        if len(set(models)) == len(models) or same_identity(identities):
            return None
        shared = sorted({str(identity.model) for identity in identities.values()})
        return (
            f"raters {', '.join(measure.rater_panel.raters)} share a model ({', '.join(shared)}) and differ in their "
            "prompt or decoding settings: distinct raters, not independent judges; their agreement with the "
            "reference codes is what shows the scheme can be applied"
        )

    def _agreement_data(self, measure, result, reason, calibration: int, coded: int) -> dict[str, Any]:
        report = result.report if result is not None else None
        gate = result.gate if result is not None else None
        base = report.to_dict() if report is not None else {"measure": measure.id, "level": measure.level}
        base.setdefault("threshold", measure.agreement_threshold)
        identities = self._identities(measure)
        return {
            "panel_note": self._panel_note(measure),
            **base,
            "passes": bool(report is not None and report.passes and reason is None),
            "refused": reason is not None,
            "reason": reason,
            "calibration_items": calibration,
            "coded_items": coded,
            "raters": {role: self.study.models.roles.get(role) for role in measure.rater_panel.raters},
            "gate": gate.to_dict()
            if gate is not None
            else {"panel": [identity.to_dict() for identity in identities.values()], "checks": [], "reason": reason},
            "exploratory": self.exploratory,
        }

    def _refuse(self, measure, json_path: Path, result, reason: str, calibration: int, coded: int) -> dict[str, Any]:
        mf.write_json(json_path, self._agreement_data(measure, result, reason, calibration, coded))
        self.echo(f"[{self.study.id}] {measure.id}: CODING REFUSED: {reason}")
        csv_path = json_path.with_name(f"{measure.id}.csv")
        return {
            "measure": measure.id,
            "csv": str(csv_path) if csv_path.exists() else None,
            "agreement": str(json_path),
            "refused": True,
            "reason": reason,
        }


def run_study(path: str | Path, **options: Any) -> StudyRunResult:
    """Run the study at ``path`` (see ``StudyRunner`` for the options)."""
    return StudyRunner(path, **options).run()
