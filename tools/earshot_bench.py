"""What the peer benchmarks share: Earshot's own single-stream figure for a package."""
import json
import re
import subprocess


def snake_keys(value):
    """Earshot's JSON (camelCase keys) with the snake_case keys the tools use for every runtime."""
    if isinstance(value, dict):
        return {re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), k): snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [snake_keys(v) for v in value]
    return value


def earshot_us(binary, package, audio=None):
    """Median microseconds per step of `earshot bench model` on `package` (one stream, one thread)."""
    cmd = [binary, "bench", "model", "--model", package, "--json"] + (["--audio", audio] if audio else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return snake_keys(json.loads(out.strip().splitlines()[-1]))["us_per_chunk_median"]


def replace_section(path, begin, end, new):
    """Puts `new` (which starts with `begin` and ends with `end`) in place of the file's section
    between those markers, or at its end."""
    text = path.read_text()
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: new, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n" + new + "\n"
    path.write_text(text)


def earshot_json(binary, args, cwd):
    """The last JSON line an `earshot ... --json` command prints, with snake_case keys."""
    out = subprocess.run([binary] + args + ["--json"], cwd=cwd, check=True, capture_output=True, text=True).stdout
    return snake_keys(json.loads(out.strip().splitlines()[-1]))
