"""docker/compose.yaml and docker/Dockerfile, checked without Docker.

Docker Compose is not installed on these machines, so this module loads the
compose file with PyYAML and checks the rules of the Compose specification
that would make ``docker compose up`` fail or misbehave (services, images or
builds, commands, health checks, volumes, ``depends_on`` conditions,
profiles), then checks that every command the file runs exists in this
project and parses with the tool's own argument parser: management commands
(``get_commands()``), the Celery app path and its tasks, the gunicorn WSGI
module, and the DeerFlow config files the services mount.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from deerflow.config import load_config

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
COMPOSE = DOCKER / "compose.yaml"
DOCKERFILE = DOCKER / "Dockerfile"

TOP_LEVEL = {"version", "name", "include", "services", "networks", "volumes", "configs", "secrets", "models"}
DURATION = re.compile(r"^(\d+(\.\d+)?(us|ms|s|m|h))+$")
PROFILE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]+$")
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
#: Where the image reads DeerFlow's config.yaml (Dockerfile's DEER_FLOW_CONFIG_PATH).
CONFIG_IN_CONTAINER = "/etc/deerflow/config.yaml"


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def services(compose) -> dict:
    return compose["services"]


@pytest.fixture(scope="module")
def env_file() -> dict[str, str]:
    """docker/.env.example as a dict (the compose file's ``env_file``)."""
    values = {}
    for line in (DOCKER / ".env.example").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _argv(command) -> list[str]:
    """A compose ``command``/healthcheck test as argv, with ``$$`` unescaped as Compose does."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    return [a.replace("$$", "$") for a in argv]


def _commands(services: dict) -> list[tuple[str, list[str]]]:
    return [(name, _argv(svc["command"])) for name, svc in services.items() if "command" in svc]


def _healthcheck_argvs(services: dict) -> list[tuple[str, list[str]]]:
    """``(service, argv)`` of every health check run inside a project image."""
    out = []
    for name, svc in services.items():
        test = svc.get("healthcheck", {}).get("test")
        if not test or "build" not in svc or svc["healthcheck"].get("disable"):
            continue
        test = _argv(test) if isinstance(test, list) else ["CMD-SHELL", test]
        out.append((name, test[1:] if test[0] == "CMD" else shlex.split(test[1])))
    return out


# -- Compose specification ---------------------------------------------------
def test_top_level_keys_are_compose_keys(compose):
    unknown = {k for k in compose if k not in TOP_LEVEL and not k.startswith("x-")}
    assert not unknown, f"not Compose top-level elements: {unknown}"
    assert isinstance(compose["services"], dict) and compose["services"]


def test_the_stack_has_the_required_services(services):
    assert {"postgres", "redis", "migrate", "web", "worker", "beat", "web-full"} <= set(services)
    assert services["postgres"]["image"].startswith("postgres:15")
    assert services["redis"]["image"].startswith("redis:")


def test_every_service_has_an_image_or_a_build_that_exists(services):
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        if "build" in svc:
            build = svc["build"]
            context = (DOCKER / (build if isinstance(build, str) else build["context"])).resolve()
            assert context.is_dir(), f"{name}: build context {context} missing"
            dockerfile = context / (build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")
            assert dockerfile.is_file(), f"{name}: {dockerfile} missing"


def test_commands_are_lists_of_strings_or_strings(services):
    for name, svc in services.items():
        command = svc.get("command")
        if command is not None:
            assert isinstance(command, str) or (
                isinstance(command, list) and all(isinstance(a, str) for a in command)), name


def test_health_checks_have_test_and_durations(services):
    for name, svc in services.items():
        check = svc.get("healthcheck")
        assert check, f"{name} has no health check"
        if check.get("disable"):
            assert svc.get("restart") == "no", f"{name} runs for good; it needs a health check"
            continue
        test = check["test"]
        assert isinstance(test, str) or test[0] in {"CMD", "CMD-SHELL", "NONE"}, name
        assert DURATION.match(check["interval"]), name
        for key in ("timeout", "start_period", "start_interval"):
            assert key not in check or DURATION.match(check[key]), (name, key)
        assert isinstance(check.get("retries", 3), int), name


def test_volumes_are_declared_or_bind_mounts_that_exist(compose, services):
    declared = set(compose.get("volumes") or {})
    used = set()
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":")[0] if isinstance(volume, str) else volume["source"]
            if source.startswith((".", "/", "~")):
                assert (DOCKER / source).exists(), f"{name}: bind mount {source} missing"
            else:
                assert source in declared, f"{name}: named volume {source} not declared at top level"
                used.add(source)
    assert used == declared, f"declared but unused: {declared - used}"


def test_depends_on_names_services_with_valid_conditions(services):
    for name, svc in services.items():
        depends = svc.get("depends_on") or {}
        items = {d: {} for d in depends} if isinstance(depends, list) else depends
        for target, spec in items.items():
            assert target in services, f"{name} depends on unknown {target}"
            condition = spec.get("condition", "service_started")
            assert condition in CONDITIONS, (name, target, condition)
            if condition == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target}'s health, which has no check"
            if condition == "service_completed_successfully":
                assert services[target].get("restart") == "no", f"{target} is one-shot; it must not restart"


def test_profiles_default_stack_is_delta_and_full_profile_adds_full_processes(services):
    for name, svc in services.items():
        for profile in svc.get("profiles", []):
            assert PROFILE.match(profile), (name, profile)
    default = {n for n, s in services.items() if not s.get("profiles")}
    assert default == {"postgres", "redis", "migrate", "web", "worker", "beat"}
    # Workers freeze delta whatever config.yaml's mode (maintenance): one worker serves a full fleet too.
    assert {n for n, s in services.items() if "full" in s.get("profiles", [])} == {"web-full"}
    assert {n for n, s in services.items() if "rabbitmq" in s.get("profiles", [])} == {
        "rabbitmq", "web-rabbitmq", "worker-rabbitmq", "beat-rabbitmq"}
    for name in default:  # a default service may not wait for one that only a profile starts
        assert set(services[name].get("depends_on") or {}) <= default, name


def test_env_file_and_published_ports(services):
    for name, svc in services.items():
        for path in svc.get("env_file", []):
            assert (DOCKER / path).is_file(), (name, path)
        for port in svc.get("ports", []):
            assert re.match(r"^\d+:\d+$", str(port)), (name, port)
    published = [p for s in services.values() for p in s.get("ports", [])]
    assert len({p.split(":")[0] for p in published}) == len(published), "two services publish one host port"


def test_env_example_lists_every_setting_the_dashboard_reads(env_file):
    settings_src = (REPO / "dashboard" / "settings.py").read_text(encoding="utf-8")
    read = set(re.findall(r'env_(?:str|int|float|bool|list)\(\s*"([A-Z0-9_]+)"', settings_src))
    assert read and read <= set(env_file), f"missing from docker/.env.example: {read - set(env_file)}"


# -- Dockerfile --------------------------------------------------------------
def test_dockerfile_is_slim_non_root_with_health_check():
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    assert re.search(r'pip install "?\.\[deploy\]"?', text)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}
    assert re.search(r"^HEALTHCHECK .*healthz", text, re.M | re.S)
    for source in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (REPO / source).exists(), f"COPY {source}: missing"


def test_deploy_extra_declares_gunicorn():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(req.startswith("gunicorn") for req in project["optional-dependencies"]["deploy"])


# -- every command exists in the project ---------------------------------------
def test_management_commands_resolve_and_parse(services):
    from django.core.management import get_commands, load_command_class

    commands = get_commands()
    seen = 0
    for name, argv in _commands(services):
        if argv[:2] != ["python", "manage.py"]:
            continue
        assert argv[2] in commands, f"{name}: no management command {argv[2]!r}"
        command = load_command_class(commands[argv[2]], argv[2])
        command.create_parser("manage.py", argv[2]).parse_args(argv[3:])
        seen += 1
    assert seen, "the stack runs no migrations"


def _celery_parse(argv: list[str]) -> tuple[object, click.Context]:
    """Parse ``celery -A app <sub> ...`` as the ``celery`` program does; returns (the app, the sub-command's context).

    The app is found with Celery's own ``find_app`` (what ``-A`` does); the
    sub-command's options are parsed strictly by its click command, so an
    unknown option or a bad value fails here.
    """
    from celery.app.utils import find_app
    from celery.bin.base import CLIContext
    from celery.bin.celery import celery as cli

    assert argv[0] == "celery"
    names = set(cli.list_commands(click.Context(cli)))
    split = next(i for i, a in enumerate(argv) if a in names)
    group = cli.make_context("celery", argv[1:split], resilient_parsing=True)
    app = find_app(group.params["app"])
    group.obj = CLIContext(app=app, no_color=True, workdir=None)
    sub = cli.get_command(group, argv[split])
    return app, sub.make_context(argv[split], argv[split + 1:], parent=group)


def test_celery_app_path_imports_and_has_the_job_tasks(services, settings):
    seen = 0
    for name, argv in [*_commands(services), *_healthcheck_argvs(services)]:
        if argv[0] != "celery":
            continue
        app, sub = _celery_parse([a.replace("$HOSTNAME", "container") for a in argv])
        app.loader.import_default_modules()
        assert {"jobs.dispatch", "jobs.run_thread"} <= set(app.tasks), name
        if sub.info_name == "worker":
            assert sub.params["queues"] == [settings.CELERY_TASK_DEFAULT_QUEUE], name
        if sub.info_name == "beat":  # every scheduled task exists
            assert {e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()} <= set(app.tasks), name
            assert {"threads.refresh_summary", "jobs.requeue_stalled"} <= {
                e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()}
            assert sub.params["schedule"].startswith("/var/lib/dashboard/")  # the dashboard-var volume
        seen += 1
    assert seen == 6  # two workers, their health checks, and two beats (default stack, rabbitmq profile)


def test_gunicorn_module_exists_and_command_line_parses(services):
    from gunicorn.config import Config

    seen = 0
    for name, argv in _commands(services):
        if argv[0] != "gunicorn":
            continue
        args = Config().parser().parse_args(argv[1:])
        module, _, attr = args.args[0].partition(":")
        spec = importlib.util.find_spec(module)
        assert spec and spec.origin, f"{name}: no module {module}"
        # Importing dashboard.wsgi would freeze this test process; read its assignments instead.
        tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
        assigned = {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                    for t in node.targets if isinstance(t, ast.Name)}
        assert (attr or "application") in assigned, name
        assert args.bind == ["0.0.0.0:8000"], name
        seen += 1
    assert seen == 3  # web, web-full, web-rabbitmq


def test_python_health_checks_compile(services):
    for name, argv in _healthcheck_argvs(services):
        if argv[:2] == ["python", "-c"]:
            compile(argv[2], f"<{name} healthcheck>", "exec")
            assert "/healthz" in argv[2]
    dockerfile_check = re.search(r"^HEALTHCHECK [^\n]*\\\n\s*CMD (\[[^\n]*\])$",
                                 DOCKERFILE.read_text(encoding="utf-8"), re.M)
    compile(yaml.safe_load(dockerfile_check.group(1))[2], "<Dockerfile HEALTHCHECK>", "exec")


def test_healthz_route_exists():
    from django.urls import resolve

    assert resolve("/healthz").url_name == "healthz"


def test_mounted_config_files_load_in_the_mode_of_their_services(services, env_file):
    assert env_file["DEER_FLOW_CONFIG_PATH"] == CONFIG_IN_CONTAINER
    environ = {"DATABASE_URL": env_file["DATABASE_URL"]}
    for name, svc in services.items():
        if "build" not in svc:
            continue
        mounts = [v.split(":") for v in svc["volumes"] if isinstance(v, str) and v.startswith("./")]
        configs = [source for source, target, *_ in mounts if target == CONFIG_IN_CONTAINER]
        assert len(configs) == 1, f"{name} mounts no config.yaml at {CONFIG_IN_CONTAINER}"
        loaded = load_config(DOCKER / configs[0], environ=environ)
        assert loaded.database.backend == "postgres"
        assert loaded.database.postgres_url == env_file["DATABASE_URL"]
        expected = "full" if "full" in svc.get("profiles", []) else "delta"
        assert loaded.mode == expected, name


def test_rabbitmq_profile_runs_the_stack_on_rabbitmq_with_the_servers_consumer_timeout_declared(services):
    """The profile's processes use the RabbitMQ service, and the consumer_timeout its server is given
    (docker/config/rabbitmq.conf, milliseconds) is the one they derive their task time limit from (seconds)."""
    from dashboard.brokers import broker_kind, broker_limits

    server = services["rabbitmq"]
    conf = next(v.split(":")[0] for v in server["volumes"] if v.startswith("./config/rabbitmq.conf"))
    timeout_ms = int(re.search(r"^consumer_timeout\s*=\s*(\d+)$", (DOCKER / conf).read_text(), re.M).group(1))
    for name in ("web-rabbitmq", "worker-rabbitmq", "beat-rabbitmq"):
        env = services[name]["environment"]
        assert broker_kind(env["CELERY_BROKER_URL"]) == "amqp" and "@rabbitmq:5672/" in env["CELERY_BROKER_URL"]
        assert int(env["DASHBOARD_BROKER_CONSUMER_TIMEOUT_S"]) * 1000 == timeout_ms, name
        assert set(services[name]["depends_on"]) == {"postgres", "rabbitmq", "migrate"}
        limits = broker_limits(env["CELERY_BROKER_URL"], visibility_timeout_s=0,
                               consumer_timeout_s=int(env["DASHBOARD_BROKER_CONSUMER_TIMEOUT_S"]), time_limit_s=None)
        assert limits.time_limit_s * 1000 < timeout_ms
    assert server["environment"]["RABBITMQ_DEFAULT_VHOST"] == "dashboard"
