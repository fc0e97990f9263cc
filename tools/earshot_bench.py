"""What the peer benchmarks share: Earshot's own single-stream figure for a package."""
import json
import subprocess


def earshot_us(binary, package, audio=None):
    """Median microseconds per step of `earshot bench model` on `package` (one stream, one thread)."""
    cmd = [binary, "bench", "model", "--model", package, "--json"] + (["--audio", audio] if audio else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["us_per_chunk_median"]
