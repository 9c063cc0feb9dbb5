"""The systemd units and environment file in deploy/: valid units whose commands `draftdesk` has."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from webapp.app import cli
from webapp.core.config import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
INSTALL = "/opt/draftdesk"
UNITS = ("draftdesk.service", "draftdesk-backup.service", "draftdesk-backup.timer")


def unit_entries(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Each section's (key, value) lines, in order (a key such as ExecStart may repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        key, sep, value = line.partition("=")
        assert sep and current is not None, f"{path.name}:{number}: not a key=value line in a section: {line!r}"
        current.append((key.strip(), value.strip()))
    return sections


def values(path: Path, section: str, key: str) -> list[str]:
    return [v for k, v in unit_entries(path)[section] if k == key]


def draftdesk_commands(path: Path) -> list[list[str]]:
    """The arguments of each ExecStart that runs the installed draftdesk."""
    commands = [shlex.split(line) for line in values(path, "Service", "ExecStart")]
    return [argv[1:] for argv in commands if argv[0] == f"{INSTALL}/.venv/bin/draftdesk"]


class TestUnits:
    def test_serve_unit_runs_serve_on_loopback_restarts_and_reads_the_env_file(self) -> None:
        unit = DEPLOY / "draftdesk.service"
        assert draftdesk_commands(unit) == [["serve", "--host", "127.0.0.1", "--port", "8000"]]
        assert values(unit, "Service", "Restart") == ["on-failure"]
        assert values(unit, "Service", "EnvironmentFile") == ["/etc/draftdesk/draftdesk.env"]
        assert values(unit, "Service", "User") == ["draftdesk"]
        assert values(unit, "Install", "WantedBy") == ["multi-user.target"]
        # Hardened, yet it may write where serve writes: the SQLite state folder and the backups.
        assert values(unit, "Service", "ProtectSystem") == ["strict"]
        assert values(unit, "Service", "NoNewPrivileges") == ["yes"]
        assert values(unit, "Service", "StateDirectory") == ["draftdesk"]
        assert values(unit, "Service", "ReadWritePaths") == ["-/var/backups/draftdesk"]

    def test_backup_service_backs_up_then_prunes_and_the_timer_starts_it_daily(self) -> None:
        service = DEPLOY / "draftdesk-backup.service"
        assert values(service, "Service", "Type") == ["oneshot"]  # the ExecStarts run in order, each after success
        assert draftdesk_commands(service) == [["db", "backup"], ["db", "prune"]]
        assert values(service, "Service", "EnvironmentFile") == ["/etc/draftdesk/draftdesk.env"]
        timer = DEPLOY / "draftdesk-backup.timer"
        assert values(timer, "Timer", "Unit") == ["draftdesk-backup.service"]
        assert values(timer, "Timer", "OnCalendar") == ["*-*-* 03:00:00"]
        assert values(timer, "Timer", "Persistent") == ["true"]
        assert values(timer, "Install", "WantedBy") == ["timers.target"]

    @pytest.mark.parametrize("unit", UNITS[:2])
    def test_every_draftdesk_command_and_option_exists(self, unit: str) -> None:
        commands = draftdesk_commands(DEPLOY / unit)
        assert commands
        for argv in commands:
            words = [a for a in argv if not a.startswith("-") and not a[0].isdigit()]
            out = CliRunner().invoke(cli.app, [*words, "--help"])
            assert out.exit_code == 0, (argv, out.output)
            for option in (a for a in argv if a.startswith("--")):
                assert option in out.output, (argv, option)

    def test_systemd_analyze_verify_finds_nothing(self, tmp_path: Path) -> None:
        """systemd's own check of the units, with the install folder pointed at this checkout."""
        analyze = shutil.which("systemd-analyze")
        if analyze is None:
            pytest.skip("systemd-analyze is not installed (the INI checks above still ran)")
        draftdesk = ROOT / ".venv" / "bin" / "draftdesk"
        assert draftdesk.exists()
        for name in UNITS:
            text = (DEPLOY / name).read_text()
            text = text.replace(f"{INSTALL}/.venv/bin/draftdesk", str(draftdesk))
            text = text.replace(f"WorkingDirectory={INSTALL}", f"WorkingDirectory={ROOT}")
            (tmp_path / name).write_text(text)
        done = subprocess.run(
            [analyze, "verify", "--man=no", *(f"./{name}" for name in UNITS)], cwd=tmp_path, capture_output=True, text=True
        )
        # verify exits 0 on unknown keys and bad values too; it reports them on stderr.
        assert done.returncode == 0 and done.stderr.strip() == "", done.stderr


def test_env_example_sets_known_settings_for_production(tmp_path: Path) -> None:
    lines = [line for line in (DEPLOY / "draftdesk.env.example").read_text().splitlines() if line and not line.startswith("#")]
    pairs = dict(line.split("=", 1) for line in lines)
    known = {f"DRAFTDESK_{name.upper()}" for name in Settings.model_fields}
    assert set(pairs) <= known, set(pairs) - known
    settings = Settings(_env_file=DEPLOY / "draftdesk.env.example")  # type: ignore[call-arg]
    assert settings.mode == "production"
    assert settings.backup_dir == Path("/var/backups/draftdesk")
    assert settings.database_url.startswith("postgresql+psycopg://")
