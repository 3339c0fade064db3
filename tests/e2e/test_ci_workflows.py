"""The CI files in docs/ci/ run here, as their CI service would run them.

Each file is read as YAML and its job is played twice — a build of the main branch
with nothing to compare against, then a pull/merge request whose baseline is that
build — through a stand-in CI service that keeps caches and artifacts between runs:

* shell steps (GitHub `run:`, GitLab `script:` then `after_script:`) run for real in
  bash, in file order, with the file's environment and the variables the CI service
  provides pointing into a temporary checkout; `edgebuild` on PATH is this tree's CLI;
* the setup (GitHub `id: setup`, GitLab `before_script:`) is skipped: this test's
  environment is what it installs;
* actions and GitLab keywords are played by stand-ins that check what they consume
  (the cache folder, the baseline, junit.xml, the uploaded folder); an action the
  stand-ins do not know fails the test, so the file cannot drift away from it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FASHION, REPO, SessionBuild, skip_if_the_machine_was_busy

GITHUB = REPO / "docs" / "ci" / "github-actions.yml"
GITLAB = REPO / "docs" / "ci" / "gitlab-ci.yml"
EDGEBUILD_LINE = re.compile(r"^\s*edgebuild\s+run\s", re.MULTILINE)

needs_fashion = pytest.mark.skipif(
    not FASHION.is_dir(), reason="needs the Debian package dataset-fashion-mnist "
    "(scripts/setup.sh): the CI files build recipes/fashion-mnist.yaml")


@dataclass
class CiService:
    """What a CI service keeps between runs: one cache, and artifacts by name."""

    root: Path
    artifacts: dict[str, Path] = field(default_factory=dict)

    @property
    def cache(self) -> Path:
        return self.root / "cache"

    def keep(self, name: str, source: Path, paths: list[str] | None = None) -> None:
        """Store `source` (or only `paths` inside it, kept at their places) as `name`."""
        target = self.root / "artifacts" / name
        shutil.rmtree(target, ignore_errors=True)
        if paths is None:
            shutil.copytree(source, target)
        for path in paths or []:
            shutil.copytree(source / path, target / path)
        self.artifacts[name] = target


@dataclass
class Job:
    """One run of a job: the checkout, and what each step did."""

    workspace: Path
    steps: list[tuple[str, int, str]] = field(default_factory=list)  # name, exit, log

    @property
    def failed(self) -> bool:
        return any(code != 0 for _, code, _ in self.steps)

    def step(self, name: str) -> tuple[int, str]:
        found = [(code, log) for step, code, log in self.steps if step == name]
        assert len(found) == 1, (name, [s for s, _, _ in self.steps])
        return found[0]

    @property
    def out(self) -> Path:
        return self.workspace / "build" / "edgebuild"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory,
            fashion_mnist_build: SessionBuild) -> CiService:
    """One stand-in service for both files. Its cache starts as the session's build of
    the same recipe (tests/conftest.py: fashion_mnist_build), as a CI cache restored from
    an earlier pipeline would: the real finetune runs once in the suite, not again here."""
    ci = CiService(tmp_path_factory.mktemp("ci-service"))
    shutil.copytree(fashion_mnist_build.cache, ci.cache,
                    ignore=shutil.ignore_patterns("locks", "tmp"))
    return ci


def checkout(root: Path) -> Path:
    """A checkout of the project (the parts the recipe reads), and `edgebuild` on PATH."""
    workspace = root / "workspace"
    workspace.mkdir(parents=True)
    for name in ("recipes", "targets", "pyproject.toml"):
        (workspace / name).symlink_to(REPO / name)
    tools = root / "bin"
    tools.mkdir()
    shim = tools / "edgebuild"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m edgebuild "$@"\n')
    shim.chmod(0o755)
    return workspace


def base_env(root: Path, provided: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EDGEBUILD_")}
    env["PATH"] = f"{root / 'bin'}{os.pathsep}{env['PATH']}"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return {**env, "CI": "true", **provided}


def bash(script: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """A shell step as both services run it: bash, stop at the first failing command."""
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
                            cwd=cwd, env=env, capture_output=True, text=True, timeout=1500,
                            check=False)
    return result.returncode, result.stdout + result.stderr


# ---------------------------------------------------------------- GitHub Actions

def github_value(value: Any, context: dict[str, str]) -> str:
    """`${{ env.X }}` and `${{ github.workspace }}`; any other expression is an error
    where this test reads the value (a cache key's hashFiles() is never read)."""
    def one(match: re.Match[str]) -> str:
        expression = match.group(1).strip()
        if expression not in context:
            pytest.fail(f"the test cannot evaluate ${{{{ {expression} }}}}; extend github_value")
        return context[expression]

    return re.sub(r"\$\{\{(.*?)\}\}", one, str(value))


def run_github(workflow: dict[str, Any], service: CiService, root: Path) -> Job:
    workspace = checkout(root)
    provided = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(workspace),
                "GITHUB_STEP_SUMMARY": str(root / "step_summary.md"),
                "GITHUB_PATH": str(root / "github_path"), "RUNNER_TEMP": str(root)}
    context = {"github.workspace": str(workspace)}
    env = base_env(root, provided)
    for key, value in workflow.get("env", {}).items():
        env[key] = context[f"env.{key}"] = github_value(value, context)
    (job_spec,) = workflow["jobs"].values()
    job = Job(workspace)
    for number, step in enumerate(job_spec["steps"]):
        name = step.get("name") or step.get("id") or step.get("uses") or f"step {number}"
        condition = step.get("if")
        assert condition in (None, "always()"), f"{name}: the test knows no `if: {condition}`"
        if job.failed and condition is None:
            continue  # GitHub skips it: an earlier step failed
        if step.get("id") == "setup":
            continue  # installs what this test's environment already has
        step_env = {**env, **{k: github_value(v, context) for k, v in step.get("env", {}).items()}}
        if "run" in step:
            code, log = bash(step["run"], workspace, step_env)
        else:
            inputs = {k: github_value(v, context) for k, v in step.get("with", {}).items()
                      if k not in ("key", "restore-keys")}
            code, log = github_action(step["uses"], inputs, workspace, service)
        job.steps.append((name, code, log))
    return job


def github_action(uses: str, inputs: dict[str, str], workspace: Path,
                  service: CiService) -> tuple[int, str]:
    """A stand-in for each action the workflow uses; it checks what the action reads."""
    action = uses.split("@", 1)[0]
    path = workspace / inputs["path"] if "path" in inputs else workspace
    if action in ("actions/checkout", "actions/setup-python"):
        return 0, "the test's checkout and Python"
    if action == "actions/cache/restore":
        if service.cache.is_dir():
            shutil.copytree(service.cache, path, dirs_exist_ok=True)
            return 0, "cache restored"
        return 0, "cache not found"
    if action == "actions/cache/save":
        assert path.is_dir(), f"nothing to cache at {path}"
        shutil.rmtree(service.cache, ignore_errors=True)
        shutil.copytree(path, service.cache)
        return 0, "cache saved"
    if action == "dawidd6/action-download-artifact":
        assert inputs["branch"] == "main"
        kept = service.artifacts.get(f"github:{inputs['name']}")
        if kept is None:
            assert inputs.get("if_no_artifact_found") in ("warn", "ignore"), \
                "the first run on main has no baseline: it must not fail"
            return 0, "warning: no artifact found"
        shutil.copytree(kept, path)
        return 0, f"downloaded {inputs['name']}"
    if action == "dorny/test-reporter":
        assert inputs["reporter"] == "java-junit"
        suite = ET.parse(path).getroot()
        assert suite.tag == "testsuite" and int(suite.get("tests", "0")) > 0
        return 0, f"published {suite.get('tests')} tests"
    if action == "actions/upload-artifact":
        assert path.is_dir(), f"nothing to upload at {path}"
        service.keep(f"github:{inputs['name']}", path)
        return 0, f"uploaded {inputs['name']}"
    pytest.fail(f"no stand-in for the action {uses}: add one to github_action()")


# ---------------------------------------------------------------- GitLab CI

def gitlab_expand(value: Any, variables: dict[str, str]) -> str:
    """GitLab expands `$VAR` and `${VAR}` in variables with the ones already defined."""
    return re.sub(r"\$\{?(\w+)\}?", lambda m: variables.get(m.group(1), m.group(0)), str(value))


def run_gitlab(pipeline: dict[str, Any], service: CiService, root: Path) -> Job:
    workspace = checkout(root)
    provided = {"GITLAB_CI": "true", "CI_PROJECT_DIR": str(workspace),
                "CI_PROJECT_PATH": "group/app", "CI_DEFAULT_BRANCH": "main",
                "CI_JOB_NAME": "edgebuild"}
    spec = pipeline["edgebuild"]
    variables = dict(provided)
    for key, value in {**pipeline.get("variables", {}), **spec.get("variables", {})}.items():
        variables[key] = gitlab_expand(value, variables)
    env = base_env(root, variables)
    job = Job(workspace)
    cache = spec["cache"]
    assert cache["when"] == "always"
    (cache_path,) = cache["paths"]
    if service.cache.is_dir():
        shutil.copytree(service.cache, workspace / cache_path, dirs_exist_ok=True)
    (need,) = spec["needs"]
    assert gitlab_expand(need["ref"], variables) == "main" and need["artifacts"] is True
    assert gitlab_expand(need["project"], variables) == "group/app"
    kept = service.artifacts.get(f"gitlab:{need['job']}")
    if kept is not None:  # unpacked where the default branch's job wrote them
        shutil.copytree(kept, workspace, dirs_exist_ok=True)
    assert spec["before_script"], "the setup the test's environment stands for"
    job.steps.append(("script", *bash("\n".join(spec["script"]), workspace, env)))
    job.steps.append(("after_script", *bash("\n".join(spec["after_script"]), workspace, env)))
    artifacts = spec["artifacts"]
    assert artifacts["when"] == "always"
    junit = ET.parse(workspace / artifacts["reports"]["junit"]).getroot()
    assert junit.tag == "testsuite" and int(junit.get("tests", "0")) > 0
    for path in artifacts["paths"]:
        assert (workspace / path).is_dir(), f"artifact path {path} is missing"
    service.keep("gitlab:edgebuild", workspace, artifacts["paths"])
    assert (workspace / cache_path).is_dir()
    shutil.rmtree(service.cache, ignore_errors=True)
    shutil.copytree(workspace / cache_path, service.cache)
    return job


# ---------------------------------------------------------------- the checks

def edgebuild_log(job: Job) -> str:
    found = [log for _, _, log in job.steps if "edgebuild: summary.md: " in log]
    assert len(found) == 1, "no step printed the report paths:\n" + "\n".join(
        f"--- {name} (exit {code})\n{log}" for name, code, log in job.steps)
    return found[0]


def report_of(job: Job, log: str) -> dict[str, Any]:
    code = next(code for _, code, text in job.steps if text == log)
    if code != 0 and (job.out / "report.json").is_file():
        skip_if_the_machine_was_busy(job.out)
    assert code == 0, log
    skip_if_the_machine_was_busy(job.out)  # a noisy figure would not stay cached
    report: dict[str, Any] = json.loads((job.out / "report.json").read_text())
    return report


def check_outputs(job: Job, log: str) -> None:
    """What the later steps consume exists, and the log is CI-shaped."""
    assert "\r" not in log
    for name in ("summary.md", "junit.xml", "report.html", "report.json"):
        assert f"edgebuild: {name}: {(job.out / name).resolve()}" in log
        assert (job.out / name).is_file()
    assert (job.out / "artifacts" / "host-cpu" / "model.onnx").is_file()


def check_main_then_request(first: Job, second: Job) -> dict[str, Any]:
    """Main: budgets only, nothing to compare with. Request: the baseline gate ran."""
    log = edgebuild_log(first)
    report = report_of(first, log)
    check_outputs(first, log)
    assert "report to compare with" in log
    assert [g["gate"] for g in report["targets"][0]["gates"]] == \
        ["accuracy", "latency", "size"]

    log = edgebuild_log(second)
    report = report_of(second, log)
    check_outputs(second, log)
    assert (second.workspace / "baseline" / "report.json").is_file()
    assert (second.workspace / "baseline" / "artifacts" / "host-cpu" / "model.onnx").is_file()
    gates = {g["gate"]: g for g in report["targets"][0]["gates"]}
    regression = gates["regression"]
    assert regression["status"] in ("passed", "undecided", "failed")
    assert regression["measured"]["ratio"] > 0 and regression["details"]["blocks"] >= 8
    stages = {s["id"]: s for s in report["stages"]}
    # Built, or cached when the other file's test already timed the same two artifacts.
    assert stages["compare-latency@host-cpu"]["outcome"] in ("built", "cached")
    # The restored cache served everything the main run built.
    assert all(s["cached"] for i, s in stages.items() if i != "compare-latency@host-cpu")
    assert not second.failed or report["exit_code"] != 0
    return report


def edgebuild_commands(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if EDGEBUILD_LINE.match(line)]


def test_both_files_run_the_same_edgebuild_command() -> None:
    """One `edgebuild run` in each file, the same one: what the slow tests below run."""
    github = yaml.safe_load(GITHUB.read_text())
    gitlab = yaml.safe_load(GITLAB.read_text())
    (job,) = github["jobs"].values()
    from_github = [c for step in job["steps"] for c in edgebuild_commands(step.get("run", ""))]
    from_gitlab = [c for line in gitlab["edgebuild"]["script"] for c in edgebuild_commands(line)]
    assert from_github == from_gitlab == [
        'edgebuild run "$RECIPE" --target "$TARGET" --out "$EDGEBUILD_OUT" --ci '
        '"${baseline[@]}"']
    for variables in (github["env"], gitlab["variables"]):
        assert variables["RECIPE"] == "recipes/fashion-mnist.yaml"
        assert variables["EDGEBUILD_OUT"] == "build/edgebuild"
        assert (REPO / variables["RECIPE"]).is_file()


@pytest.mark.slow
@needs_fashion
def test_github_actions_workflow(service: CiService, tmp_path: Path) -> None:
    workflow = yaml.safe_load(GITHUB.read_text())
    main = run_github(workflow, service, tmp_path / "main")
    assert main.step("Download the main branch's report") == (0, "warning: no artifact found")
    request = run_github(workflow, service, tmp_path / "pull-request")
    code, log = request.step("Download the main branch's report")
    assert code == 0 and log == "downloaded edgebuild-report"
    report = check_main_then_request(main, request)
    summary = (tmp_path / "pull-request" / "step_summary.md").read_text()
    assert summary == (request.out / "summary.md").read_text()
    assert "| host-cpu | regression |" in summary
    assert request.step("Gates as test results")[1].startswith("published ")
    assert (request.failed, report["exit_code"]) in ((False, 0), (True, 1))


@pytest.mark.slow
@needs_fashion
def test_gitlab_ci_job(service: CiService, tmp_path: Path) -> None:
    pipeline = yaml.safe_load(GITLAB.read_text())
    main = run_gitlab(pipeline, service, tmp_path / "main")
    request = run_gitlab(pipeline, service, tmp_path / "merge-request")
    report = check_main_then_request(main, request)
    code, log = request.step("after_script")
    assert code == 0 and "| host-cpu | regression |" in log  # summary.md in the job log
    assert (request.failed, report["exit_code"]) in ((False, 0), (True, 1))


def test_stand_ins_refuse_what_they_do_not_know(tmp_path: Path) -> None:
    """An action without a stand-in, or an expression the test cannot evaluate, fails
    loudly instead of being skipped."""
    unknown: list[Callable[[], object]] = [
        lambda: github_action("someone/deploy@v1", {}, tmp_path, CiService(tmp_path)),
        lambda: github_value("${{ secrets.TOKEN }}", {}),
    ]
    for call in unknown:
        with pytest.raises(pytest.fail.Exception):
            call()
