"""`--load`: run each workload's benchmark Job (llm_eks.verify.derive.load_specs renders it from the environment's
benchmark chart) through the API server, wait for it, read `vllm bench serve`'s result from its pod's log, and delete
it. The judgement of the result is llm_eks.verify.checks_load.

One load Job per workload at a time (`<benchmark>-load`, the one name Role llm-eks-load may read and delete): a Job of
that name that has finished is deleted and created anew; one still running is an error (another load run is under
way). The Jobs are deleted when the command ends, however it ends (a signal included), so no load outlives it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence

from llm_eks.error_codes import E505
from llm_eks.manifests.benchmark import CONTAINER, RESULT_MARKER
from llm_eks.manifests.verifier.reads import PODS, Read
from llm_eks.verify.checks_load import LoadResult, LoadSpec
from llm_eks.verify.kube import ClusterError, Kube
from llm_eks.verify.observed import EMPTY, Object, condition, created, status

JOBS = Read("batch", "v1", "jobs", namespaced=True, verbs=("create", "get", "delete"))
# Set by the Job controller on its pods (Kubernetes 1.27+; the short `job-name` too).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
# Seconds between two looks at the Jobs, and past a Job's activeDeadlineSeconds before verify gives up on it.
POLL_SECONDS = 10.0
GRACE_SECONDS = 120.0
LOG_LINES = 40


def finished(job: Object | None) -> str | None:
    """ "Complete" or "Failed" once the Job controller says so (its conditions), else None."""
    for kind in ("Complete", "Failed"):
        c = condition(job or EMPTY, kind)
        if c is not None and c.get("status") == "True":
            return kind
    return None


def parse_result(log: str) -> dict[str, object] | None:
    """The JSON after the last result marker of the Job's log, None when there is none."""
    lines = log.splitlines()
    marks = [i for i, line in enumerate(lines) if line.strip() == RESULT_MARKER]
    if not marks or marks[-1] + 1 >= len(lines):
        return None
    try:
        parsed = json.loads(lines[marks[-1] + 1])
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _start(kube: Kube, spec: LoadSpec) -> None:
    code, answer = kube.create(JOBS.path(namespace=spec.namespace), spec.job)
    if code != 409:
        return
    existing = kube.get(JOBS.path(spec.job_name, spec.namespace))
    if existing is not None and finished(existing) is None:
        raise ClusterError(
            E505,
            f"load: Job {spec.namespace}/{spec.job_name} is still running (another load run?); wait for it or "
            f"delete it: kubectl -n {spec.namespace} delete job {spec.job_name}",
        )
    # A finished run's Job (its TTL not yet over): replace it.
    kube.delete(JOBS.path(spec.job_name, spec.namespace))
    for _ in range(30):
        code, answer = kube.create(JOBS.path(namespace=spec.namespace), spec.job)
        if code != 409:
            return
        time.sleep(1)  # the old Job is still being deleted
    raise ClusterError(
        E505, f"load: Job {spec.namespace}/{spec.job_name} could not be replaced: {answer.get('message')}"
    )


def _collect(kube: Kube, spec: LoadSpec, state: str) -> LoadResult:
    listed = kube.get(PODS.path(namespace=spec.namespace), [("labelSelector", f"{JOB_NAME_LABEL}={spec.job_name}")])
    pods = sorted((listed or EMPTY).get("items") or (), key=lambda p: str(created(p) or ""))
    if not pods:
        return LoadResult(state, None, "no pod of the Job")
    pod = pods[-1]
    name = str((pod.get("metadata") or EMPTY).get("name"))
    log = kube.text(f"{PODS.path(name, spec.namespace)}/log", [("container", CONTAINER), ("tailLines", str(LOG_LINES))])
    if log is None:
        phase = status(pod).get("phase") or "unknown"
        return LoadResult(state, None, f"pod {name} ({phase}) has no log")
    return LoadResult(state, parse_result(log), "\n".join(log.splitlines()[-5:]))


def run_loads(
    kube: Kube,
    specs: Sequence[LoadSpec],
    *,
    say: Callable[[str], None],
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, LoadResult]:
    """Start every spec's Job, wait until each has finished, read its result; by workload name. The Jobs are deleted
    at the end whatever happens (an error, a signal), so no load outlives the command."""
    results: dict[str, LoadResult] = {}
    started: list[LoadSpec] = []
    try:
        for spec in specs:
            _start(kube, spec)
            started.append(spec)
            say(
                f"load: {spec.namespace}/{spec.job_name}: {spec.num_prompts} requests of {spec.input_len:,} "
                f"\N{RIGHTWARDS ARROW} {spec.output_len:,} tokens, {spec.concurrency} at a time"
            )
        deadline = clock() + max(
            (float(s.job["spec"].get("activeDeadlineSeconds") or 3600) for s in specs), default=0.0
        )
        pending = list(specs)
        while pending:
            for spec in list(pending):
                state = finished(kube.get(JOBS.path(spec.job_name, spec.namespace)))
                if state is not None:
                    results[spec.workload] = _collect(kube, spec, state)
                    pending.remove(spec)
                    say(f"load: {spec.namespace}/{spec.job_name} {state.lower()}")
            if pending:
                if clock() > deadline + GRACE_SECONDS:
                    names = ", ".join(f"{s.namespace}/{s.job_name}" for s in pending)
                    raise ClusterError(E505, f"load: {names} did not finish within its activeDeadlineSeconds")
                sleep(POLL_SECONDS)
    finally:
        for spec in started:
            try:
                kube.delete(JOBS.path(spec.job_name, spec.namespace))
            except Exception as err:  # the command's own outcome matters more; say what is left behind
                say(f"load: could not delete Job {spec.namespace}/{spec.job_name}: {' '.join(str(err).split())}")
    return results
