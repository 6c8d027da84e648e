#!/usr/bin/env python3
"""Validates StallWatch report files against the JSON Schema of their schemaVersion.

Usage: scripts/validate-reports.py [--schema SCHEMA] FILE|DIR...
Version 1 files are checked against Config/stall-report.schema.json, version 2 files against
Config/stall-report-2.schema.json; --schema checks every file against one schema instead.
A DIR stands for the *.json files directly in it. Needs the PyPI package `jsonschema` (pip install jsonschema).
Exit status: 0 all valid, 1 some file invalid or unreadable, 2 usage error or jsonschema missing.
"""
import argparse
import json
import pathlib
import sys

try:
    import jsonschema
except ImportError:
    print("validate-reports: the Python package 'jsonschema' is missing (pip install jsonschema)", file=sys.stderr)
    sys.exit(2)

CONFIG = pathlib.Path(__file__).resolve().parent.parent / "Config"
SCHEMAS = {1: CONFIG / "stall-report.schema.json", 2: CONFIG / "stall-report-2.schema.json"}


def report_files(arguments):
    for argument in arguments:
        path = pathlib.Path(argument)
        if path.is_dir():
            yield from sorted(p for p in path.glob("*.json") if not p.name.startswith("."))
        else:
            yield path


def main():
    parser = argparse.ArgumentParser(description="Validate StallWatch report files against the report schema.")
    parser.add_argument("--schema", type=pathlib.Path, help="one schema for every file (default: by schemaVersion)")
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR")
    options = parser.parse_args()

    def load(path):
        schema = json.loads(path.read_text())
        jsonschema.Draft202012Validator.check_schema(schema)
        return jsonschema.Draft202012Validator(schema)

    fixed = load(options.schema) if options.schema else None
    by_version = {} if fixed else {version: load(path) for version, path in SCHEMAS.items()}

    failures = 0
    checked = 0
    for path in report_files(options.paths):
        checked += 1
        try:
            document = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            print(f"{path}: unreadable: {error}", file=sys.stderr)
            failures += 1
            continue
        version = document.get("schemaVersion") if isinstance(document, dict) else None
        validator = fixed or by_version.get(version)
        if validator is None:
            print(f"{path}: no schema for schemaVersion {version!r} (known: {sorted(SCHEMAS)})", file=sys.stderr)
            failures += 1
            continue
        errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
        for error in errors:
            where = "/".join(str(part) for part in error.absolute_path) or "(top level)"
            print(f"{path}: {where}: {error.message}", file=sys.stderr)
        failures += bool(errors)
    if checked == 0:
        print("validate-reports: no report files given", file=sys.stderr)
        return 2
    print(f"validate-reports: {checked - failures} of {checked} file(s) valid")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
