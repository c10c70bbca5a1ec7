"""``patchkit wheel``: the pinned vLLM wheel with the series applied, as a new wheel with provenance;
``--verify WHEEL``: such a wheel checked against its RECORD, its provenance, the series and the source."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from patchkit import output
from patchkit.atomic import write_atomic
from patchkit.base.archive import sha256_file
from patchkit.errors import EXIT_FAILED, EXIT_OK, UserError
from patchkit.project import Project
from patchkit.report.i18n import default_lang, message_text
from patchkit.values import Message, Pin
from patchkit.wheels import build, source, verify


@dataclass
class Options:
    series_dir: Path | None = None
    out: Path | None = None
    name: str | None = None
    version: str | None = None
    audit: Path | None = None
    verify: Path | None = None
    json_out: Path | None = None
    strict_index: bool = False


def run(project: Project, options: Options) -> int:
    series_dir, out, name, version = options.series_dir, options.out, options.name, options.version
    audit_file, json_out = options.audit, options.json_out
    if options.verify is not None:
        named_pin = project.config_option is not None or project.pin_option is not None
        if any(v is not None for v in (out, name, version)) or named_pin:
            raise UserError(
                "--verify WHEEL takes only a SERIES dir and --audit (the provenance names the rest)"
            )
        return _verify(project, options.verify, series_dir, json_out, audit_file)
    if out is None:
        raise UserError("patchkit wheel needs --out DIR (or --verify WHEEL)")
    series_dir = project.series(series_dir)
    entries, overlays = _load_series(project, series_dir)
    pin = _pin(project, series_dir)
    request = build.Request(
        pin,
        _label(project, series_dir),
        entries,
        overlays,
        name,
        version,
        _audit(audit_file, entries, pin) if audit_file else None,
        build.source_date_epoch(),
        options.strict_index,
    )
    wheel = source.fetch(pin)
    lang = default_lang()
    try:
        built = build.build(request, wheel, out)
    except build.ApplyFailed as failed:
        for problem in failed.messages:
            output.error(message_text(problem, lang))
        raise
    for note in built.notes:
        output.info(message_text(note, lang))
    sha256 = sha256_file(built.path)
    applied = sum(p["status"] != "skipped" for p in built.record["series"]["patches"])
    _result(
        message_text(
            Message(
                "wheel.built",
                {
                    "path": str(built.path),
                    "name": built.name,
                    "version": built.version,
                    "source": wheel.filename,
                    "patches": applied,
                    "files": len(built.record["files"]),
                    "sha256": sha256,
                },
            ),
            lang,
        )
    )
    if json_out is not None:
        report = {
            "command": "wheel",
            "path": str(built.path),
            "sha256": sha256,
            "name": built.name,
            "version": built.version,
            "notes": [message_text(n) for n in built.notes],
            "provenance": built.record,
        }
        write_atomic(json_out, json.dumps(report, indent=1) + "\n")
    return EXIT_OK


def _verify(project: Project, wheel: Path, series_dir: Path | None, json_out: Path | None,
            audit_file: Path | None) -> int:  # fmt: skip
    if not wheel.is_file():
        raise UserError(f"{wheel}: no such wheel file")
    if audit_file is not None and not audit_file.is_file():
        raise UserError(f"{audit_file}: no such audit JSON")

    def load(named: str) -> tuple[str, list, list]:
        found = series_dir if series_dir is not None else _named_series(project, named)
        return str(found), *_load_series(project, found)

    audit = (lambda entries, pin: _audit(audit_file, entries, pin)) if audit_file is not None else None
    result = verify.verify(wheel, load, source.fetch, audit)
    lang = default_lang()
    if result.mismatch is not None:
        output.error(message_text(Message("wheel.first-mismatch", {"mismatch": result.mismatch}), lang))
    else:
        assert result.record is not None
        _result(
            message_text(
                Message(
                    "wheel.verified",
                    {
                        "path": str(wheel),
                        "members": result.members,
                        "series": result.series,
                        "patches": len(result.record["series"]["patches"]),
                        "source": result.record["source_wheel"]["filename"],
                    },
                ),
                lang,
            )
        )
        if (audit_block := result.record.get("audit")) is not None and not result.audit_checked:
            params = {"verdict": audit_block.get("verdict"), "sha256": str(audit_block.get("sha256"))[:12]}
            output.info(message_text(Message("wheel.verified.audit-unchecked", params), lang))
    if json_out is not None:
        report = {
            "command": "wheel --verify",
            "audit_checked": result.audit_checked,
            "path": str(wheel),
            "ok": result.mismatch is None,
            "mismatch": None if result.mismatch is None else message_text(result.mismatch),
            "provenance": result.record,
        }
        write_atomic(json_out, json.dumps(report, indent=1) + "\n")
    return EXIT_OK if result.mismatch is None else EXIT_FAILED


def _result(line: str) -> None:
    """The command's result: printed under ``-q`` too (errors and the result only), as audit's verdict."""
    print(line)


def _load_series(project: Project, series_dir: Path) -> tuple[list, list]:
    from patchkit.series.files import load_entries, load_overlays

    if not (series_dir / "series").is_file():
        raise UserError("not a series directory (no 'series' file)", str(series_dir))
    overlay_dirs = [d for d in (series_dir, project.overlay_root(series_dir)) if d is not None]
    return load_entries(series_dir), load_overlays(*overlay_dirs)


def _pin(project: Project, series_dir: Path) -> Pin:
    """The pin that speaks for the series (``Project.pin``); a wheel is the package index's."""
    pin = project.pin(series_dir)
    if pin is None or (pin.source != "index" and not project.owns(series_dir)
                       and project.config_option is None and project.pin_option is None):  # fmt: skip
        raise UserError(
            "no pin: pass --config patchkit.toml (the series is not this project's own [series].dir, "
            "and its split.json names no package-index base)"
        )
    return pin


def _label(project: Project, series_dir: Path) -> str:
    """The series dir as the provenance names it: relative to the root of the project it is in
    (found from the series, not the cwd: the same wheel from any directory), else as from the cwd."""
    around = Project(series_dir)
    root = (around.root if around.config_file is not None else project.root).resolve()
    resolved = series_dir.resolve()
    return str(resolved.relative_to(root)) if resolved.is_relative_to(root) else str(resolved)


def _named_series(project: Project, named: str) -> Path:
    path = Path(named)
    found = path if path.is_absolute() else project.root / path
    if not (found / "series").is_file():
        raise UserError(
            f"the series the provenance names ({named}) is not here; pass its directory as SERIES"
        )
    return found


def _audit(path: Path, entries: list, pin: Pin) -> dict:
    """The audit's verdicts, read through the record loader and validator ``patchkit report`` uses."""
    from patchkit.commands.report import load
    from patchkit.wheels.provenance import audit_summary

    result = load(path)
    return audit_summary(result, entries, pin, hashlib.sha256(path.read_bytes()).hexdigest(), str(path))
